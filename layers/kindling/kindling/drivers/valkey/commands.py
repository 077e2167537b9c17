"""The commands kindling's Valkey client speaks, with valkey-py's signatures and reply shapes.

:class:`Commands` builds each command's arguments as valkey-py's method of the same name
does and hands them to ``execute_command`` (run now by :class:`~kindling.drivers.valkey.client.Valkey`,
queued by its ``Pipeline``). :data:`CALLBACKS` shape the parsed replies as valkey-py's
RESP2 response callbacks do (``tests/unit/test_resp_parser.py`` holds them to valkey-py's):
``xreadgroup`` returns ``[[stream, [(id, {field: value}), ...]]]``, ``xpending`` a dict,
``xpending_range`` a list of dicts, ``set`` True or None, ``ping`` True, and so on.
Commands without a callback return the parsed reply as it is; ``execute_command`` runs
any command. :class:`Script` (``register_script``) runs a Lua script by its digest, on a
client or queued on a pipeline.
"""

from __future__ import annotations

from kindling.drivers.valkey.errors import DataError, NoScriptError

# Sending one of these again after a lost reply cannot change anything: reads only.
IDEMPOTENT = frozenset({
    "PING", "ECHO", "GET", "MGET", "EXISTS", "TTL", "PTTL", "TYPE", "STRLEN", "LLEN", "LRANGE", "LINDEX",
    "XLEN", "XPENDING", "XRANGE", "XREVRANGE", "XINFO", "XINFO CONSUMERS", "XINFO GROUPS", "XINFO STREAM",
    "ZCARD", "ZSCORE", "ZRANGE", "ZRANGEBYSCORE", "ZCOUNT", "ZRANK", "HGET", "HGETALL", "HMGET", "SCARD",
    "SMEMBERS", "SISMEMBER", "DBSIZE", "INFO", "TIME", "SCRIPT EXISTS", "SCRIPT LOAD", "SELECT",
})


# -- replies as valkey-py's response callbacks shape them (RESP2) -----------------------------


def _str(value):
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


def _pairs(reply) -> dict:
    if reply is None:
        return {}
    it = iter(reply)
    return dict(zip(it, it, strict=False))


def _stream_list(reply):
    if reply is None:
        return None
    return [(entry[0], _pairs(entry[1])) if entry is not None else (None, None) for entry in reply]


def _xread(reply, **_):
    return [] if reply is None else [[r[0], _stream_list(r[1])] for r in reply]


def _xautoclaim(reply, parse_justid=False, **_):
    if parse_justid:
        return reply[1]
    reply[1] = _stream_list(reply[1])
    return reply


def _xclaim(reply, parse_justid=False, **_):
    return reply if parse_justid else _stream_list(reply)


_PENDING_KEYS = ("message_id", "consumer", "time_since_delivered", "times_delivered")


def _xpending(reply, parse_detail=False, **_):
    if parse_detail:
        return [dict(zip(_PENDING_KEYS, r, strict=False)) for r in reply]
    consumers = [{"name": n, "pending": int(p)} for n, p in reply[3] or []]
    return {"pending": reply[0], "min": reply[1], "max": reply[2], "consumers": consumers}


def _str_key_dicts(reply, **_):
    return [dict(zip(map(_str, r[::2]), r[1::2], strict=False)) for r in reply]


def _zscores(reply, withscores=False, score_cast_func=float, **_):
    if not reply or not withscores:
        return reply
    it = iter(reply)
    return list(zip(it, map(score_cast_func, it), strict=False))


def _zadd(reply, as_score=False, **_):
    if reply is None:
        return None
    return float(reply) if as_score else int(reply)


def _ok(reply, **_):
    return _str(reply) == "OK"


def _bool(reply, **_):
    return bool(reply)


CALLBACKS = {
    "PING": lambda r, **_: _str(r) == "PONG",
    "SET": lambda r, get=False, **_: r if get else (r and _str(r) == "OK"),
    "AUTH": _bool, "EXPIRE": _bool, "PEXPIRE": _bool, "XGROUP DESTROY": _bool,
    "SELECT": _ok, "FLUSHDB": _ok, "XGROUP CREATE": _ok, "XGROUP SETID": _ok, "SCRIPT FLUSH": _ok,
    "BLPOP": lambda r, **_: r and tuple(r) or None,
    "BRPOP": lambda r, **_: r and tuple(r) or None,
    "XREAD": _xread, "XREADGROUP": _xread,
    "XRANGE": lambda r, **_: _stream_list(r), "XREVRANGE": lambda r, **_: _stream_list(r),
    "XAUTOCLAIM": _xautoclaim, "XCLAIM": _xclaim, "XPENDING": _xpending,
    "XINFO CONSUMERS": _str_key_dicts, "XINFO GROUPS": _str_key_dicts,
    "SCRIPT LOAD": lambda r, **_: _str(r), "SCRIPT EXISTS": lambda r, **_: list(map(bool, r)),
    "ZADD": _zadd, "ZRANGEBYSCORE": _zscores,
    "ZSCORE": lambda r, **_: None if r is None else float(r),
}


def parse_reply(name: str, reply, options: dict):
    """``reply`` (parsed RESP) shaped as valkey-py's callback for command ``name`` shapes it."""
    callback = CALLBACKS.get(name)
    return reply if callback is None else callback(reply, **options)


def _args(keys, args) -> list:
    """valkey-py's list_or_args: one key or a list of keys, plus more."""
    keys = [keys] if isinstance(keys, bytes | str | memoryview) else list(keys)
    if args:
        keys.extend(args)
    return keys


def command_name(args) -> str:
    """"XGROUP CREATE" for ("XGROUP CREATE", ...) and ("XGROUP", "CREATE", ...); "XADD" for ("xadd", ...)."""
    name = str(_str(args[0])).upper()
    if name in _CONTAINERS and len(args) > 1 and " " not in name:
        name = f"{name} {str(_str(args[1])).upper()}"
    return name


_CONTAINERS = frozenset({"XGROUP", "XINFO", "SCRIPT", "CLIENT", "CONFIG"})


# -- commands ----------------------------------------------------------------------------------


class Commands:
    """The commands, with valkey-py's signatures; ``execute_command`` runs or queues them."""

    def execute_command(self, *args, **options):
        raise NotImplementedError

    # connection and keys

    def ping(self):
        return self.execute_command("PING")

    def get(self, name):
        return self.execute_command("GET", name)

    def mget(self, keys, *args):
        args = _args(keys, args)
        return self.execute_command("MGET", *args, **({} if args else {"_empty": []}))

    def set(self, name, value, ex=None, px=None, nx: bool = False, xx: bool = False, keepttl: bool = False,
            get: bool = False, exat=None, pxat=None):
        if sum(o is not None for o in (ex, px, exat, pxat)) > 1:
            raise DataError("``ex``, ``px``, ``exat`` and ``pxat`` are mutually exclusive.")
        pieces: list = [name, value]
        options = {}
        if ex is not None:
            if hasattr(ex, "total_seconds"):
                ex = int(ex.total_seconds())
            elif isinstance(ex, str) and ex.isdigit():
                ex = int(ex)
            elif not isinstance(ex, int):
                raise DataError("ex must be datetime.timedelta or int")
            pieces += ("EX", ex)
        if px is not None:
            if hasattr(px, "total_seconds"):
                px = int(px.total_seconds() * 1000)
            elif not isinstance(px, int):
                raise DataError("px must be datetime.timedelta or int")
            pieces += ("PX", px)
        if exat is not None:
            pieces += ("EXAT", int(exat.timestamp()) if hasattr(exat, "timestamp") else exat)
        if pxat is not None:
            pieces += ("PXAT", int(pxat.timestamp() * 1000) if hasattr(pxat, "timestamp") else pxat)
        if keepttl:
            pieces.append("KEEPTTL")
        if nx:
            pieces.append("NX")
        if xx:
            pieces.append("XX")
        if get:
            pieces.append("GET")
            options["get"] = True
        return self.execute_command("SET", *pieces, **options)

    def delete(self, *names):
        return self.execute_command("DEL", *names)

    def exists(self, *names):
        return self.execute_command("EXISTS", *names)

    def expire(self, name, time, nx: bool = False, xx: bool = False, gt: bool = False, lt: bool = False):
        if hasattr(time, "total_seconds"):
            time = int(time.total_seconds())
        flags = [f for f, on in (("NX", nx), ("XX", xx), ("GT", gt), ("LT", lt)) if on]
        return self.execute_command("EXPIRE", name, time, *flags)

    def incr(self, name, amount: int = 1):
        return self.execute_command("INCRBY", name, amount)

    def flushdb(self):
        return self.execute_command("FLUSHDB")

    # lists

    def rpush(self, name, *values):
        return self.execute_command("RPUSH", name, *values)

    def blpop(self, keys, timeout=0):
        args = _args(keys, None)
        args.append(0 if timeout is None else timeout)
        return self.execute_command("BLPOP", *args)

    # sorted sets

    def zadd(self, name, mapping, nx: bool = False, xx: bool = False, ch: bool = False, incr: bool = False,
             gt: bool = False, lt: bool = False):
        if not mapping:
            raise DataError("ZADD requires at least one element/score pair")
        if nx and xx:
            raise DataError("ZADD allows either 'nx' or 'xx', not both")
        if gt and lt:
            raise DataError("ZADD allows either 'gt' or 'lt', not both")
        if incr and len(mapping) != 1:
            raise DataError("ZADD option 'incr' only works when passing a single element/score pair")
        if nx and (gt or lt):
            raise DataError("Only one of 'nx', 'lt', or 'gr' may be defined.")
        pieces: list = [f for f, on in ((b"NX", nx), (b"XX", xx), (b"CH", ch), (b"INCR", incr)) if on]
        pieces += [f for f, on in ((b"GT", gt), (b"LT", lt)) if on]
        for member, score in mapping.items():
            pieces += (score, member)
        return self.execute_command("ZADD", name, *pieces, **({"as_score": True} if incr else {}))

    def zrem(self, name, *values):
        return self.execute_command("ZREM", name, *values)

    def zcard(self, name):
        return self.execute_command("ZCARD", name)

    def zscore(self, name, value):
        return self.execute_command("ZSCORE", name, value)

    def zrangebyscore(self, name, min, max, start=None, num=None, withscores: bool = False,
                      score_cast_func=float):
        if (start is not None and num is None) or (num is not None and start is None):
            raise DataError("``start`` and ``num`` must both be specified")
        pieces = ["ZRANGEBYSCORE", name, min, max]
        if start is not None and num is not None:
            pieces += ("LIMIT", start, num)
        if withscores:
            pieces.append("WITHSCORES")
        return self.execute_command(*pieces, withscores=withscores, score_cast_func=score_cast_func)

    # streams

    def xadd(self, name, fields, id="*", maxlen=None, approximate: bool = True, nomkstream: bool = False,
             minid=None, limit=None):
        if maxlen is not None and minid is not None:
            raise DataError("Only one of ```maxlen``` or ```minid``` may be specified")
        pieces: list = []
        if maxlen is not None:
            if not isinstance(maxlen, int) or maxlen < 0:
                raise DataError("XADD maxlen must be non-negative integer")
            pieces += (b"MAXLEN", b"~", str(maxlen)) if approximate else (b"MAXLEN", str(maxlen))
        if minid is not None:
            pieces += (b"MINID", b"~", minid) if approximate else (b"MINID", minid)
        if limit is not None:
            pieces += (b"LIMIT", limit)
        if nomkstream:
            pieces.append(b"NOMKSTREAM")
        pieces.append(id)
        if not isinstance(fields, dict) or len(fields) == 0:
            raise DataError("XADD fields must be a non-empty dict")
        for pair in fields.items():
            pieces.extend(pair)
        return self.execute_command("XADD", name, *pieces)

    def xack(self, name, groupname, *ids):
        return self.execute_command("XACK", name, groupname, *ids)

    def xdel(self, name, *ids):
        return self.execute_command("XDEL", name, *ids)

    def xlen(self, name):
        return self.execute_command("XLEN", name)

    def xrange(self, name, min="-", max="+", count=None):
        pieces = [min, max]
        if count is not None:
            if not isinstance(count, int) or count < 1:
                raise DataError("XRANGE count must be a positive integer")
            pieces += (b"COUNT", str(count))
        return self.execute_command("XRANGE", name, *pieces)

    def xrevrange(self, name, max="+", min="-", count=None):
        pieces = [max, min]
        if count is not None:
            if not isinstance(count, int) or count < 1:
                raise DataError("XREVRANGE count must be a positive integer")
            pieces += (b"COUNT", str(count))
        return self.execute_command("XREVRANGE", name, *pieces)

    def xread(self, streams, count=None, block=None):
        pieces: list = []
        if block is not None:
            if not isinstance(block, int) or block < 0:
                raise DataError("XREAD block must be a non-negative integer")
            pieces += (b"BLOCK", str(block))
        if count is not None:
            if not isinstance(count, int) or count < 1:
                raise DataError("XREAD count must be a positive integer")
            pieces += (b"COUNT", str(count))
        if not isinstance(streams, dict) or len(streams) == 0:
            raise DataError("XREAD streams must be a non empty dict")
        pieces += (b"STREAMS", *streams.keys(), *streams.values())
        return self.execute_command("XREAD", *pieces)

    def xreadgroup(self, groupname, consumername, streams, count=None, block=None, noack: bool = False):
        pieces: list = [b"GROUP", groupname, consumername]
        if count is not None:
            if not isinstance(count, int) or count < 1:
                raise DataError("XREADGROUP count must be a positive integer")
            pieces += (b"COUNT", str(count))
        if block is not None:
            if not isinstance(block, int) or block < 0:
                raise DataError("XREADGROUP block must be a non-negative integer")
            pieces += (b"BLOCK", str(block))
        if noack:
            pieces.append(b"NOACK")
        if not isinstance(streams, dict) or len(streams) == 0:
            raise DataError("XREADGROUP streams must be a non empty dict")
        pieces += (b"STREAMS", *streams.keys(), *streams.values())
        return self.execute_command("XREADGROUP", *pieces)

    def xautoclaim(self, name, groupname, consumername, min_idle_time, start_id="0-0", count=None,
                   justid: bool = False):
        if isinstance(min_idle_time, int) and min_idle_time < 0:
            raise DataError("XAUTOCLAIM min_idle_time must be a nonnegative integer")
        pieces = [name, groupname, consumername, min_idle_time, start_id]
        if count is not None:
            if int(count) < 0:
                raise DataError("XPENDING count must be a integer >= 0")
            pieces += (b"COUNT", count)
        options = {}
        if justid:
            pieces.append(b"JUSTID")
            options["parse_justid"] = True
        return self.execute_command("XAUTOCLAIM", *pieces, **options)

    def xclaim(self, name, groupname, consumername, min_idle_time, message_ids, idle=None, time=None,
               retrycount=None, force: bool = False, justid: bool = False):
        if not isinstance(min_idle_time, int) or min_idle_time < 0:
            raise DataError("XCLAIM min_idle_time must be a non negative integer")
        if not isinstance(message_ids, list | tuple) or not message_ids:
            raise DataError("XCLAIM message_ids must be a non empty list or tuple of message IDs to claim")
        pieces: list = [name, groupname, consumername, str(min_idle_time), *message_ids]
        for flag, value in ((b"IDLE", idle), (b"TIME", time), (b"RETRYCOUNT", retrycount)):
            if value is not None:
                if not isinstance(value, int):
                    raise DataError(f"XCLAIM {flag.decode().lower()} must be an integer")
                pieces += (flag, str(value))
        if force:
            pieces.append(b"FORCE")
        options = {}
        if justid:
            pieces.append(b"JUSTID")
            options["parse_justid"] = True
        return self.execute_command("XCLAIM", *pieces, **options)

    def xpending(self, name, groupname):
        return self.execute_command("XPENDING", name, groupname)

    def xpending_range(self, name, groupname, min, max, count, consumername=None, idle=None):
        if {min, max, count} == {None}:
            if idle is not None or consumername is not None:
                raise DataError("if XPENDING is provided with idle time or consumername, it must be provided "
                                "with min, max and count parameters")
            return self.xpending(name, groupname)
        if min is None or max is None or count is None:
            raise DataError("XPENDING must be provided with min, max and count parameters, or none of them.")
        pieces = [name, groupname]
        if idle is not None:
            if int(idle) < 0:
                raise DataError("XPENDING idle must be a integer >= 0")
            pieces += ("IDLE", idle)
        if int(count) < 0:
            raise DataError("XPENDING count must be a integer >= 0")
        pieces += (min, max, count)
        if consumername:
            pieces.append(consumername)
        return self.execute_command("XPENDING", *pieces, parse_detail=True)

    def xgroup_create(self, name, groupname, id="$", mkstream: bool = False, entries_read=None):
        pieces: list = ["XGROUP CREATE", name, groupname, id]
        if mkstream:
            pieces.append(b"MKSTREAM")
        if entries_read is not None:
            pieces += ("ENTRIESREAD", entries_read)
        return self.execute_command(*pieces)

    def xgroup_destroy(self, name, groupname):
        return self.execute_command("XGROUP DESTROY", name, groupname)

    def xgroup_delconsumer(self, name, groupname, consumername):
        return self.execute_command("XGROUP DELCONSUMER", name, groupname, consumername)

    def xinfo_consumers(self, name, groupname):
        return self.execute_command("XINFO CONSUMERS", name, groupname)

    def xinfo_groups(self, name):
        return self.execute_command("XINFO GROUPS", name)

    # scripts

    def eval(self, script, numkeys: int, *keys_and_args):
        return self.execute_command("EVAL", script, numkeys, *keys_and_args)

    def evalsha(self, sha, numkeys: int, *keys_and_args):
        return self.execute_command("EVALSHA", sha, numkeys, *keys_and_args)

    def script_load(self, script):
        return self.execute_command("SCRIPT LOAD", script)

    def script_exists(self, *shas):
        return self.execute_command("SCRIPT EXISTS", *shas)

    def script_flush(self):
        return self.execute_command("SCRIPT FLUSH")

    def register_script(self, script):
        """A callable :class:`Script` running ``script`` by its digest."""
        return Script(self, script)


class Script:
    """A Lua script run by its digest (EVALSHA), loaded when the server lacks it; with
    ``client=pipe`` it is queued on the pipeline, which loads it before running."""

    def __init__(self, registered_client, script) -> None:
        try:
            from _sha1 import sha1  # the C module: hashlib would load OpenSSL's
        except ImportError:  # pragma: no cover - a Python built without it
            from hashlib import sha1

        self.registered_client = registered_client
        self.script = script
        self.sha = sha1(script.encode() if isinstance(script, str) else script).hexdigest()

    def __call__(self, keys=None, args=None, client=None):
        keys = list(keys or [])
        args = (*keys, *(args or []))
        if client is None:
            client = self.registered_client
        # A pipeline (kindling's or valkey-py's) keeps the scripts it runs, to load them first.
        if getattr(client, "scripts", None) is not None:
            client.scripts.add(self)
            return client.evalsha(self.sha, len(keys), *args)
        try:
            return client.evalsha(self.sha, len(keys), *args)
        except NoScriptError:  # a restarted or other server: load it and run it
            self.sha = client.script_load(self.script)
            return client.evalsha(self.sha, len(keys), *args)
