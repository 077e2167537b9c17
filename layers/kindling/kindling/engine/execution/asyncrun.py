"""Async tasks: a batch's coroutines on the runner's event loop, ``concurrency`` at a time.

Only batches with async tasks import this module, and with it asyncio.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import nullcontext

from kindling.core.batch import Alarm, job_of, set_current_job, timeout_error
from kindling.core.errors import JobTimeout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kindling.core.batch import Outcome, Steps


def run_async(runner: Steps, outcomes: list[Outcome], deadline: float | None) -> None:
    """Run ``outcomes`` (jobs of async tasks) to their outcomes on the runner's loop, made at
    its first use and kept while warm; each job is bounded by ``asyncio.timeout``."""
    loop = runner.event_loop
    if not isinstance(loop, asyncio.AbstractEventLoop) or loop.is_closed():
        loop = runner.event_loop = asyncio.new_event_loop()
    sem = asyncio.Semaphore(runner.concurrency)

    async def one(o: Outcome) -> None:
        async with sem:
            limit = runner.start_job(o, deadline)
            if limit is None:
                return runner.defer_job(o)
            seconds, by_invocation = limit
            job, task = job_of(o), runner.task_of(o)
            set_current_job(runner.job_context(o, seconds))
            runner.open_span(o)  # each job's coroutine runs in a context of its own: no detach needed
            try:
                if job.payload is not None:
                    # A blocking read: the loop waits for it, as for any job's start.
                    runner.load_arguments(o)
                # In this coroutine, not a task of its own (Python 3.11's wait_for makes one, whose
                # SystemExit or KeyboardInterrupt would escape the loop and end the whole batch).
                async with asyncio.timeout(seconds):
                    value = await task.fn(*job.args, **job.kwargs)
            except TimeoutError as exc:
                timeout = exc if isinstance(exc, JobTimeout) else timeout_error(seconds, by_invocation)
                runner.finish_job(o, error=timeout)
            except BaseException as exc:  # noqa: BLE001 - CancelledError, SystemExit, ... from the task
                runner.finish_job(o, error=exc)
            else:
                runner.finish_job(o, value=value)

    async def batch() -> None:
        await asyncio.gather(*(one(o) for o in outcomes), return_exceptions=True)

    # A task that blocks the loop (time.sleep, a long C call) cannot be cancelled by
    # wait_for; on the main thread SIGALRM still stops it when the invocation ends.
    stop_at = runner.budget.run_by(deadline)
    try:
        with Alarm(max(stop_at - time.monotonic(), 0.001), True) if stop_at is not None else nullcontext():
            loop.run_until_complete(batch())
    except BaseException:
        runner.event_loop = None  # its interrupted tasks must not resume in the next batch
        raise
