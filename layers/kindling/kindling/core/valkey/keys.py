"""Every Valkey key and stream-entry field kindling reads or writes, named in one place.

A deployment's keys all derive from two names: the job stream (``kindling:jobs`` unless
configured) and the result store's prefix (``kindling``)::

    <stream>                      the job stream, read by the consumer group <group>
    {<stream>}:scheduled          delayed jobs, a sorted set scored by due time (epoch ms)
    {<stream>}:dead               dead jobs, capped (XADD MAXLEN ~)
    {<stream>}:kick[:<n>]         the flag of drain n (none for the first): a drain is on its way
    <prefix>:result:<id>          a job's record (JSON), chords' under <prefix>:result:chord#<id>
    {<prefix>:result:<id>}:done   a token pushed when the record is final, for blocking waiters
    {<prefix>:result:<id>}:revive the job's revive ledger (kindling jobs retry --valkey)

Keys one script or one step touches together share a hash slot, so the same names work on a
single node and on a Valkey Cluster: a key derived from another carries that key as its hash
tag (:func:`beside`). ``{kindling:jobs}:scheduled`` hashes as ``kindling:jobs`` does, so a
stream keeps its own name (its entries, its group, its pending entries stay where they are)
and only the keys beside it are named anew. A name that has a hash tag of its own
(``{orders}:jobs``) keeps it: ``{orders}:jobs:scheduled``. Several streams, several slots: on
a cluster they spread over its nodes.

A job entry holds :data:`FIELD` (the envelope), and when present :data:`SIG_FIELD` (its
signature, :mod:`kindling.core.jobsig`) and :data:`TRACE_FIELD`. A dead entry adds the
``DEAD_*`` fields. The Lua scripts (:mod:`kindling.shared.valkey.scripts`) take every key as a
``KEYS`` argument; the one field name they write themselves (``sig``, when a delayed signed
job is moved onto the stream) is :data:`SIG_FIELD`.

No imports: the drain, the producer and the operator tools all load this module.
"""

from __future__ import annotations

DEFAULT_STREAM = "kindling:jobs"
DEFAULT_GROUP = "kindling"
DEFAULT_PREFIX = "kindling"
"""The result store's key prefix (:class:`kindling.stores.valkey.ValkeyResultStore`)."""

# A job entry's fields as text: what a client that decodes replies (and the operator tools,
# which decode a dead entry's field names) finds them under.
JOB_NAME, SIG_NAME, TRACE_NAME = "job", "sig", "trace"
FIELD = JOB_NAME.encode()
"""The field of a stream entry holding the job's envelope JSON (beside it, a signed job's
``sig``: :mod:`kindling.core.jobsig`)."""
SIG_FIELD = SIG_NAME.encode()
"""The field holding a signed entry's signature (:mod:`kindling.core.jobsig`)."""
TRACE_FIELD = TRACE_NAME.encode()
"""The producer's X-Ray trace header, on entries sent where one was set (``_X_AMZN_TRACE_ID``)."""

# A dead entry's fields beside the job's own (kindling.triggers.valkey.consumer writes them,
# kindling.tools.ops.dead_stream reads them).
DEAD_ERROR = "error"
DEAD_ENTRY = "entry"  # its entry id on the job stream
DEAD_JOB_ID = "job_id"
DEAD_ATTEMPTS = "attempts"
DEAD_AT = "dead_at"


def hash_tag(key: str) -> str | None:
    """The part of ``key`` a cluster hashes when it is not the whole key: the text between
    the first ``{`` and the first ``}`` after it, if not empty (the Valkey Cluster rule)."""
    start = key.find("{")
    if start < 0:
        return None
    end = key.find("}", start + 1)
    return key[start + 1 : end] if end > start + 1 else None


def beside(key: str, suffix: str) -> str:
    """The name of a key kept beside ``key`` in its hash slot: ``{key}suffix``, or
    ``key + suffix`` when ``key`` has a hash tag of its own. A name with braces that do not
    make a tag (``a}b``, ``a{}b``) cannot be given a key in its slot: ValueError."""
    if hash_tag(key) is not None:
        return key + suffix
    if "}" in key:
        raise ValueError(f"Valkey key {key!r} has a '}}' but no hash tag: no key can be named in its slot; "
                         "rename it, or give it a tag such as {name}")
    return f"{{{key}}}{suffix}"


def scheduled_key(stream: str) -> str:
    return beside(stream, ":scheduled")


def dead_key(stream: str) -> str:
    return beside(stream, ":dead")


def flag_key(stream: str, n: int = 0) -> str:
    """The flag of drain ``n``: ``{<stream>}:kick`` for the first, ``{<stream>}:kick:<n>`` for the others."""
    return beside(stream, ":kick" if n == 0 else f":kick:{n}")


def flag_number(stream: str, flag: str) -> int | None:
    """The ``n`` of ``flag`` if it is one of ``stream``'s flags (:func:`flag_key`'s inverse), else ``None``."""
    if flag == flag_key(stream):
        return 0
    prefix = flag_key(stream) + ":"
    digits = flag[len(prefix):]
    if flag.startswith(prefix) and 0 < len(digits) < 10 and digits.isascii() and digits.isdigit() and digits[0] != "0":
        return int(digits)
    return None


def derived_keys(stream: str) -> tuple[str, str]:
    """The keys beside ``stream`` other than its flags: the scheduled set and the dead stream."""
    return scheduled_key(stream), dead_key(stream)


def result_key(prefix: str, job_id: str) -> str:
    return f"{prefix}:result:{job_id}"


def done_key(prefix: str, job_id: str) -> str:
    """Beside the record (one script writes both): ``{<prefix>:result:<id>}:done``."""
    return beside(result_key(prefix, job_id), ":done")


def revive_key(prefix: str, job_id: str) -> str:
    """Beside the record (:data:`~kindling.shared.valkey.scripts.REVIVE` writes both)."""
    return beside(result_key(prefix, job_id), ":revive")


def legacy_keys(stream: str, flags: int = 1) -> dict[str, str]:
    """The names kindling used before keys were hash-tagged, each to its name now: what
    ``python -m kindling.tools.valkey_migrate`` moves (the stream and the records keep theirs)."""
    moved = {f"{stream}:scheduled": scheduled_key(stream), f"{stream}:dead": dead_key(stream)}
    for n in range(flags):
        moved[f"{stream}:kick" if n == 0 else f"{stream}:kick:{n}"] = flag_key(stream, n)
    return {old: new for old, new in moved.items() if old != new}
