"""Handles of sent jobs, chains and chords, and the one wait they all share.

Every producer returns one: :class:`kindling.producer.client.Client` (SQS) and
:class:`kindling.valkey.StreamProducer` a :class:`JobHandle` (the stream's is a ``Sent``),
eager mode (:mod:`kindling.tools.testing`) an ``EagerHandle``; :mod:`kindling.producer.canvas` a
:class:`ChainHandle` or :class:`GroupHandle`. A handle reads outcomes through its
``reader``, anything with ``record(job_id) -> dict | None``:

* a :class:`kindling.producer.client.Client` or :class:`kindling.stores.dynamo.DynamoResultStore`
  (the results table), a :class:`kindling.valkey.ValkeyResultStore`, or an eager session;
* ``reader.revoke(job_id, task=...)``, where it has one, is what ``handle.revoke()`` calls;
* ``reader.s3`` reads a result the worker kept in S3 (else the process's S3 client does);
* ``reader.settled`` (eager mode): every job sent has already run to its end, so a wait
  reads the final state at once instead of polling for one that cannot change.

:func:`wait` is the one poll: 20 ms, doubling to 1 s, until the deadline.
"""

from __future__ import annotations

import time

from kindling.core.errors import JobFailed, KindlingError, ResultNotRecorded
from kindling.core.status import COMPLETED, DEAD, FAILED, FINAL, SUCCEEDED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["ChainHandle", "GroupHandle", "JobHandle", "NoReader", "PENDING", "job_result", "wait", "wait_result"]

FIRST_DELAY_S = 0.02
MAX_DELAY_S = 1.0


class _Pending:
    def __repr__(self) -> str:
        return "PENDING"


PENDING: Any = _Pending()
"""What a :func:`wait` step returns while the outcome it waits for is not recorded yet."""


def wait(step: Callable[[bool], Any], deadline: float, *, settled: bool = False) -> Any:
    """Call ``step(last)`` until it returns something other than :data:`PENDING`, sleeping
    20 ms, doubling to 1 s, in between; return that.

    ``last`` is true on the final call (the deadline has passed, or ``settled``: nothing
    more will be recorded), on which ``step`` must return or raise, never :data:`PENDING`.
    """
    delay = FIRST_DELAY_S
    while True:
        last = settled or time.monotonic() >= deadline
        value = step(last)
        if value is not PENDING:
            return value
        if last:
            raise AssertionError("a wait's last step returned PENDING")  # a bug in the step
        time.sleep(max(0.0, min(delay, deadline - time.monotonic())))
        delay = min(delay * 2, MAX_DELAY_S)


def job_result(reader, job_id: str, deadline: float, timeout: float, task: str | None = None) -> Any:
    """Wait for ``job_id``'s final outcome and return its result.

    A ``failed`` job is waited through (it will be retried). Raises :class:`JobFailed` for a
    ``dead``, ``rejected`` or ``revoked`` job, or for one still ``failed`` at the deadline
    (with that attempt's error), and ``TimeoutError`` if no outcome was recorded in time.
    A job of a ``task`` whose results policy records no success (:func:`unrecorded`) with
    no record yet raises :class:`ResultNotRecorded` at once: no wait could see its success.
    """
    reader = require(reader)
    unkept = unrecorded(task)

    def step(last: bool) -> Any:
        record = reader.record(job_id)
        status = record["status"] if record else None
        if status == SUCCEEDED:
            return result_of(reader, record)  # type: ignore[arg-type]
        if status in FINAL or (last and status == FAILED):
            raise JobFailed(job_id, status, record.get("error"))  # type: ignore[union-attr,arg-type]
        if status is None and unkept is not None:
            raise ResultNotRecorded(job_id, task, unkept)  # type: ignore[arg-type]
        if last:
            raise TimeoutError(_no_outcome(reader, f"job {job_id}", timeout))
        return PENDING

    return wait(step, deadline, settled=_settled(reader))


def wait_result(reader, job_id: str, timeout: float = 30.0, task: str | None = None, model: Any = None) -> Any:
    """:func:`job_result` with ``timeout`` seconds from now; validated as ``model`` (a
    pydantic model, or a type pydantic validates) if one is given (:mod:`kindling.core.models`)."""
    value = job_result(reader, job_id, time.monotonic() + timeout, timeout, task)
    if model is None:
        return value
    from kindling.core.models import as_model

    return as_model(model, value)


def unrecorded(task: str | None) -> str | None:
    """The results policy (``"failures"`` or ``"none"``) under which ``task``'s successes
    leave no record, as this process knows it: the task's own ``results=`` where it is
    registered here, else the deployment's (``KINDLING_RESULTS_POLICY``); ``None`` when
    successes are recorded (or the task is not known)."""
    if task is None:
        return None
    from kindling.core.policy import RESULTS_ALL, configured_results
    from kindling.core.registry import default_registry

    found = default_registry.find(task)
    results = (found.results if found is not None else None) or configured_results()
    return None if results == RESULTS_ALL else results


def result_of(reader, record: dict) -> Any:
    """A ``succeeded`` record's result, read from S3 if the worker kept it there."""
    from kindling.core import codec

    if "result_payload" in record:  # too large for its record: kept in S3 by the worker
        from kindling.shared.payloads import read_result

        s3 = getattr(reader, "s3", None)
        if s3 is None:  # a store's reader: the process's S3 client, as the worker's runner has
            from kindling.drivers.aws import s3 as aws_s3

            s3 = aws_s3.client()
        return codec.loads(read_result(s3, record))
    raw = record.get("result")
    return codec.loads(raw) if raw is not None else None


class NoReader:
    """A handle's reader when its producer has none: every read says what to configure."""

    __slots__ = ("why",)

    def __init__(self, why: str):
        self.why = why

    def record(self, job_id: str) -> dict | None:
        raise KindlingError(self.why)

    def revoke(self, job_id: str, *, task: str | None = None) -> None:
        raise KindlingError(self.why)

    def __repr__(self) -> str:
        return f"NoReader({self.why!r})"


_NO_READER = ("this handle cannot read outcomes: its producer has no results table "
              "(set handle.reader = Client(table=...), or ValkeyResultStore(url) for results kept in Valkey)")


def require(reader):
    """``reader``, or a :class:`KindlingError` saying what to configure if it cannot read."""
    if reader is None or not hasattr(reader, "record"):
        raise KindlingError(_NO_READER)
    if isinstance(reader, NoReader):
        raise KindlingError(reader.why)
    return reader


def _settled(reader) -> bool:
    return bool(getattr(reader, "settled", False))


def _no_outcome(reader, what: str, timeout: float) -> str:
    if _settled(reader):
        return f"{what}: no outcome recorded, and nothing is left to run (eager mode)"
    return f"{what}: no outcome recorded within {timeout}s"


class JobHandle:
    """A sent job: its ``id`` and ``task``, and its outcome read through ``reader``."""

    __slots__ = ("id", "task", "reader")

    def __init__(self, id: str, task: str, reader=None):
        self.id, self.task, self.reader = id, task, reader

    def __class_getitem__(cls, item):
        """``JobHandle[str]``, as annotations name a handle of a task returning ``str``
        (handles.pyi), is the class itself at run time: no typing module is loaded."""
        return cls

    @property
    def client(self):
        """The reader, under the name an SQS client's handle has always given it."""
        return self.reader

    def record(self) -> dict | None:
        """The job's result record as stored, or ``None`` while none is recorded."""
        return require(self.reader).record(self.id)

    def status(self) -> str | None:
        """``succeeded``, ``failed`` (will be retried), ``dead``, ``rejected``, ``revoked``,
        ``scheduled`` (received before its delay was over: not run yet), or ``None`` while no
        worker has recorded an outcome (queued or running)."""
        record = self.record()
        return record["status"] if record else None

    def result(self, timeout: float = 30.0, *, model: Any = None) -> Any:
        """Wait up to ``timeout`` seconds for the final outcome (:func:`job_result`); with
        ``model`` (a pydantic model), the result validated as one."""
        return wait_result(self.reader, self.id, timeout, self.task, model)

    def revoke(self) -> None:
        """Record the job ``revoked``, so no worker starts it from now on (a run already under
        way is not stopped: see :func:`kindling.core.records.revoked_record`)."""
        reader = require(self.reader)
        revoke = getattr(reader, "revoke", None)
        if revoke is None:
            raise KindlingError(f"this handle's reader ({type(reader).__name__}) cannot revoke jobs")
        revoke(self.id, task=self.task)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id!r}, {self.task!r})"


class ChainHandle:
    """A sent chain: ``ids`` of every step (known in advance), ``result()`` of the last."""

    __slots__ = ("ids", "reader", "tasks")

    def __init__(self, ids: list[str], reader=None, tasks: list[str] | None = None):
        self.ids, self.reader, self.tasks = ids, reader, tasks or [None] * len(ids)

    @property
    def id(self) -> str:
        return self.ids[0]

    def status(self) -> str | None:
        """The status of the first step not succeeded yet (the last one's once all have)."""
        reader = require(self.reader)
        for job_id in self.ids:
            record = reader.record(job_id)
            if record is None or record["status"] != SUCCEEDED:
                return record["status"] if record else None
        return SUCCEEDED

    def result(self, timeout: float = 30.0) -> Any:
        """Wait for every step in turn and return the last one's result; :class:`JobFailed`
        names the first step that did not succeed."""
        deadline = time.monotonic() + timeout
        value = None
        for job_id, task in zip(self.ids, self.tasks, strict=True):
            value = job_result(self.reader, job_id, deadline, timeout, task)
        return value

    def __repr__(self) -> str:
        return f"ChainHandle({self.ids[0]!r}, steps={len(self.ids)})"


class GroupHandle:
    """A sent group or chord: its ``id``, ``member_ids``, and ``callback_id`` (or ``None``)."""

    __slots__ = ("id", "size", "has_callback", "reader")

    def __init__(self, id: str, size: int, has_callback: bool, reader=None):
        self.id, self.size, self.has_callback, self.reader = id, size, has_callback, reader

    @property
    def member_ids(self) -> list[str]:
        from kindling.core.envelope import member_id

        return [member_id(self.id, i) for i in range(self.size)]

    @property
    def callback_id(self) -> str | None:
        from kindling.core.envelope import callback_id

        return callback_id(self.id) if self.has_callback else None

    def record(self) -> dict | None:
        """The chord's record: ``status`` (``waiting``, ``completed`` or ``dead``), ``done``
        and ``dead`` member indexes, ``error`` naming the first member that died."""
        from kindling.core.records import chord_key

        return require(self.reader).record(chord_key(self.id))

    def status(self) -> str | None:
        if not self.size:  # an empty group has no chord record: it completed when it was sent
            return COMPLETED
        record = self.record()
        return record.get("status") if record else None

    def result(self, timeout: float = 30.0) -> Any:
        """The callback's result, or (a group without one) the members' results in order.
        Raises :class:`JobFailed` as soon as the chord is recorded ``dead``."""
        if not self.size and not self.has_callback:
            return []
        reader = require(self.reader)
        deadline = time.monotonic() + timeout
        if not self.size:  # the callback was sent at once, with []
            return job_result(reader, self.callback_id, deadline, timeout)  # type: ignore[arg-type]

        def step(last: bool) -> Any:
            record = self.record()
            status = record.get("status") if record else None
            if status == DEAD:
                raise JobFailed(self.id, DEAD, record.get("error"))  # type: ignore[union-attr]
            if status == COMPLETED:
                if not self.has_callback:
                    return [job_result(reader, i, deadline, timeout) for i in self.member_ids]
                return job_result(reader, self.callback_id, deadline, timeout)  # type: ignore[arg-type]
            if last:
                raise TimeoutError(_no_outcome(reader, f"chord {self.id}", timeout).replace(
                    "no outcome recorded", "not completed"))
            return PENDING

        return wait(step, deadline, settled=_settled(reader))

    def __repr__(self) -> str:
        return f"GroupHandle({self.id!r}, members={self.size}, callback={self.has_callback})"
