"""JSON in and out: one contract, two engines (the interpreter's C codec, and orjson).

The contract, for every value kindling writes or reads (a job's arguments, a task's
result, a record), on every path (the Lambda handler, ``kindling worker``, the Valkey
drain, eager mode, producers):

* **Accepted**: ``None``, ``bool``, ``int``, finite ``float``, ``str``, ``list``,
  ``tuple`` (written as an array), ``dict`` with ``str`` keys, and their subclasses;
  ``datetime``/``date``/``time`` (written as ``value.isoformat()``), ``UUID`` (its
  canonical string), ``Enum`` (its value), dataclass instances (an object of their
  fields) and pydantic models (their ``model_dump(mode="json")``). Anything else
  (``bytes``, ``set``, ``Decimal``, ...) is refused.
* **Integers** of any size are written and read exactly: ``2**70`` arrives as ``2**70``,
  never as a float. (Python's own limit on int/str conversions, 4300 digits, still holds.)
* **NaN and ±infinity are refused**, written or read: JSON has no such numbers, and writing
  them as ``null`` would hand the next step a ``None`` it never returned.
* **Dict keys must be strings**: ``{1: "a"}`` is refused, not turned into ``{"1": "a"}``,
  so what a task receives is what was sent (a job's ``kwargs`` and a result read back with
  ``Client.result()`` keep their keys' types or fail at the sender).
* **Nesting** is at most :data:`MAX_DEPTH` levels of arrays and objects, written or read
  (the limit is orjson's, which cannot be raised).
* **Strings** must be valid Unicode: a lone surrogate is refused when written.
* **Errors**: a value outside the contract raises :class:`EncodeError` (a ``TypeError``
  and a ``ValueError``), text that is not JSON or breaks it raises :class:`DecodeError`
  (a ``ValueError``), with the same message whichever engine runs.

The interpreter's C codec is the reference: it enforces every rule itself. orjson is a
fast path only: its output is used when it cannot differ from the reference's (the same
bytes but for how a float's exponent may be spelled, the same value always, checked by
tests/unit/test_codec_contract.py), and the reference decides whenever
orjson refuses a value, writes a ``null`` (which may have been a NaN), or reads a number
of 19 digits or more (which orjson would read as a float).

Measured on the reference machine: a bare ``python -c pass`` takes ~12 ms, ``import json``
adds ~8 ms (it loads ``re``) and ``import orjson`` ~20 ms (it loads dataclasses, inspect
and uuid). A Lambda worker decoding ten small envelopes per batch gains nothing worth that
from either library's speed, so until :func:`use_orjson` is called kindling drives the
C scanner and encoder of CPython's ``_json`` module directly: the same parser that
``json.loads`` uses, without the Python layer that imports ``re``.

Long-lived processes (the Valkey worker, the local SQS loop, producers) call
:func:`use_orjson`: there the import is paid once and the speed is paid back per job.
"""

from __future__ import annotations

import sys

__all__ = ["dumps", "loads", "use_orjson", "DecodeError", "EncodeError", "MAX_DEPTH"]

MAX_DEPTH = 254
"""The deepest nesting of arrays and objects written or read (orjson's fixed limit)."""


class EncodeError(TypeError, ValueError):
    """A value the JSON contract refuses. Both a ``TypeError`` and a ``ValueError``: what
    ``json.dumps`` and orjson raise for such values."""


class DecodeError(ValueError):
    """Text that is not JSON, or JSON the contract refuses (NaN, too deep)."""


def _not_finite(value: float) -> bool:
    return value != value or value in (_INF, -_INF)


_INF = float("inf")


def _refuse_constant(name: str):
    raise DecodeError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if _not_finite(value):  # 1e400 reads as inf
        raise DecodeError(f"number {text[:40]} is out of range for a float")
    return value


class _ScanContext:
    """The attributes ``_json.make_scanner`` reads from a ``json.JSONDecoder``."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = staticmethod(_finite_float)
    parse_int = int
    parse_constant = staticmethod(_refuse_constant)
    memo: dict = {}


def _is_instance(obj: object, module: str, name: str) -> bool:
    """``isinstance(obj, module.name)`` without importing ``module``: if it isn't loaded,
    ``obj`` cannot be one of its instances (keeps datetime/uuid/enum off the cold path)."""
    mod = sys.modules.get(module)
    return mod is not None and isinstance(obj, getattr(mod, name))


def _default(obj: object) -> object:
    """What the encoders write for a non-JSON type (both call it; orjson is told to)."""
    if _is_instance(obj, "datetime", "date") or _is_instance(obj, "datetime", "time"):
        return obj.isoformat()  # type: ignore[attr-defined]
    if _is_instance(obj, "uuid", "UUID"):
        return str(obj)
    if _is_instance(obj, "enum", "Enum"):
        value = obj.value  # type: ignore[attr-defined]
    elif _is_instance(obj, "pydantic", "BaseModel"):
        value = obj.model_dump(mode="json")  # type: ignore[attr-defined]
    elif hasattr(type(obj), "__dataclass_fields__") and not isinstance(obj, type):
        from dataclasses import fields  # loaded already: obj's class was made by it

        value = {f.name: getattr(obj, f.name) for f in fields(obj)}  # type: ignore[arg-type]
    else:
        raise EncodeError(f"Object of type {type(obj).__name__} is not JSON serializable")
    _check_keys(value, 0)  # the encoder writes what we return without asking again
    return value


def _check_keys(obj: object, depth: int) -> None:
    """Refuse non-string dict keys, which the C encoder would turn into strings, and nesting
    past the limit (a value that contains itself, too)."""
    t = type(obj)
    if t in _SCALARS or not isinstance(obj, _CONTAINERS):
        return
    if depth >= MAX_DEPTH:
        raise _too_deep_to_encode()
    if isinstance(obj, dict):
        for key in obj:
            if type(key) is not str and not isinstance(key, str):
                raise EncodeError(f"dict keys must be str, got {type(key).__name__} {key!r:.40}")
        obj = obj.values()
    for child in obj:  # type: ignore[attr-defined]
        t = type(child)
        if t is dict or t is list or t is tuple or (t not in _SCALARS and isinstance(child, _CONTAINERS)):
            _check_keys(child, depth + 1)


_SCALARS = frozenset((str, int, float, bool, type(None)))
_CONTAINERS = (dict, list, tuple)


def _too_deep_to_encode() -> EncodeError:
    return EncodeError(f"value is nested more than {MAX_DEPTH} levels deep (or contains itself)")


def _too_deep_to_decode() -> DecodeError:
    return DecodeError(f"JSON is nested more than {MAX_DEPTH} levels deep")


def _nesting(text: str | bytes) -> int:
    """How deep the arrays and objects of JSON ``text`` nest (0 for a scalar)."""
    from itertools import accumulate

    if isinstance(text, str):
        text = text.encode("utf-8", "surrogatepass")
    # Drop what is inside strings: escaped backslashes first, so \\" ends a string.
    parts = text.replace(b"\\\\", b"").replace(b'\\"', b"").split(b'"')
    syntax = b"".join(parts[0::2]).translate(None, b"0123456789,:.-+eE \t\n\r")
    steps = {0x5B: 1, 0x7B: 1, 0x5D: -1, 0x7D: -1}
    return max(accumulate(map(steps.get, syntax, [0] * len(syntax))), default=0)


def _deeper_than_allowed(text: str | bytes) -> bool:
    # Counting brackets is a cheap bound: fewer opening brackets than the limit, not too deep.
    if text.count("[" if isinstance(text, str) else b"[") + text.count("{" if isinstance(text, str) else b"{") \
            <= MAX_DEPTH:
        return False
    return _nesting(text) > MAX_DEPTH


try:
    import _json

    _scan = _json.make_scanner(_ScanContext())

    # (markers, default, encoder, indent, key_sep, item_sep, sort_keys, skipkeys, allow_nan)
    # No markers: the encoder is shared by every call and thread, and it leaves a failed
    # call's markers behind, so a later value would be refused as "circular". _check_keys
    # and the recursion limit catch a value that contains itself.
    _encode = _json.make_encoder(None, _default, _json.encode_basestring, None, ":", ",",
                                 False, False, False)

    def _parse(text: str):
        start = len(text) - len(text.lstrip(" \t\n\r"))
        try:
            value, end = _scan(text, start)
        except StopIteration as stop:
            raise DecodeError(f"Expecting value: char {stop.value}") from None
        if text[end:].strip(" \t\n\r"):
            raise DecodeError(f"Extra data: char {end}")
        return value

    def _write(obj) -> str:
        return "".join(_encode(obj, 0))

except (ImportError, AttributeError, TypeError):  # an interpreter without CPython's _json
    import json

    def _parse(text: str):
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)

    def _write(obj) -> str:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_default)


def _loads(data: str | bytes | bytearray | memoryview):
    """The reference decoder."""
    if _deeper_than_allowed(data if isinstance(data, str | bytes) else bytes(data)):
        raise _too_deep_to_decode()
    try:
        text = data if isinstance(data, str) else bytes(data).decode()
        return _parse(text)
    except DecodeError:
        raise
    except RecursionError:
        raise _too_deep_to_decode() from None
    except (ValueError, TypeError) as exc:  # json's own errors, a bad UTF-8 byte, int() over 4300 digits
        raise DecodeError(str(exc)) from None


def _non_finite(obj) -> str:
    """repr of the first NaN or infinity in ``obj`` (an error message's, on the failure path only)."""
    stack = [obj]
    while stack:
        value = stack.pop()
        if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
            return repr(value)
        if isinstance(value, dict):
            stack.extend(reversed(list(value.values())))
        elif isinstance(value, list | tuple):
            stack.extend(reversed(value))
    return "nan"


def _dumps(obj) -> str:
    """The reference encoder."""
    try:
        _check_keys(obj, 0)
        text = _write(obj)
    except EncodeError:
        raise
    except RecursionError:
        raise _too_deep_to_encode() from None
    except ValueError as exc:
        message = str(exc)
        if message.startswith("Out of range float"):
            # Python 3.12 names the value ("...: nan"); 3.11 does not: found in the value then.
            value = message.rsplit(": ", 1)[-1] if ": " in message else _non_finite(obj)
            message = f"NaN and infinity are not JSON ({value})"
        raise EncodeError(message) from exc
    except TypeError as exc:
        raise EncodeError(str(exc)) from exc
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            raise EncodeError("a string holds a lone surrogate, which is not valid Unicode") from None
    if _deeper_than_allowed(text):  # what _default returned (a dataclass's fields) nests too
        raise _too_deep_to_encode()
    return text


loads = _loads
"""Parse JSON text (``str`` or UTF-8 ``bytes``). Raises :class:`DecodeError`."""

dumps = _dumps
"""Serialize to compact JSON text (``str``). Raises :class:`EncodeError`."""


def _orjson_engine():
    """orjson's ``(loads, dumps)``, kept to the contract by the reference (module docstring)."""
    import re

    import orjson

    # A run of 19 digits may be an integer orjson reads as a float (outside -2**63..2**64-1).
    long_number = re.compile("[0-9]{19}")
    long_number_b = re.compile(b"[0-9]{19}")
    options = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS  # through _default
    fast_loads, fast_dumps = orjson.loads, orjson.dumps

    def loads(data):
        exact = (long_number if isinstance(data, str) else long_number_b).search(data) is None
        if exact and not _deeper_than_allowed(data if isinstance(data, str | bytes) else bytes(data)):
            try:
                return fast_loads(data)
            except orjson.JSONDecodeError:
                pass
        return _loads(data)  # the reference decides, and says why

    def dumps(obj) -> str:
        try:
            out = fast_dumps(obj, default=_default, option=options)
        except orjson.JSONEncodeError:
            return _dumps(obj)
        if b"null" in out:  # a None, or a NaN orjson wrote as null: the reference tells them apart
            return _dumps(obj)
        return out.decode()

    return loads, dumps


def use_orjson() -> bool:
    """Switch this process to orjson; return ``False`` if orjson is not installed.

    Cheap to call again once switched (the stream worker calls it after every batch)."""
    global loads, dumps, _orjson
    if _orjson is not None:
        return _orjson
    try:
        loads, dumps = _orjson_engine()
    except ImportError:
        _orjson = False
        return False
    _orjson = True
    return True


_orjson: bool | None = None
