"""JSON in and out: orjson where it pays, the interpreter's own C codec on the cold path.

Measured on the reference machine: a bare ``python -c pass`` takes ~12 ms, ``import json``
adds ~8 ms (it loads ``re``) and ``import orjson`` ~20 ms (it loads dataclasses, inspect
and uuid). A Lambda worker decoding ten small envelopes per batch gains nothing worth that
from either library's speed, so until :func:`use_orjson` is called kindling drives the
C scanner and encoder of CPython's ``_json`` module directly: the same parser that
``json.loads`` uses, without the Python layer that imports ``re``.

Long-lived processes (the Valkey worker, the local SQS loop, producers) call
:func:`use_orjson`: there the import is paid once and the speed is paid back per job.

Both paths accept and produce the same JSON: NaN and infinities are refused, and
``datetime``/``date``/``UUID``/``Enum`` values are written the way orjson writes them
(ISO 8601 strings, UUID strings, the enum's value). Use string dict keys: orjson refuses
others, the standard codec turns numbers into strings.
"""

from __future__ import annotations

__all__ = ["dumps", "loads", "use_orjson", "DecodeError", "EncodeError"]

DecodeError = ValueError  # json.JSONDecodeError and orjson.JSONDecodeError both derive from it
EncodeError = (TypeError, ValueError)

try:
    import _json

    def _refuse_constant(name: str):
        raise ValueError(f"{name} is not valid JSON")

    class _ScanContext:
        """The attributes ``_json.make_scanner`` reads from a ``json.JSONDecoder``."""

        strict = True
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int
        parse_constant = staticmethod(_refuse_constant)
        memo: dict = {}

    _scan = _json.make_scanner(_ScanContext())

    def _default(obj):
        if hasattr(obj, "isoformat"):  # datetime, date, time
            return obj.isoformat()
        value = getattr(obj, "value", _default)  # Enum
        if value is not _default:
            return value
        if type(obj).__name__ == "UUID":
            return str(obj)
        raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")

    # (markers, default, encoder, indent, key_sep, item_sep, sort_keys, skipkeys, allow_nan)
    _encode = _json.make_encoder({}, _default, _json.encode_basestring, None, ":", ",",
                                 False, False, False)

    def _loads(data: str | bytes | bytearray):
        text = data.decode() if isinstance(data, bytes | bytearray) else data
        start = len(text) - len(text.lstrip(" \t\n\r"))
        try:
            value, end = _scan(text, start)
        except StopIteration as stop:
            raise ValueError(f"Expecting value: char {stop.value}") from None
        except RecursionError:  # the C scanner recurses per level of nesting
            raise ValueError("JSON nested too deeply") from None
        if text[end:].strip(" \t\n\r"):
            raise ValueError(f"Extra data: char {end}")
        return value

    def _dumps(obj) -> str:
        try:
            return "".join(_encode(obj, 0))
        except RecursionError:
            raise ValueError("value nested too deeply to encode as JSON") from None

except (ImportError, AttributeError, TypeError):  # an interpreter without CPython's _json
    import json

    def _loads(data):
        return json.loads(data, parse_constant=_refuse_constant)

    def _dumps(obj) -> str:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


loads = _loads
"""Parse JSON text (``str`` or UTF-8 ``bytes``). Raises ``ValueError`` if it is not JSON."""

dumps = _dumps
"""Serialize to compact JSON text (``str``). Raises ``TypeError``/``ValueError`` if it can't."""


def use_orjson() -> bool:
    """Switch this process to orjson; return ``False`` if orjson is not installed.

    Cheap to call again once switched (the stream worker calls it after every batch)."""
    global loads, dumps, _orjson
    if _orjson is not None:
        return _orjson
    try:
        import orjson
    except ImportError:
        _orjson = False
        return False
    loads = orjson.loads

    def dumps(obj, _dumps=orjson.dumps) -> str:
        return _dumps(obj).decode()

    _orjson = True
    return True


_orjson: bool | None = None
