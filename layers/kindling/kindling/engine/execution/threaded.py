"""Synchronous jobs in threads: ``Runner(threads=N)`` with N > 1, in long-lived workers.

A thread cannot be interrupted, so a job past its limit is recorded as timed out by the
batch's waiter while its thread runs on (the record is written once: see
:meth:`kindling.engine.runner.Runner.finish_job`). Jobs not yet started when the invocation's time
runs short are handed back unstarted.

The threads take a batch's jobs from one shared list, each the next one as it comes free:
one wake-up per thread and batch, not a queued task and a wake-up per job. On a batch of
hundreds of short jobs the per-job hand-off cost more than the jobs (500 no-op jobs: about
50 ms through a ThreadPoolExecutor of 100 threads, against 15 ms on one thread).
"""

from __future__ import annotations

import threading
import time

from kindling.core.batch import timeout_error

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from kindling.core.batch import Outcome, Steps

LOOK_EVERY = 0.05
"""Seconds between the waiter's looks at the jobs' limits while some have not started yet
(a job that starts later may have the earliest limit): how late a job past its limit may
be recorded as timed out."""


class _Batch:
    """One batch's jobs, as the threads take them. ``lock`` guards ``next``, ``stopped``
    and ``left``; ``ended`` is notified when ``left`` reaches 0."""

    __slots__ = ("outcomes", "deadline", "next", "stopped", "left", "lock", "ended")

    def __init__(self, outcomes: list[Outcome], deadline: float | None):
        self.outcomes = outcomes
        self.deadline = deadline
        self.next = 0  # the index of the next job to take
        self.stopped = False  # the cutoff came: no job is taken any more
        self.left = len(outcomes)  # jobs taken or waiting that have not ended
        self.lock = threading.Lock()
        self.ended = threading.Condition(self.lock)


class Gang:
    """``size`` daemon threads (a job past its limit runs on; it must not hold up the
    process's exit) that run one batch at a time for a runner."""

    def __init__(self, runner: Steps, size: int):
        self.runner = runner
        self.size = size
        self._batch: _Batch | None = None
        self._round = 0
        self._wake = threading.Condition()
        self._threads: list[threading.Thread] = []

    def run(self, batch: _Batch) -> None:
        """Hand ``batch`` to the threads (made as needed); returns at once."""
        wanted = min(self.size, len(batch.outcomes))
        while len(self._threads) < wanted:
            thread = threading.Thread(target=self._work, name=f"kindling_{len(self._threads)}", daemon=True)
            self._threads.append(thread)
            thread.start()
        with self._wake:
            self._batch = batch
            self._round += 1
            self._wake.notify(wanted)

    def close(self) -> None:
        """End the threads once their jobs under way return; the runner makes new ones at
        its next threaded batch."""
        with self._wake:
            self._batch = None
            self._round += 1
            self._wake.notify_all()
        self._threads = []
        if self.runner.thread_pool is self:
            self.runner.thread_pool = None

    def _work(self) -> None:
        seen = 0
        while True:
            with self._wake:
                while self._round == seen:
                    self._wake.wait()
                seen, batch = self._round, self._batch
            if batch is None:  # closed
                return
            ran = False  # one lock round per job: the end of one job and the take of the next
            while True:
                with batch.lock:  # type: ignore[union-attr]
                    if ran:
                        batch.left -= 1  # type: ignore[union-attr]
                        if not batch.left:  # type: ignore[union-attr]
                            batch.ended.notify()  # type: ignore[union-attr]
                    if batch.stopped or batch.next >= len(batch.outcomes):  # type: ignore[union-attr]
                        break
                    o = batch.outcomes[batch.next]  # type: ignore[union-attr]
                    batch.next += 1  # type: ignore[union-attr]
                ran = True
                try:  # noqa: SIM105 - contextlib is one more import for this
                    self.runner.run_job(o, batch.deadline)  # type: ignore[union-attr]
                except BaseException:  # noqa: BLE001, S110 - a bug in kindling, not the job's failure:
                    pass  # the job is left without an outcome (the runner settles it), the thread lives on


def run_threaded(runner: Steps, outcomes: list[Outcome], deadline: float | None,
                 meanwhile: Callable[[], object] | None = None) -> None:
    """Run ``outcomes`` on the runner's threads (made at its first use, kept while warm) and
    wait until each has an outcome, its limit has passed, or it was handed back.
    ``meanwhile`` is called once the threads have the batch, before the wait (it must not
    raise): the waiter's thread is otherwise idle while the jobs run.

    The waiter is woken when the last job ends, and otherwise only when a limit or the
    invocation's cutoff may have come."""
    pool = runner.thread_pool
    if not isinstance(pool, Gang):
        pool = runner.thread_pool = Gang(runner, runner.threads)
    batch = _Batch(outcomes, deadline)
    pool.run(batch)
    if meanwhile is not None:
        meanwhile()
    stop_at = runner.budget.run_by(deadline)
    waiting = list(outcomes)
    while True:
        with batch.lock:
            if not batch.left:
                return
        now = time.monotonic()
        unstarted = False
        still = []
        for o in waiting:
            # A job's limit counts from its own start, never from when it was queued.
            if o.limit_at is not None and now >= o.limit_at and o.status is None:
                runner.finish_job(o, error=timeout_error(*o.limit))  # type: ignore[misc]
            if o.status is None:
                still.append(o)
                unstarted = unstarted or o.limit_at is None
        waiting = still
        if stop_at is not None and now >= stop_at:
            with batch.lock:
                batch.stopped = True
                never_taken = batch.outcomes[batch.next :]
                batch.next = len(batch.outcomes)
                batch.left -= len(never_taken)
            for o in never_taken:  # hand them back
                runner.defer_job(o)
            waiting = [o for o in waiting if o.status is None]
            unstarted = False  # a job taken but not started yet defers itself (Runner.start_job)
        if not waiting:  # every job has an outcome (threads past their limit run on)
            return
        wake = [o.limit_at for o in waiting if o.limit_at is not None]
        if stop_at is not None and now >= stop_at:
            if any(o.limit_at is None for o in waiting):
                wake.append(now + 0.01)  # taken, and deferring itself right now
        else:
            if stop_at is not None:
                wake.append(stop_at)
            if unstarted:
                wake.append(now + LOOK_EVERY)
        timeout = max(0.0, min(wake) - time.monotonic()) + 0.001 if wake else None
        with batch.lock:
            if batch.left:
                batch.ended.wait(timeout)
