"""Result records: the one place every outcome record is built.

Every record fits a DynamoDB item by construction: each text field has a byte budget
(UTF-8, as DynamoDB counts), a field cut to fit is named in ``truncated`` with its full
size, and text that is not valid Unicode (a lone surrogate in an exception message) is
escaped instead of failing the write of the whole batch. A record is::

    {"id", "task", "status", "attempts", "enqueued_at", "started_at", "finished_at",
     "duration_ms", "result" | "result_payload" | "error": {"type", "message", "traceback"}, "raw",
     "job_id", "truncated", "trace_id", "worker", "expires_at", "args_preview"}

``args_preview`` is the job's ``{"args", "kwargs"}`` as JSON cut to
:data:`MAX_ARGS_PREVIEW_BYTES` (named in ``truncated`` when cut); a ``redact=True`` task's
record has none.

Rejected messages that are not a well-formed envelope are keyed ``rejected#<message
ref>``: ``#`` cannot occur in a job id, so such a record never lands on a real job's key,
and two bad messages never share one. (A Celery message naming a valid task id is the
exception: its rejection is recorded under that id, :mod:`kindling.core.refusals`.)

Two attributes feed the table's secondary indexes (template.yaml), each sharded by the
record's key so that no index value becomes one hot partition: ``task_shard``
(``<task>#<n>``, on every record with a task name; index ``by_task``; :data:`SHARDS`
partitions) and ``status_shard`` (``<status>#<n>``, on every record but a ``succeeded``
one; index ``by_status``, sparse: the common case pays one index write, not two; the
deployment's :func:`status_shards`). Both sort by ``finished_at``. A record's
replacement drops what it no longer carries, so a ``dead`` job that later succeeds
leaves the ``by_status`` index.

An operator's revive (``kindling jobs retry`` of a ``dead`` job) writes a ``queued``
record with a ``generation`` (2 for the first revive): the worker reads it as no record,
and its next outcome record replaces it, carrying the generation it read, so that a
delivery of an older generation cannot overwrite it (:data:`kindling.core.status.GENERATION_CHECKED`).
The earlier generations' outcomes live on in the revive's own item (see ``kindling.tools.ops``).
"""

from __future__ import annotations

from kindling.core import codec
from kindling.core.errors import ResultTooLarge, UnencodableResult
from kindling.core.status import BY_STATUS, generation_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kindling.core.envelope import Job

MAX_ITEM_BYTES = 400 * 1024  # DynamoDB's item limit, names and values together
MAX_RESULT_BYTES = 350_000
MAX_RAW_BYTES = 300_000  # a rejected record holds no result, so its body gets the room
MAX_TASK_BYTES = 256
MAX_MESSAGE_BYTES = 4_000
MAX_TRACEBACK_BYTES = 8_000
MAX_REF_BYTES = 512
MAX_ERROR_TYPE_BYTES = 200
# The arguments' preview (the dashboard's job page): a 512-byte cut keeps a typical record
# (~400 bytes without it) under 1 KB, one write unit; the indexes do not project it, so
# their writes do not grow.
MAX_ARGS_PREVIEW_BYTES = 512
# Record keys that are not a job id: ``<kind>#<...>`` (``#`` occurs in no job id, so none
# lands on a job's record). Every kind is here.
REJECTED_PREFIX = "rejected#"
"""A message that is not a well-formed envelope: ``rejected#<message ref>``."""
CHORD_PREFIX = "chord#"
"""A chord's record (:mod:`kindling.engine.followups`): ``chord#<chord id>``."""
REVIVE_PREFIX = "revive#"
"""A job's revive ledger (:mod:`kindling.tools.ops.revive`): ``revive#<job id>``."""
SHARDS = 4
CHORD_INDEX = "chord"
"""The ``by_status`` index value of chord records (``chord#<n>``), sorted by their last count:
apart from jobs' statuses, since a chord's ``dead`` is not a job's."""
MAX_STATUS_SHARDS = 100  # the template's StatusIndexShards' MaxValue: a listing queries each one


def status_shards(environ=None) -> int:
    """The deployment's partitions per status in ``by_status``: ``KINDLING_STATUS_SHARDS``
    (the template's ``StatusIndexShards``), else :data:`SHARDS`. Read at each use, as the
    writers (worker, revive, revoke) and the reader (``kindling jobs list``) must agree."""
    import os

    value = ((os.environ if environ is None else environ).get("KINDLING_STATUS_SHARDS") or "").strip()
    if not value:
        return SHARDS
    if not value.isdigit() or not 1 <= int(value) <= MAX_STATUS_SHARDS:
        raise ValueError(f"KINDLING_STATUS_SHARDS must be a whole number from 1 to {MAX_STATUS_SHARDS}, got {value!r}")
    return int(value)


def index_shards(index: str) -> int:
    """How many partitions a listing of one value of ``index`` reads: ``by_task`` has
    :data:`SHARDS`, ``by_status`` (chords included) the deployment's :func:`status_shards`."""
    return SHARDS if index == "by_task" else status_shards()


def clip(text: str, limit: int) -> tuple[str, int | None]:
    """``text`` as valid UTF-8 of at most ``limit`` bytes, and its full size if it was cut.

    Lone surrogates become ``\\udxxx`` escapes; a cut never splits a character.
    """
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = text.encode("utf-8", "backslashreplace")
        text = data.decode("utf-8")
    if len(data) <= limit:
        return text, None
    return data[:limit].decode("utf-8", "ignore"), len(data)


def rejected_key(ref: str) -> str:
    """The record key of a message that is not a well-formed envelope."""
    return REJECTED_PREFIX + clip(str(ref), MAX_REF_BYTES)[0]


def chord_key(chord_id: str) -> str:
    """The record key of a chord."""
    return CHORD_PREFIX + chord_id


def chord_shard(key: str) -> str:
    """A chord record's ``status_shard`` (index ``by_status``), from its key."""
    return f"{CHORD_INDEX}#{_shard(key, status_shards())}"


RATE_PREFIX = "rate#"
"""A rate-limited task's count for one window (:mod:`kindling.core.ratelimit`)."""


def rate_key(task: str, window: int) -> str:
    """The record key counting ``task``'s runs in window number ``window``."""
    return f"{RATE_PREFIX}{task}#{window}"


def revive_key(job_id: str) -> str:
    """The record key of a job's revive ledger."""
    return REVIVE_PREFIX + job_id


def encode_result(value: object) -> tuple[str | None, BaseException | None]:
    """A task's return value as recorded JSON text, or the error that stops it being recorded.

    Anything that goes wrong while encoding (a value the codec's contract refuses, a
    ``__str__`` or ``isoformat`` that raises) is the job's :class:`UnencodableResult`,
    never the batch's, whichever codec engine the process runs; too many bytes is
    :class:`ResultTooLarge`.
    """
    try:
        text = codec.dumps(value)
        size = len(text.encode("utf-8"))  # the codec refuses lone surrogates: this cannot fail
    except BaseException as exc:  # noqa: BLE001 - user code runs inside the encoder
        return None, UnencodableResult(
            f"task result cannot be encoded as JSON: {_safe_str(exc, 500) or type(exc).__name__}")
    if size > MAX_RESULT_BYTES:
        return None, ResultTooLarge(
            f"result is {size:,} bytes of JSON; a result record holds at most {MAX_RESULT_BYTES:,} "
            "(give the worker a payload bucket, KINDLING_PAYLOAD_BUCKET, to keep large results in S3)",
            text,
        )
    return text, None


def describe_error(exc: BaseException) -> dict:
    """The error as recorded: type, message and the last frames of the traceback.

    Never raises, whatever the exception's ``__str__`` or traceback does.
    """
    kind = _safe_str(type(exc).__name__, MAX_ERROR_TYPE_BYTES) or "BaseException"
    message = _safe_str(exc, MAX_MESSAGE_BYTES)
    if message is None:
        message = f"<{kind}: str() of the exception raised>"
    try:
        import traceback

        tb = "".join(traceback.format_exception(exc, limit=-6))
    except BaseException:  # noqa: BLE001
        tb = ""
    data = tb.encode("utf-8", "backslashreplace")
    tb = data[-MAX_TRACEBACK_BYTES:].decode("utf-8", "ignore")
    return {"type": kind, "message": message, "traceback": tb}


def _safe_str(obj: object, limit: int) -> str | None:
    try:
        text = str(obj)
    except BaseException:  # noqa: BLE001
        return None
    return clip(text, limit)[0]


def _preview(job: Job) -> str:
    call = {"args": job.args, "kwargs": job.kwargs}
    if job.payload:
        call["payload"] = job.payload  # the arguments are in S3: say where
    try:
        return codec.dumps(call)
    except Exception:  # noqa: BLE001 - a decoded envelope always encodes; a preview never fails a record
        return repr(call)


def _shard(key: str, shards: int = SHARDS) -> int:
    return sum(key.encode("utf-8", "backslashreplace")) % shards


def _digest(into: dict, name: str, value: str | bytes | None) -> None:
    """Record what ``value`` was (a digest and a size), never the value."""
    if value is None:
        return None
    from kindling.core.digest import sha256_hex

    data = value if isinstance(value, bytes | bytearray) else value.encode("utf-8", "backslashreplace")
    into[name] = {"sha256": sha256_hex(data), "bytes": len(data)}


def renumbered(record: dict, status: str, attempts: int) -> dict:
    """``record`` with another status and attempt count (and the index key that follows)."""
    out = dict(record, status=status, attempts=attempts)
    if status in BY_STATUS:
        out["status_shard"] = f"{status}#{_shard(out['id'], status_shards())}"
    else:
        out.pop("status_shard", None)
    return out


def build_record(
    *,
    key: str,
    task: str | None,
    status: str,
    attempts: int,
    started_at: int,
    finished_at: int,
    duration_ms: float = 0,
    job: Job | None = None,
    result: str | None = None,
    result_payload: dict | None = None,
    error: dict | None = None,
    raw: str | bytes | None = None,
    job_id: str | None = None,
    worker: dict | None = None,
    ttl_s: int = 0,
    trace_id: str | None = None,
    generation: int | None = None,
    redact: bool = False,
) -> dict:
    """Every result record, whatever produced it (run, rejection, crash loop).

    Args:
        key: the record's key (a job id, or :func:`rejected_key`).
        job: the decoded job, when there is one (for ``enqueued_at``).
        result: the encoded result (see :func:`encode_result`) of a ``succeeded`` job.
        result_payload: instead of ``result``, the pointer to a result too large for the
            record, kept in S3 (:mod:`kindling.shared.payloads`).
        error: a :func:`describe_error` dict, or any ``{"type", "message"}``.
        raw: a rejected message's body, kept so the sender can see what arrived.
        job_id: the id a rejected message claimed, when it is not the key.
        generation: a revived job's generation (a revive's ``queued`` record, and the
            outcomes of that generation's runs); ``None`` for generation 1.
        redact: the task handles data that must not be stored (``@task(redact=True)``):
            its result, error message, traceback and raw body are kept only as a SHA-256
            and a size (``redacted``), so equal values can still be matched.
    """
    redacted: dict[str, dict] = {}
    if redact:
        _digest(redacted, "result", result)
        _digest(redacted, "raw", raw)
        result = raw = None
        if error is not None:
            _digest(redacted, "error", str(error.get("message", "")))
            error = {"type": error.get("type", ""), "message": "[redacted]", "traceback": ""}
    truncated: dict[str, int] = {}

    def fit(name: str, text: str, limit: int) -> str:
        clipped, full = clip(text, limit)
        if full is not None:
            truncated[name] = full
        return clipped

    record: dict = {
        "id": key,
        "task": fit("task", task or "", MAX_TASK_BYTES),
        "status": str(status),
        "attempts": attempts,
        "started_at": started_at,
        "finished_at": finished_at,
        "duration_ms": duration_ms,
    }
    if record["task"]:
        record["task_shard"] = f"{record['task']}#{_shard(key)}"
    if status in BY_STATUS:
        record["status_shard"] = f"{status}#{_shard(key, status_shards())}"
    if job is not None:
        record["enqueued_at"] = job.enqueued_at
        if not redact:
            record["args_preview"] = fit("args_preview", _preview(job), MAX_ARGS_PREVIEW_BYTES)
    if result is not None:
        record["result"] = result
    if result_payload is not None:
        record["result_payload"] = result_payload
    if error is not None:
        record["error"] = {
            "type": fit("error.type", str(error.get("type", "")), MAX_ERROR_TYPE_BYTES),
            "message": fit("error.message", str(error.get("message", "")), MAX_MESSAGE_BYTES),
            "traceback": fit("error.traceback", str(error.get("traceback", "")), MAX_TRACEBACK_BYTES),
        }
    if raw is not None:
        text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8", "backslashreplace")
        record["raw"] = fit("raw", text, MAX_RAW_BYTES)
    if job_id is not None and job_id != key:
        record["job_id"] = fit("job_id", job_id, MAX_REF_BYTES)
    if truncated:
        record["truncated"] = truncated
    if redacted:
        record["redacted"] = redacted
    if trace_id:
        record["trace_id"] = fit("trace_id", trace_id, MAX_REF_BYTES)
    if worker:
        record["worker"] = worker
    if generation:
        record["generation"] = generation
    if ttl_s:
        record["expires_at"] = finished_at // 1000 + ttl_s
    return record


REVOKED_MESSAGE = ("revoked by an operator: no worker starts it from then on; a run already under way runs on "
                   "(its success is recorded over this, its failure is not)")


def revoked_record(job_id: str, task: str | None = None, *, at_ms: int | None = None) -> dict:
    """The record an operator's revoke writes: ``revoked``, so the duplicate check every batch
    makes skips the job (written under the forward-only rule: a finished job is not revoked).

    No worker records a job as running, so a revoke cannot tell a job waiting in its queue
    from one a worker is running: the record says only what the revoke does. A run already
    under way is not stopped, and ends by :data:`kindling.core.status.REPLACES`: a success
    replaces the revoke (the job did run), a failure does not (the revoke stands, and the
    job is not retried)."""
    from kindling.core.envelope import now_ms
    from kindling.core.status import REVOKED

    at = now_ms() if at_ms is None else at_ms
    return build_record(key=job_id, task=task, status=REVOKED, attempts=0, started_at=at, finished_at=at,
                        error={"type": "Revoked", "message": REVOKED_MESSAGE})


def scheduled_record(job: Job, *, worker: dict | None = None, ttl_s: int = 0, trace_id: str | None = None,
                     redact: bool = False) -> dict:
    """The record of a job received before its ``not_before`` (:data:`kindling.core.status.SCHEDULED`):
    no attempt, and ``due_at``, the epoch ms it is due at, for ``kindling jobs show`` and the
    dashboard. Its times are the receipt's: ``by_status`` lists it among the latest."""
    from kindling.core.envelope import now_ms
    from kindling.core.status import SCHEDULED

    at = now_ms()
    record = build_record(key=job.id, task=job.task, status=SCHEDULED, attempts=0, started_at=at, finished_at=at,
                          job=job, worker=worker, ttl_s=ttl_s, trace_id=trace_id, redact=redact)
    record["due_at"] = job.not_before
    return record


def revoke(store, job_id: str, *, task: str | None = None) -> None:
    """Write ``job_id``'s :func:`revoked_record` to ``store`` (anything with ``write``), under
    the forward-only rule (:data:`kindling.core.status.REPLACES`): only a job with no outcome
    recorded yet, or one waiting for a retry, is revoked. Raises
    :class:`~kindling.core.errors.KindlingError` naming the status that refused it."""
    from kindling.core.errors import KindlingError

    refused = store.write([revoked_record(job_id, task)])
    if refused:
        raise KindlingError(f"job {job_id} is already {refused[job_id]}: not revoked")


def stored_state(record: dict) -> tuple:
    """A stored record as a store's ``read_states`` gives it: ``(status, attempts)``, and the
    generation after them only when above 1 (a revived job's, :mod:`kindling.tools.ops.revive`)."""
    state = (record["status"], int(record.get("attempts") or 0))
    generation = generation_of(record)
    return (*state, generation) if generation > 1 else state


def chord_error(index: int, reason: str | None, message: str | None = None) -> dict:
    """Why a chord failed, as its record's ``error``: the first member that did not succeed,
    or whose result is lost (``message``)."""
    return {"type": "ChordFailed", "message": (message or f"member {index} did not succeed: {reason or 'dead'}")[:1000]}
