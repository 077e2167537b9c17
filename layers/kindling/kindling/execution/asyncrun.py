"""Async tasks: a batch's coroutines on the runner's event loop, ``concurrency`` at a time.

Only batches with async tasks import this module, and with it asyncio.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import nullcontext

from kindling.batch import Alarm, set_current_job, timeout_error
from kindling.errors import JobTimeout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kindling.batch import Outcome
    from kindling.runner import Runner


def run_async(runner: Runner, outcomes: list[Outcome], deadline: float | None) -> None:
    """Run ``outcomes`` (jobs of async tasks) to their outcomes on the runner's loop, made at
    its first use and kept while warm; each job is bounded by ``asyncio.wait_for``."""
    if runner._loop is None or runner._loop.is_closed():
        runner._loop = asyncio.new_event_loop()
    sem = asyncio.Semaphore(runner.concurrency)

    async def one(o: Outcome) -> None:
        async with sem:
            limit = runner._start(o, deadline)
            if limit is None:
                return runner._defer(o)
            seconds, by_invocation = limit
            job, task = o.job, runner._task(o)
            set_current_job(runner._context(o, seconds))
            if runner.otel:  # each job's coroutine runs in a context of its own: no detach needed
                runner._open_span(o)
            try:
                if job.payload is not None:  # type: ignore[union-attr]
                    # A blocking read: the loop waits for it, as for any job's start.
                    runner._load_arguments(o, task)
                value = await asyncio.wait_for(task.fn(*job.args, **job.kwargs), seconds)  # type: ignore[union-attr]
            except TimeoutError as exc:
                timeout = exc if isinstance(exc, JobTimeout) else timeout_error(seconds, by_invocation)
                runner._finish(o, error=timeout)
            except BaseException as exc:  # noqa: BLE001 - CancelledError, SystemExit, ... from the task
                runner._finish(o, error=exc)
            else:
                runner._finish(o, value=value)

    async def batch() -> None:
        await asyncio.gather(*(one(o) for o in outcomes), return_exceptions=True)

    # A task that blocks the loop (time.sleep, a long C call) cannot be cancelled by
    # wait_for; on the main thread SIGALRM still stops it when the invocation ends.
    left = None if deadline is None else deadline - time.monotonic() - runner.safety_ms / 1000
    try:
        with Alarm(max(left, 0.001), True) if left is not None else nullcontext():
            runner._loop.run_until_complete(batch())
    except BaseException:
        runner._loop = None  # its interrupted tasks must not resume in the next batch
        raise
