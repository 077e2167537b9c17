"""What the runner refuses to run, recorded: a message that is not a job this worker can
run (``rejected``), and a job delivered past its allowance without an outcome (``dead``,
the crash-loop rule: :func:`kindling.core.policy.out_of_deliveries`).

A rejected message is recorded and never run. A well-formed envelope (unknown task,
arguments that do not bind, an envelope no worker took before its last delivery) is
recorded under its job id, so its sender sees the rejection; anything else, and any
message whose signature does not verify, under a key of its own message
(:func:`kindling.core.records.rejected_key`).

And an outcome the store refused as of an older generation (:func:`drop_stale`): the job was
revived while its delivery ran.

The runner loads this module at the first message it refuses: a batch of plain jobs never
does.
"""

from __future__ import annotations

from kindling.core.envelope import decode_job, now_ms
from kindling.core.errors import InvalidJob
from kindling.core.records import build_record, rejected_key
from kindling.core.status import DEAD, REJECTED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kindling.core.batch import Delivery, Outcome
    from kindling.core.envelope import Job
    from kindling.core.registry import Registry

__all__ = ["dead_undelivered", "drop_stale", "reject"]


def reject(o: Outcome, d: Delivery, reason: str, *, registry: Registry, worker: dict, ttl_s: int,
           claimed_id: str | None = None, task: str | None = None, job: Job | None = None,
           unsigned: bool = False) -> Outcome:
    """Make ``o`` (delivery ``d``'s) the rejection of its message, with its record.

    ``claimed_id`` and ``task``: what the message says it is, for its sender to read;
    ``job``: the envelope, when it decoded. ``unsigned``: its signature does not verify, so
    it is never recorded under the job id it claims (which it could take from a real job):
    the claims are read from its body only to tell the sender what arrived.
    """
    if unsigned:
        claimed_id, task = _claims(d.body)
    key = job.id if job is not None else rejected_key(d.ref)
    known = registry.find(task) if task else None
    redact = known is not None and known.redact  # its arguments may be in the reason and the body
    o.job_id, o.task, o.status, o.attempts = key, task, REJECTED, d.attempts
    o.reason = "InvalidJob: [redacted]" if redact else reason
    at = now_ms()
    o.record = build_record(key=key, task=task, status=REJECTED, attempts=d.attempts, started_at=at,
                            finished_at=at, job=job, error={"type": "InvalidJob", "message": reason},
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
