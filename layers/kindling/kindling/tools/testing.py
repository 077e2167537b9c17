"""Eager mode: a producer that runs jobs inline through the worker's runner, outcomes in a
memory store.

:func:`eager` installs an :class:`Eager` with :func:`kindling.producer.dispatch.set_producer` for a
``with`` block; ``KINDLING_EAGER=1`` puts one in front of any producer for the whole process.
It behaves as the workers do, only at once:

* a job runs every attempt its worker would give it (no retry delay is waited), so a job
  that keeps failing ends ``dead``, not ``failed``;
* whatever a run enqueues (a chain's next step, a chord's callback) runs before the send
  returns, so every outcome is recorded by then, and a handle's wait never blocks: it reads
  the final state at once (``Eager.settled``, :mod:`kindling.producer.handles`).
"""

from __future__ import annotations

from collections.abc import Coroutine
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar, overload

from kindling.core.envelope import encode_job, new_job
from kindling.core.status import FAILED
from kindling.engine.runner import Delivery, Runner
from kindling.producer import dispatch
from kindling.producer.handles import JobHandle
from kindling.stores.memory import MemoryResultStore

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from kindling.core.envelope import Call
    from kindling.core.registry import Registry, Task

__all__ = ["Eager", "EagerHandle", "current_eager", "eager"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

MAX_DELIVERIES = 1000
"""A bound on one job's runs, against a bug looping forever: the runner ends a failing job
``dead`` on its last allowed attempt long before."""


class EagerHandle(JobHandle[R]):  # generic in its task's return type (handles.pyi)
    """A job run inline: read (and revoked) through its eager session, as a sent job's handle is."""

    __slots__ = ()

    @property
    def record(self) -> dict | None:  # type: ignore[override]
        """The job's record as the session holds it now."""
        return self.reader.record(self.id)

    def status(self) -> str | None:
        record = self.record
        return record["status"] if record else None

    def __repr__(self) -> str:
        return f"EagerHandle({self.id!r}, {self.task!r}, {self.status()!r})"


class Eager:
    """The eager producer, and what :func:`eager` yields: the memory store its jobs are
    recorded in (``store``, and its ``records`` by job id)."""

    runs_inline = True  # kindling.producer.dispatch: KINDLING_EAGER=1 leaves it in place
    settled = True  # kindling.producer.handles: whatever was sent has run to its end; waits read at once

    def __init__(self) -> None:
        self.store = MemoryResultStore()
        self.store.unlimited = True  # rate limits are not waited for: every job runs at once
        self.records = self.store.records
        self._runners: dict[int, Runner] = {}

    # -- a producer ------------------------------------------------------------------

    def send(self, call: Call) -> EagerHandle:
        """Run the call's job inline, as :meth:`run` does, with the registry its task is in."""
        return self.run(call, _registry_of(call))

    def enqueue_many(self, calls: Iterable[Call | tuple]) -> list[EagerHandle]:
        from kindling.core.envelope import Call

        return [self.send(c if isinstance(c, Call) else Call(*c)) for c in calls]

    # A Task's handle gives what the task returns (an async task's: what its coroutine
    # returns), and its arguments are checked against the function's; a name's gives Any.
    @overload
    def enqueue(self, task: Task[P, Coroutine[Any, Any, T]], /, *args: P.args,
                **kwargs: P.kwargs) -> EagerHandle[T]: ...
    @overload
    def enqueue(self, task: Task[P, R], /, *args: P.args, **kwargs: P.kwargs) -> EagerHandle[R]: ...
    @overload
    def enqueue(self, task: str, /, *args: Any, **kwargs: Any) -> EagerHandle[Any]: ...
    def enqueue(self, task, /, *args, **kwargs) -> EagerHandle[Any]:
        from kindling.core.envelope import Call

        return self.send(Call(task, args, kwargs))

    def run(self, call: Call, registry: Registry) -> EagerHandle:
        """Run the call's job inline, with its retries, then whatever it enqueues (a chain's
        next step, a chord's callback), in order, before returning its handle."""
        from kindling.core.registry import Task

        name = call.task.name if isinstance(call.task, Task) else call.task
        # Built and encoded as a producer would: arguments JSON cannot hold fail here too.
        job = new_job(name, call.args, call.kwargs, job_id=call.job_id, max_attempts=call.max_attempts,
                      timeout=call.timeout, chain=call.chain, parent=call.parent)
        runner = self._runner(registry)
        pending = [job]
        while pending:
            next_job = pending.pop(0)
            body = encode_job(next_job).decode()
            # Delivered again while it fails, as its queue would once the retry delay is over.
            for delivery in range(1, MAX_DELIVERIES + 1):
                outcome = runner.run([Delivery(f"eager-{next_job.id}", body, delivery)], send=pending.extend)[0]
                if outcome.status != FAILED:
                    break
        return EagerHandle(job.id, name, self)

    # -- a reader (kindling.producer.handles) -------------------------------------------------

    def record(self, job_id: str) -> dict | None:
        """The record of ``job_id`` (or of a chord, ``chord#<id>``), as handles read it."""
        return self.records.get(job_id)

    def revoke(self, job_id: str, *, task: str | None = None) -> None:
        """Record the job ``revoked`` (as :meth:`kindling.producer.client.Client.revoke` does)."""
        from kindling.core.records import revoke

        revoke(self.store, job_id, task=task)

    def _runner(self, registry: Registry) -> Runner:
        runner = self._runners.get(id(registry))
        if runner is None:
            runner = self._runners[id(registry)] = Runner(registry, self.store, log=None, metrics=False,
                                                                     payload_bucket="")  # no S3 in tests
        return runner


def _registry_of(call: Call) -> Registry:
    from kindling.core.registry import Task, default_registry

    return (call.task.registry if isinstance(call.task, Task) else None) or default_registry


_process_eager: Eager | None = None


def current_eager() -> Eager:
    """The eager producer in use: a ``with eager():`` block's, else the process's (one per
    process, under ``KINDLING_EAGER=1``)."""
    global _process_eager
    installed = dispatch.installed()
    if isinstance(installed, Eager):
        return installed
    if _process_eager is None:
        _process_eager = Eager()
    return _process_eager


@contextmanager
def eager() -> Iterator[Eager]:
    """Run every job sent through a task handle inline, for the ``with`` block."""
    session = Eager()
    previous = dispatch.set_producer(session)
    try:
        yield session
    finally:
        dispatch.set_producer(previous)
