"""What the runner refuses to run, recorded: a message that is not a job this worker can
run (``rejected``), and a job delivered past its allowance without an outcome (``dead``,
the crash-loop rule: :func:`kindling.core.policy.out_of_deliveries`).

A rejected message is recorded and never run. A well-formed envelope (unknown task,
arguments that do not bind, an envelope no worker took before its last delivery) is
recorded under its job id, so its sender sees the rejection; so is a Celery message that
names a valid task id (:attr:`kindling.core.errors.InvalidJob.keyed`), whatever is wrong with the
rest of it. Anything else, and any message whose signature does not verify, under a key of
its own message (:func:`kindling.core.records.rejected_key`). A record under a job id never
takes a real job's place: the store writes a ``rejected`` only over no record, a
``rejected``, or one that stands for no run yet (:data:`kindling.core.status.REPLACES`), and one
batch writes one record per id (:func:`kindling.core.batch.drop_duplicates`).

A Celery message past its ``expires`` is not rejected but its job recorded ``revoked``
under its id (as Celery's worker marks an expired task), and the delivery ``skipped``:
a ``revoked`` also ends a job that failed before it expired.

And an outcome the store refused as of an older generation (:func:`drop_stale`): the job was
revived while its delivery ran.

The runner loads this module at the first message it refuses: a batch of plain jobs never
does.
"""

from __future__ import annotations

from kindling.core.envelope import decode_job, is_job_id, now_ms
from kindling.core.errors import Expired, InvalidJob
from kindling.core.records import build_record, describe_error, rejected_key
from kindling.core.status import DEAD, REJECTED, REVOKED, SKIPPED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kindling.core.batch import Delivery, Outcome
    from kindling.core.envelope import Job
    from kindling.core.registry import Registry

__all__ = ["dead_undelivered", "drop_stale", "reject"]


def reject(o: Outcome, d: Delivery, reason: str, *, registry: Registry, worker: dict, ttl_s: int,
           claimed_id: str | None = None, task: str | None = None, job: Job | None = None,
           unsigned: bool = False, refusal: InvalidJob | None = None, cause: BaseException | None = None) -> Outcome:
    """Make ``o`` (delivery ``d``'s) the rejection of its message, with its record.

    ``claimed_id`` and ``task``: what the message says it is, for its sender to read;
    ``job``: the envelope, when it decoded. ``refusal``: the decoder's
    :class:`~kindling.core.errors.InvalidJob`, whose claims these are; ``keyed``, its message
    names its job id beyond doubt, so the record is under that id (when it is a valid job
    id); :class:`~kindling.core.errors.Expired`, a keyed message past its expiry: the job is
    recorded ``revoked`` and the delivery ``skipped``. ``unsigned``: its signature does not
    verify, so it is never recorded under the job id it claims (which it could take from a
    real job): the claims are read from its body only to tell the sender what arrived.
    ``cause``: what the message made the worker raise (:mod:`kindling.engine.contain`): the
    record's error is of its type, with ``reason`` as its message.
    """
    keyed = expired = False
    if refusal is not None:
        claimed_id, task, keyed, expired = refusal.job_id, refusal.task, refusal.keyed, isinstance(refusal, Expired)
    if unsigned:  # never keyed: its claims are only read back for the record
        claimed_id, task = _claims(d.body)
        keyed = expired = False
    if job is not None:
        key = job.id
    elif keyed and is_job_id(claimed_id):
        key = claimed_id
    else:
        key, expired = rejected_key(d.ref), False
    known = registry.find(task) if task else None
    redact = known is not None and known.redact  # its arguments may be in the reason and the body
    status, kind = (REVOKED, "Expired") if expired else (REJECTED, "InvalidJob")
    o.job_id, o.task, o.status, o.attempts = key, task, SKIPPED if expired else REJECTED, d.attempts
    o.reason = f"{kind}: [redacted]" if redact else reason
    at = now_ms()
    error = {"type": kind, "message": reason}
    if cause is not None:
        error = dict(describe_error(cause), message=reason)
    o.record = build_record(key=key, task=task, status=status, attempts=d.attempts, started_at=at,
                            finished_at=at, job=job, error=error,
                            raw=d.body, job_id=claimed_id, worker=worker, ttl_s=ttl_s, redact=redact)
    return o


def dead_undelivered(o: Outcome, *, worker: dict, ttl_s: int, redact: bool = False) -> None:
    """Make ``o`` the end of a job delivered too often without a recorded outcome: ``dead``,
    not run again."""
    o.reason = (f"delivered {o.deliveries} times without a recorded outcome (its runs crashed or timed out "
                "the worker, or it was handed back every time); not run again")
    at = now_ms()
    o.record = build_record(key=o.job_id, task=o.task, status=DEAD, attempts=o.attempts,  # type: ignore[arg-type]
                            started_at=at, finished_at=at, job=o.job,
                            error={"type": "TooManyDeliveries", "message": o.reason}, worker=worker, ttl_s=ttl_s,
                            redact=redact)
    o.status = DEAD


def drop_stale(o: Outcome, log) -> None:
    """An outcome the store refused as of an older generation: the job was revived while
    this delivery ran, and the revive's own message runs it. Dropped (acknowledged, not
    retried, not recorded anywhere), said in one log line (to ``log``, if any)."""
    o.reason = (f"not recorded: the job was revived while this delivery of generation {o.generation} ran; "
                f"its outcome ({o.status}) is dropped")
    if log:
        log({"level": "WARNING", "message": "stale outcome dropped",
             "kindling": "stale_generation", "job_id": o.job_id, "task": o.task, "generation": o.generation,
             "outcome": o.status, "attempt": o.attempts, "ref": o.ref, "xray_trace_id": o.trace_id})


def _claims(body: str | bytes) -> tuple[str | None, str | None]:
    """The job id and task a body claims, as far as it can be read."""
    try:
        job = decode_job(body)
        return job.id, job.task
    except InvalidJob as exc:
        return exc.job_id, exc.task
    except Exception:  # noqa: BLE001 - the body is only for the record
        return None, None
