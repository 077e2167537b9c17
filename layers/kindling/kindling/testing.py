"""Eager mode: jobs run inline through the worker's runner, outcomes in a memory store.

See :mod:`kindling.dispatch` for how handles reach it; use :func:`eager` in tests.
"""

from __future__ import annotations

from contextlib import contextmanager

from kindling import dispatch
from kindling.envelope import encode_job, new_job
from kindling.errors import JobFailed
from kindling.results import MemoryResultStore
from kindling.runner import Delivery, Runner
from kindling.status import SUCCEEDED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

    from kindling.client import Call
    from kindling.registry import Registry

__all__ = ["Eager", "EagerHandle", "eager"]


class EagerHandle:
    """A job run inline: its id and recorded outcome, read as a sent job's handle is."""

    __slots__ = ("id", "task", "record")

    def __init__(self, id: str, task: str, record: dict | None):
        self.id, self.task, self.record = id, task, record

    def status(self) -> str | None:
        return self.record["status"] if self.record else None

    def result(self, timeout: float = 0.0):
        """The task's return value; raises :class:`JobFailed` for any other outcome."""
        from kindling import codec

        record = self.record or {}
        if record.get("status") == SUCCEEDED:
            return codec.loads(record["result"])
        raise JobFailed(self.id, record.get("status") or "deferred", record.get("error"))

    def __repr__(self) -> str:
        return f"EagerHandle({self.id!r}, {self.task!r}, {self.status()!r})"


class Eager:
    """What :func:`eager` yields: the memory store its jobs were recorded in."""

    def __init__(self) -> None:
        self.store = MemoryResultStore()
        self.records = self.store.records
        self._runners: dict[int, Runner] = {}

    def run(self, call: Call, registry: Registry) -> EagerHandle:
        """Run the call's job inline, then whatever it enqueues (a chain's next step, a
        chord's callback), in order, before returning its handle."""
        from kindling.registry import Task

        name = call.task.name if isinstance(call.task, Task) else call.task
        # Built and encoded as a producer would: arguments JSON cannot hold fail here too.
        job = new_job(name, call.args, call.kwargs, job_id=call.job_id, max_attempts=call.max_attempts,
                      timeout=call.timeout, chain=call.chain, parent=call.parent)
        runner = self._runners.get(id(registry))
        if runner is None:
            runner = self._runners[id(registry)] = Runner(registry, self.store, log=None, metrics=False,
                                                                     payload_bucket="")  # no S3 in tests
        pending = [job]
        first = None
        while pending:
            next_job = pending.pop(0)
            outcome = runner.run([Delivery(f"eager-{next_job.id}", encode_job(next_job).decode(), 1)],
                                 send=pending.extend)[0]
            if first is None:
                first = outcome
        # What the store holds now (a duplicate of a succeeded job writes nothing new).
        key = first.record["id"] if first.record else job.id  # type: ignore[union-attr]
        return EagerHandle(job.id, name, self.records.get(key))

    def record(self, job_id: str) -> dict | None:
        """The record of ``job_id`` (or of a chord, ``chord#<id>``), as canvas handles read it."""
        return self.records.get(job_id)


_process_eager: Eager | None = None


def current_eager() -> Eager:
    """The active eager session (one per process under ``KINDLING_EAGER=1``)."""
    global _process_eager
    if dispatch._eager is not None:
        return dispatch._eager
    if _process_eager is None:
        _process_eager = Eager()
    return _process_eager


@contextmanager
def eager() -> Iterator[Eager]:
    """Run every job sent through a task handle inline, for the ``with`` block."""
    previous, dispatch._eager = dispatch._eager, Eager()
    try:
        yield dispatch._eager
    finally:
        dispatch._eager = previous
