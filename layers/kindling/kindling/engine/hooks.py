"""Hooks: code of yours called once a job's outcome is recorded (error trackers, alerts).

Three hooks, named as Celery names a task's handlers and called as its signals are
(``task_success``, ``task_failure``), each ``hook(job, error)``:

``on_success``  the job was recorded ``succeeded``; ``error`` is ``None``
``on_failure``  a run raised: every such run, whether it will be retried (``failed``) or
                not (``dead``); ``error`` is what it raised, with its traceback
``on_dead``     the job was recorded ``dead``: after ``on_failure`` when its last run
                raised, alone (``error`` ``None``) when it died unrun, out of deliveries

``job`` is a :class:`kindling.core.batch.JobContext`: ``id``, ``task``, ``attempt``,
``max_attempts`` and, in Lambda, ``lambda_context``. A task's own hooks
(``@task(on_failure=...)``) run first, then its registry's (``@registry.on_failure``, or
``kindling.core.registry.on_failure`` for the default one), in the order they were added.

Hooks run on the batch's thread after its outcomes are written and before its messages are
settled, once per outcome (one the results policy keeps no record of too), on every trigger:
the SQS handler and loop, the stream worker and drain, eager mode. An outcome the store refused (a later one was already
recorded) and a batch handed back unrecorded call none. A hook that raises is logged
(``"kindling": "hook_failed"``) and changes nothing: the outcome stays recorded, the
message is settled as it would have been, the other hooks still run; that holds for whatever it
raises (``KeyboardInterrupt``, ``asyncio.CancelledError``, any ``BaseException``). A hook is
no place for slow work: it holds the batch's messages until it returns, and in a batch with a
budget (a Lambda invocation, a drain) hooks run on a thread of their own, in a copy of the
batch's context variables, and are abandoned when the budget ends
(:meth:`kindling.core.batch.Budget.hooks_by`): the batch is settled all the same, and a log
line (``"kindling": "hook_abandoned"``) names the hook and the calls left.

The runner loads this module only when a registry has a hook.
"""

from __future__ import annotations

from kindling.core.batch import Budget, JobContext, lambda_context
from kindling.core.status import DEAD, FAILED, SUCCEEDED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from kindling.core.batch import Outcome
    from kindling.core.registry import Registry

__all__ = ["call", "calls_for"]


def calls_for(o: Outcome) -> tuple[str, ...]:
    """The hooks a settled outcome asks for, in the order they are called."""
    if o.job is None or (o.record is None and not o.unrecorded):  # never a job, or not settled by this delivery
        return ()
    if o.status == SUCCEEDED:
        return ("on_success",)
    if o.status == FAILED:
        return ("on_failure",)
    if o.status == DEAD:
        return ("on_failure", "on_dead") if o.error is not None else ("on_dead",)
    return ()


def call(registry: Registry, outcomes: list[Outcome], log: Callable[[dict], object] | None,
         max_attempts: Callable[[Outcome], int], deadline: float | None = None) -> None:
    """Call every hook the batch's recorded outcomes ask for; whatever a hook raises is logged.

    With a ``deadline`` (the batch's budget: :meth:`kindling.core.batch.Budget.hooks_by`) the hooks
    run on a thread of their own, and a hook still running at the deadline is abandoned: the
    batch goes on without it, and one line (``"kindling": "hook_abandoned"``) names it and the
    hooks left uncalled. Without one (a long-lived worker) they run here, to their end."""
    calls = _calls(registry, outcomes, max_attempts)
    if not calls:
        return
    if deadline is None:
        for each in calls:
            _call_one(each, log)
        return
    from _contextvars import copy_context  # the C module, as kindling.core.batch imports it
    from _thread import allocate_lock, start_new_thread

    if Budget.seconds_to(deadline) <= 0:  # the batch's budget is spent already: none is started
        o = calls[0][4]
        if log:
            log({"level": "WARNING", "message": "no time left in the batch's budget: hooks not called",
                 "kindling": "hook_abandoned", "job_id": o.job_id, "task": o.task, "status": o.status,
                 "not_called": len(calls), "xray_trace_id": o.trace_id})
        return
    done, state = allocate_lock(), {"at": 0, "abandoned": False}
    done.acquire()

    def run_all() -> None:
        try:
            for at, each in enumerate(calls):
                if state["abandoned"]:
                    return
                state["at"] = at
                _call_one(each, log)
        finally:
            done.release()

    # The thread runs in a copy of the batch's context: an error tracker's scope, a span or a
    # logger's keys held in context variables reach the hooks as they do without a budget.
    start_new_thread(copy_context().run, (run_all,))
    left = Budget.seconds_to(deadline)
    if done.acquire(True, left) if left > 0 else done.acquire(False):
        return
    state["abandoned"] = True
    name, hook, job, _, o, _ = calls[state["at"]]
    if log:
        log({"level": "WARNING", "message": f"{name} hook still running at the batch's budget: abandoned",
             "kindling": "hook_abandoned", "hook": _hook_name(hook), "job_id": o.job_id, "task": o.task,
             "status": o.status, "not_called": len(calls) - state["at"] - 1, "xray_trace_id": o.trace_id})


def _calls(registry: Registry, outcomes: list[Outcome], max_attempts: Callable[[Outcome], int]) -> list[tuple]:
    """``(name, hook, job, error, outcome, task)`` for every call, in the order they are made."""
    context = lambda_context()
    calls = []
    for o in outcomes:
        names = calls_for(o)
        if not names:
            continue
        task = registry.find(o.task)  # type: ignore[arg-type]
        job = JobContext(o.job_id, o.task, o.attempts, max_attempts(o), None, context,  # type: ignore[arg-type]
                         o.job.headers if o.job is not None else None)
        for name in names:
            own = getattr(task, name, None) if task is not None else None
            error = None if name == "on_success" else o.error
            calls += [(name, hook, job, error, o, task) for hook in ((own,) if own is not None else ())
                      + tuple(registry.hooks[name])]
    return calls


def _call_one(each: tuple, log: Callable[[dict], object] | None) -> None:
    name, hook, job, error, o, task = each
    try:
        hook(job, error)
    except BaseException as exc:  # noqa: BLE001 - a hook never changes an outcome, whatever it raises
        if log:
            redact = task is not None and task.redact
            log({"level": "ERROR", "message": f"{name} hook raised", "kindling": "hook_failed",
                 "hook": _hook_name(hook), "job_id": o.job_id, "task": o.task, "status": o.status,
                 "error": f"{type(exc).__name__}: {'[redacted]' if redact else exc}"[:500],
                 "xray_trace_id": o.trace_id})


def _hook_name(hook: object) -> str:
    return getattr(hook, "__qualname__", repr(hook))[:200]
