"""Move a stream's keys from their names before hash tags to their names now, once.

    python -m kindling.tools.valkey_migrate redis://host:6379/0 [--stream kindling:jobs ...]

Run it with the stream's workers and drains stopped (producers may keep sending: the stream
keeps its name). For each stream it moves ``<stream>:scheduled`` to ``{<stream>}:scheduled``
and ``<stream>:dead`` to ``{<stream>}:dead`` (:func:`kindling.core.valkey.keys.legacy_keys`)
with DUMP and RESTORE, which work across slots, then deletes the old key. A new key that
exists already is merged into (delayed jobs: ZADD; dead entries: XADD) rather than
replaced. Kick flags are not moved: they expire within minutes. Prints what it moved.
"""

from __future__ import annotations

import sys

from kindling.core.valkey.keys import DEFAULT_STREAM, legacy_keys
from kindling.shared.valkey.connection import connect


def migrate(client, stream: str) -> dict[str, int]:
    """Move ``stream``'s scheduled set and dead stream to their hash-tagged names; how many
    members or entries each old key held (0: it did not exist)."""
    moved: dict[str, int] = {}
    for old, new in legacy_keys(stream, flags=0).items():
        kind = client.execute_command("TYPE", old)
        kind = kind.decode() if isinstance(kind, bytes) else str(kind)
        if kind == "none":
            moved[old] = 0
            continue
        if not client.exists(new):
            ttl = client.execute_command("PTTL", old)
            client.execute_command("RESTORE", new, max(int(ttl), 0), client.execute_command("DUMP", old))
            moved[old] = client.zcard(new) if kind == "zset" else client.xlen(new)
        elif kind == "zset":
            members = client.zrangebyscore(old, "-inf", "+inf", withscores=True)
            if members:
                client.zadd(new, dict(members))
            moved[old] = len(members)
        else:
            entries = client.xrange(old)
            for _, fields in entries:
                client.xadd(new, fields)
            moved[old] = len(entries)
        client.delete(old)
    return moved


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0].startswith("-"):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    url, streams = args[0], []
    rest = args[1:]
    while rest:
        flag = rest.pop(0)
        if flag != "--stream" or not rest:
            print(f"unknown argument {flag!r}", file=sys.stderr)
            return 2
        streams.append(rest.pop(0))
    client = connect(url)
    for stream in streams or [DEFAULT_STREAM]:
        for old, count in migrate(client, stream).items():
            print(f"{old} -> {legacy_keys(stream, flags=0)[old]}: {count if count else 'nothing to move'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
