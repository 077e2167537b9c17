"""Containing a batch that breaks the runner, for every trigger.

The runner contains whatever one job or one body does (a job's failure is its outcome), so
a batch that makes it raise anyway is a bug in kindling. Failing the whole batch would fail
its batch-mates on every delivery, for ever: instead each delivery is run again on its own,
and one that still breaks the runner is recorded ``rejected`` under a key of its own message
(:func:`kindling.core.refusals.reject`, with what it raised; its body is kept, never decoded
again) and settled; its batch-mates run as usual. Batch-mates that had already run may run
twice (at least once, as always; a job that succeeded is skipped by the duplicate check).
With the store down the broken delivery is handed back instead, as any batch then is.

:meth:`kindling.engine.runner.Runner.run` does it for every trigger (the Lambda SQS handler,
the local SQS loop, eager mode); the stream worker, which runs a batch in phases, hands a
phase that raised to :func:`one_by_one`. Loaded by the first batch that breaks the runner.
"""

from __future__ import annotations

from kindling.core.batch import STORE_UNAVAILABLE, Outcome, hand_back
from kindling.core.errors import StoreUnavailable
from kindling.core.records import describe_error
from kindling.core.refusals import reject

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from kindling.core.batch import Delivery
    from kindling.core.envelope import Job

__all__ = ["one_by_one", "poisoned"]


def one_by_one(runner, deliveries: Sequence[Delivery], exc: Exception,
               remaining_ms: Callable[[], int] | None = None, request_id: str | None = None,
               send: Callable[[list[Job]], object] | None = None) -> list[Outcome]:
    """The outcomes of a batch whose run by ``runner`` (a :class:`kindling.engine.runner.Runner`,
    not imported: it imports this module) raised ``exc``: each delivery run again alone
    (``Runner.run``, itself contained), a lone one that raised recorded :func:`poisoned`."""
    if len(deliveries) == 1:
        return [poisoned(runner, deliveries[0], exc, request_id)]
    if runner.log:
        error = describe_error(exc)
        runner.log({"level": "ERROR", "kindling": "batch_failed", "rerun_one_by_one": len(deliveries),
                    "error": f"{error['type']}: {error['message']}"[:300]})
    outcomes: list[Outcome] = []
    for d in deliveries:
        outcomes.extend(runner.run([d], remaining_ms, request_id, send=send))
    return outcomes


def poisoned(runner, d: Delivery, exc: Exception, request_id: str | None = None) -> Outcome:
    """A delivery that breaks the runner on its own: recorded ``rejected`` at once (it never
    reaches the batch's write), or handed back if the store cannot be reached."""
    error = describe_error(exc)  # never raises, whatever the exception's __str__ does
    worker = dict(runner.worker, request_id=request_id) if request_id else runner.worker
    o = reject(Outcome(d.ref, None, None, None, d.attempts), d,
               f"the message broke the worker: {error['type']}: {error['message']}"[:1000],
               registry=runner.registry, worker=worker, ttl_s=runner.ttl_s, cause=exc)
    try:
        runner.store.write([o.record])  # type: ignore[list-item]
    except StoreUnavailable as down:
        hand_back([o], f"{STORE_UNAVAILABLE}: {down}")
        return o
    if runner.log:
        runner.log({"level": "WARNING", "kindling": "rejected", "job": o.job_id, "ref": d.ref, "error": o.reason})
    return o
