"""Celery's task message (protocol 2), as kombu's SQS transport sends it, read as a job.

A team moving to kindling can point an unchanged Celery producer (``app.send_task``,
``task.delay()``, ``apply_async(countdown=)``) at kindling's queue: the worker runs the
registered task of that name. Only the reading lives here; the job then goes through the
runner as any other (admission, attempts, recording in the results table).

What kombu's SQS transport sends (``kombu/transport/SQS``, ``celery/app/amqp.py``
``as_task_v2``): the message body is base64 (``sqs_base64_encoding``, the default; raw JSON
without it) of a JSON object ``{"body", "content-type", "content-encoding", "headers",
"properties"}``. ``properties.body_encoding`` is ``base64``: ``body`` is the base64 of the
serialized ``[args, kwargs, embed]``, compressed first when ``headers.compression`` names
one. The headers carry ``task``, ``id``, ``retries``, ``eta`` (ISO 8601 or null),
``expires``, ``timelimit`` ([hard, soft]), ``lang: "py"`` and any the producer added
(``apply_async(headers={...})``).

Read as Celery's worker reads it:

* **Arguments**: kombu's JSON encoder writes a ``datetime``, ``date``, ``time``,
  ``Decimal``, ``UUID`` or ``bytes`` as a marker object ``{"__type__": ..., "__value__":
  ...}``; each is decoded back as kombu's ``object_hook`` does (``kombu/utils/json.py``:
  the same types, formats and constructors, innermost first), wherever it is in the body
  or the producer's headers.
  A marker kombu would refuse (an unregistered type, a value its constructor refuses)
  rejects the message, as it does in Celery's worker. The task never sees a marker.
* **Compression**: kombu's ``gzip``/``zlib`` (zlib's format), ``bzip2`` and ``lzma``/``xz``
  (and ``zstd`` where the standard library has it, Python 3.14) are decompressed, to at most
  :data:`MAX_BODY_BYTES` (a larger result is refused unread past the bound); any other
  (``brotli``) is refused by name.
* **Mapped**: ``id`` is the job id (a Celery task id sent twice runs once, as any kindling
  id), ``eta`` its ``not_before``, the earlier of the hard and soft time limits its
  ``timeout``, the producer's own headers the task's ``current_job().headers`` (Celery's
  ``self.request.headers``). A message past its ``expires``, or one that expires before
  it is due, is never run: :class:`~kindling.core.errors.Expired`, its job recorded ``revoked``.
* **Refused** (the job is ``rejected`` with the reason, never run): a serializer other
  than JSON (pickle is never read), NaN or infinity in the body (kindling's JSON has no
  such numbers), protocol 1, and what kindling cannot honour: ``link``/``link_error``
  callbacks, a Celery chain or chord in ``embed``, stamps. ``retries`` is not carried over:
  attempts are counted in kindling's record. Outcomes go to the results table; a Celery
  ``AsyncResult`` cannot read them.

Every refusal of a message whose ``id`` is a valid job id is ``keyed``: recorded under
that id, where ``client.result(id)`` and ``kindling jobs show`` find it.

Imported by :func:`kindling.core.envelope.decode_job` only for a body that is not an envelope
and looks like one of these, so a worker of kindling producers never loads it; the
decompressors and the argument types load only for a message that uses them. It reads the
message and imports nothing of the envelope: the envelope hands :func:`decode` the function
that makes and checks the job (``build``), as it checks a kindling producer's.
"""

from __future__ import annotations

import binascii
from base64 import b64decode

from kindling.core import codec
from kindling.core.errors import Expired, InvalidJob
from kindling.core.policy import is_job_id, job_id_error, now_ms

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol, TypeVar

    class Built(Protocol):
        """What :func:`decode` sets on the job ``build`` made (:class:`kindling.core.envelope.Job`)."""

        args: list
        kwargs: dict
        headers: dict | None

    J = TypeVar("J", bound=Built)

__all__ = ["MAX_BODY_BYTES", "decode", "is_message"]

MAX_BODY_BYTES = 1_048_576
"""The most a compressed body may expand to: the largest body SQS carries (its highest
``MaximumMessageSize``), so no message is larger decompressed than one could be sent plain."""

# The headers Celery's worker leaves out of self.request.headers (celery/app/task.py,
# Context._get_custom_headers): every name Celery's task Context defines, fields and methods
# alike, and "lang", "task", "argsrepr", "kwargsrepr", "compression". The rest are the producer's.
_CELERY_HEADERS = frozenset((
    "lang", "task", "id", "shadow", "eta", "expires", "group", "group_index", "retries", "timelimit", "root_id",
    "parent_id", "argsrepr", "kwargsrepr", "origin", "ignore_result", "replaced_task_nesting", "stamped_headers",
    "stamps", "compression", "args", "callbacks", "called_directly", "chain", "chord", "correlation_id",
    "delivery_info", "errbacks", "headers", "hostname", "is_eager", "kwargs", "logfile", "loglevel", "properties",
    "reply_to", "taskset", "utc", "children", "_children", "_protected", "as_execution_options", "clear", "get",
    "update", "_get_custom_headers", "_filter_x_death_headers",
))

# kombu.compression's content types and aliases, by the standard library module that reads them.
_COMPRESSIONS = {
    "application/x-gzip": "zlib", "gzip": "zlib", "zlib": "zlib",
    "application/x-bz2": "bz2", "bzip2": "bz2", "bzip": "bz2",
    "application/x-lzma": "lzma", "lzma": "lzma", "xz": "lzma",
    "application/zstd": "zstd", "zstd": "zstd", "zstandard": "zstd",
}


def is_message(data: dict) -> bool:
    """Whether decoded JSON is a kombu message rather than a kindling envelope."""
    return "version" not in data and isinstance(data.get("headers"), dict) and "body" in data


def decode(body: str | bytes | dict, build: Callable[..., J]) -> J:
    """The job a Celery task message asks for; :class:`InvalidJob` naming what is refused
    (``keyed`` when the message names a valid job id). ``build(task, args, kwargs, *, job_id,
    timeout, not_before)`` makes the job and checks it (raising ``InvalidJob``, ``TypeError``
    or ``ValueError``): :func:`kindling.core.envelope.decode_job` passes its own."""
    if isinstance(body, dict):
        message = body
    else:
        text = body if body[:1] in ("{", b"{") else _unbase64(body, "message body")
        try:
            message = codec.loads(text)
        except codec.DecodeError as exc:
            job_id, task = _lenient_claims(text)
            raise InvalidJob(f"Celery message body is not JSON: {exc}", job_id=job_id, task=task,
                             keyed=is_job_id(job_id)) from None
    if not isinstance(message, dict) or not is_message(message):
        raise InvalidJob("message body is neither a kindling envelope nor a Celery task message")
    headers = message["headers"]
    task, job_id = headers.get("task"), headers.get("id")
    if not isinstance(task, str) or not isinstance(job_id, str):
        claims = _protocol_1_claims(message)
        raise InvalidJob("Celery message protocol 1 (no task and id headers) is not read: send with "
                         "task_protocol=2, Celery's default", job_id=claims[0], task=claims[1],
                         keyed=is_job_id(claims[0]))
    keyed = is_job_id(job_id)

    def bad(reason: str) -> InvalidJob:
        return InvalidJob(f"Celery task message: {reason}", job_id=job_id, task=task, keyed=keyed)

    if not keyed:
        raise bad(f"the task id is not a job id: {job_id_error(job_id)} (send task_id= of those characters, "
                  "or let Celery draw a UUID)")
    payload = _payload(message, headers, bad)
    if not (isinstance(payload, list) and len(payload) == 3 and isinstance(payload[0], list)
            and isinstance(payload[1], dict)):
        raise bad("the body is not [args, kwargs, embed]")
    args, kwargs, embed = payload
    embed = embed if isinstance(embed, dict) else {}
    for key, what in (("callbacks", "link callbacks"), ("errbacks", "link_error callbacks"),
                      ("chain", "a Celery chain"), ("chord", "a Celery chord")):
        if embed.get(key):
            raise bad(f"{what} cannot be honoured by kindling: send it with kindling's canvas "
                      "(kindling.chain, kindling.group(...).then(...))")
    if headers.get("stamps") or headers.get("stamped_headers"):
        raise bad("Celery stamps (stamped_headers) are not read by kindling")
    eta, expires = _eta_ms(headers.get("eta"), bad), _eta_ms(headers.get("expires"), bad)
    if expires is not None:
        if now_ms() > expires:  # Celery's worker revokes it; it is not run here either
            raise Expired(f"Celery task message: expired at {headers['expires']} (Celery's expires=): not run",
                          job_id=job_id, task=task, keyed=True)
        if eta is not None and eta >= expires:
            raise Expired(f"Celery task message: expires at {headers['expires']}, before it is due at "
                          f"{headers['eta']}: never run", job_id=job_id, task=task, keyed=True)
    timeout = _timeout(headers.get("timelimit"), bad)
    try:
        # Through the envelope's own checks (id, task name, limits), as a kindling producer's job.
        job = build(task, args, kwargs, job_id=job_id, timeout=timeout, not_before=eta)
    except InvalidJob as exc:
        raise bad(exc.reason) from None
    except (TypeError, ValueError) as exc:
        raise bad(str(exc)) from None
    if _has_marker(payload):
        args, kwargs, _ = _decode_markers(payload, bad)
        if not (isinstance(args, list) and isinstance(kwargs, dict)):
            raise bad("the body is not [args, kwargs, embed] once kombu's markers are decoded")
        job.args, job.kwargs = args, kwargs
    own = {k: v for k, v in headers.items() if k not in _CELERY_HEADERS}
    if _has_marker(own):  # kombu's SQS transport writes the whole message with kombu's JSON
        own = _decode_markers(own, bad)
    job.headers = own or None
    return job


def _payload(message: dict, headers: dict, bad) -> object:
    """The body's ``[args, kwargs, embed]`` as JSON values: base64, decompressed, parsed."""
    content_type = message.get("content-type", "application/json")
    if content_type != "application/json":
        raise bad(f"serializer {content_type!r} is not read: kindling reads JSON only (task_serializer='json')")
    encoding = str(message.get("content-encoding") or "utf-8").lower()
    if encoding not in ("utf-8", "utf8"):
        raise bad(f"content-encoding {encoding!r:.40} is not read: Celery's JSON is UTF-8")
    raw = _raw_body(message, headers, bad)
    try:
        return codec.loads(raw)
    except codec.DecodeError as exc:
        raise bad(f"the task body is not JSON: {exc}") from None


def _raw_body(message: dict, headers: dict, bad) -> bytes | str:
    properties = message.get("properties") or {}
    raw = message["body"]
    if properties.get("body_encoding") == "base64":
        try:
            raw = b64decode(raw, validate=True)
        except (binascii.Error, ValueError, TypeError) as exc:
            raise bad(f"the task body is not base64: {exc}") from None
    compression = headers.get("compression")
    if compression:
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogatepass")
        raw = _decompress(raw, compression, bad)
    return raw


def _decompress(data: bytes, compression: object, bad=InvalidJob) -> bytes:
    """``data`` decompressed as kombu's ``compression`` names it, to at most
    :data:`MAX_BODY_BYTES`; ``bad(reason)`` is raised for a compression not read, data that
    is not of it, or more than the bound (read no further than one byte past it)."""
    module = _COMPRESSIONS.get(compression) if isinstance(compression, str) else None
    if module == "zstd":
        from importlib.util import find_spec

        if find_spec("compression") is None or find_spec("compression.zstd") is None:  # before Python 3.14
            module = None
    if module is None:
        raise bad(f"compression {compression!r:.60} is not read: kindling reads kombu's gzip (zlib), bzip2 and "
                  "lzma (and zstd on Python 3.14); send with one of those or none")
    try:
        reader = _decompressor(module)
        # One byte past the bound tells "too large" without reading further.
        out = reader.decompress(data, MAX_BODY_BYTES + 1)
        done = reader.eof
    except Exception as exc:  # noqa: BLE001 - each library has its own error type
        raise bad(f"the task body is not {compression} data: {type(exc).__name__}: {exc}") from None
    if len(out) > MAX_BODY_BYTES:
        raise bad(f"the task body decompresses ({compression}) to over {MAX_BODY_BYTES:,} bytes: not read")
    if not done:
        raise bad(f"the task body is cut short: incomplete {compression} data")
    return out


def _decompressor(module: str):
    """A streaming decompressor of ``module``'s format, whose ``decompress(data, max_length)``
    stops at ``max_length`` bytes out."""
    if module == "zlib":
        import zlib

        return zlib.decompressobj()
    if module == "bz2":
        import bz2

        return bz2.BZ2Decompressor()
    if module == "lzma":
        import lzma

        return lzma.LZMADecompressor()
    from compression import zstd  # type: ignore[import-not-found]  # Python 3.14

    return zstd.ZstdDecompressor()


def _has_marker(value: object) -> bool:
    if isinstance(value, dict):
        return value.keys() == {"__type__", "__value__"} or any(_has_marker(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_marker(v) for v in value)
    return False


def _decode_markers(value: object, bad) -> object:
    """``value`` with kombu's marker objects decoded, innermost first, as kombu's
    ``object_hook`` does (kombu/utils/json.py)."""
    if isinstance(value, list):
        return [_decode_markers(v, bad) for v in value]
    if not isinstance(value, dict):
        return value
    decoded = {k: _decode_markers(v, bad) for k, v in value.items()}
    if decoded.keys() != {"__type__", "__value__"}:
        return decoded
    kind, inner = decoded["__type__"], decoded["__value__"]
    decoder = _MARKERS.get(kind) if isinstance(kind, str) else None
    if decoder is None:
        raise bad(f"unsupported type {kind!r:.60} in a kombu marker {{'__type__', '__value__'}}: kombu's JSON "
                  "registers datetime, date, time, decimal, uuid, bytes and base64 (a type registered with "
                  "kombu.utils.json.register_type is not known here)")
    try:
        return decoder(inner)
    except Exception as exc:  # noqa: BLE001 - the constructors kombu calls raise what they raise
        raise bad(f"a kombu {kind} marker cannot be read as {kind}: {type(exc).__name__}: {exc}"[:600]) from None


def _datetime(text):
    from datetime import datetime

    return datetime.fromisoformat(text)


def _date(text):
    from datetime import datetime

    return datetime.fromisoformat(text).date()


def _time(text):
    from datetime import time

    return time.fromisoformat(text)


def _decimal(text):
    from decimal import Decimal

    return Decimal(text)


def _uuid(fields):
    from uuid import UUID

    return UUID(**fields)


def _bytes(text):
    return text.encode("utf-8")


def _base64(text):
    from base64 import b64decode

    return b64decode(text.encode("utf-8"))


# kombu/utils/json.py's _decoders, after _register_default_types(): the same constructors.
_MARKERS = {"datetime": _datetime, "date": _date, "time": _time, "decimal": _decimal, "uuid": _uuid,
            "bytes": _bytes, "base64": _base64}


def _timeout(timelimit: object, bad) -> float | None:
    """Celery's ``[hard, soft]`` time limits as one timeout: the earlier of those given."""
    if timelimit is None:
        return None
    if not isinstance(timelimit, list) or len(timelimit) != 2:
        raise bad(f"timelimit must be [hard, soft], got {timelimit!r:.60}")
    limits = []
    for limit in timelimit:
        if limit is None:
            continue
        if isinstance(limit, bool) or not isinstance(limit, int | float) or limit <= 0:
            raise bad(f"a time limit must be a number of seconds above 0, got {limit!r:.40}")
        limits.append(limit)
    return min(limits) if limits else None


def _unbase64(text: str | bytes, what: str) -> bytes:
    try:
        return b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidJob(f"{what} is not base64: {exc}") from None


def _lenient_claims(text: str | bytes) -> tuple[str | None, str | None]:
    """The id and task a message's headers name, read by the standard library's JSON (which
    takes NaN) from a message kindling's JSON refuses."""
    import json

    try:
        headers = json.loads(text).get("headers") or {}
        return _str(headers.get("id")), _str(headers.get("task"))
    except Exception:  # noqa: BLE001 - only for the record
        return None, None


def _protocol_1_claims(message: dict) -> tuple[str | None, str | None]:
    """The id and task a protocol 1 message's body names (``{"task", "id", "args", ...}``),
    where its body can be read."""
    if message.get("content-type", "application/json") != "application/json":
        return None, None

    def fail(reason: str) -> InvalidJob:
        return InvalidJob(reason)

    try:
        body = codec.loads(_raw_body(message, message["headers"], fail))
    except Exception:  # noqa: BLE001 - only for the record
        import json

        try:
            body = json.loads(_raw_body(message, message["headers"], fail))
        except Exception:  # noqa: BLE001
            return None, None
    if not isinstance(body, dict):
        return None, None
    return _str(body.get("id")), _str(body.get("task"))


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _eta_ms(eta: object, bad=InvalidJob) -> int | None:
    """Celery's ``eta`` or ``expires`` header (ISO 8601, UTC when naive) as epoch milliseconds."""
    if not eta:
        return None
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(str(eta))
    except ValueError:
        raise bad(f"{eta!r:.60} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)
