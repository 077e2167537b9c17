"""FIFO message groups: a batch's jobs one at a time, in batch order.

Any delivery with a group makes its batch a FIFO batch; async tasks in it run one by one
too (through :mod:`kindling.engine.execution.asyncrun`, loaded only then).
"""

from __future__ import annotations

from kindling.core.status import DEFERRED, FAILED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from kindling.core.batch import Delivery, Outcome, Steps


def run_in_group_order(runner: Steps, outcomes: list[Outcome], deliveries: Sequence[Delivery],
                       deadline: float | None) -> None:
    """Once a job of a group failed or was handed back, the rest of that group is handed
    back unstarted, as Powertools' FIFO processor does, and comes back no sooner than that
    job. Other groups go on. A job that ends ``dead`` (moved to the dead letters) or a
    rejected message does not stop its group, as SQS's own redrive does not: they will never
    run again.

    A rate-limited job takes its run (:func:`kindling.core.ratelimit.admit`) here, just before it
    starts, so one handed back because its group stopped takes none; a run taken by one
    that then does not start is given back."""
    stopped: dict[str, Outcome] = {}
    grants: dict = {}
    try:
        for o, d in zip(outcomes, deliveries, strict=True):
            if o.status is None:
                if d.group in stopped:
                    o.status = DEFERRED
                    o.reason = f"an earlier job of FIFO group {d.group!r} did not succeed"
                    o.retry_in = stopped[d.group].retry_in  # type: ignore[index]
                elif runner.task_of(o).rate_limit is None or _take_run(runner, o, deadline, grants):
                    _run(runner, o, deadline)
            if d.group is not None and d.group not in stopped and o.status in (FAILED, DEFERRED):
                stopped[d.group] = o
    finally:
        if grants:
            from kindling.core.ratelimit import give_back

            give_back(runner, grants, runner.budget.write_by(deadline))


def _take_run(runner: Steps, o: Outcome, deadline: float | None, grants: dict) -> bool:
    """Whether ``o`` was granted a run of its task's rate limit; if not (over the limit, or
    the count cannot be reached) it is handed back, and its group stops."""
    from kindling.core.errors import StoreUnavailable
    from kindling.core.policy import store_backoff_s
    from kindling.core.ratelimit import admit

    try:
        admit(runner, [o], runner.budget.run_by(deadline), grants)
    except StoreUnavailable as exc:
        o.status = DEFERRED
        o.reason = f"not started: the rate limit's count cannot be read: {exc}"[:1000]
        o.retry_in = store_backoff_s(o.deliveries)
    return o.status is None


def _run(runner: Steps, o: Outcome, deadline: float | None) -> None:
    if runner.task_of(o).is_async:
        from kindling.engine.execution.asyncrun import run_async

        run_async(runner, [o], deadline)
    else:
        runner.run_job(o, deadline)
