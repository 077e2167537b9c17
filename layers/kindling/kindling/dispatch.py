"""Where ``task.delay()`` and ``task.apply_async()`` send jobs, and the eager switch.

By default a task's handle sends through a :class:`kindling.client.Client` built from the
environment (``KINDLING_QUEUE_URL``, ``KINDLING_QUEUES``, ``KINDLING_TABLE``) at the first
call; it routes a job to its named queue (:mod:`kindling.routing`). Point it
elsewhere once, at start-up::

    import kindling.dispatch
    kindling.dispatch.set_producer(StreamProducer("redis://127.0.0.1:6390/0"))

Any object with ``send(call)`` (or ``enqueue_many([call])``) is a producer.

Eager mode runs a job inline instead, through the same runner the worker uses, and keeps
its outcome in a memory store: application tests need no queue, no table and no moto::

    from kindling.testing import eager

    with eager() as jobs:
        handle = resize.delay("a.png", width=64)
        assert handle.result() == "thumbs/a.png"
        assert jobs.records[handle.id]["status"] == "succeeded"

``KINDLING_EAGER=1`` turns it on for a whole process (a test run). Queue names are not
resolved: every job runs inline wherever it is routed. A failing job is run
once, as its first attempt; its handle's ``result()`` raises
:class:`~kindling.errors.JobFailed` with the recorded error.

Never imported by the worker: only by code that enqueues.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kindling.client import Call
    from kindling.registry import Registry

__all__ = ["producer", "reader", "send", "send_many", "set_producer"]

_producer = None
_eager = None  # the active kindling.testing.Eager, if any


def set_producer(producer) -> None:
    """Send every task handle's jobs through ``producer`` (``None``: back to the default)."""
    global _producer
    _producer = producer


def producer():
    """The producer task handles send through (a ``Client`` from the environment by default)."""
    global _producer
    if _producer is None:
        from kindling.client import Client  # boto3 only for programs that enqueue

        _producer = Client()
    return _producer


def send(call: Call, registry: Registry):
    """Send one call: inline under eager mode, else through :func:`producer`."""
    if _eager is not None or os.environ.get("KINDLING_EAGER") == "1":
        from kindling.testing import current_eager

        return current_eager().run(call, registry)
    target = producer()
    send_one = getattr(target, "send", None)
    return send_one(call) if send_one is not None else target.enqueue_many([call])[0]


def send_many(calls: list[Call], registry: Registry) -> list:
    """Send several calls at once (a group's members): inline under eager mode, else in the
    producer's batches (``enqueue_many``) when it has them."""
    if _eager is not None or os.environ.get("KINDLING_EAGER") == "1":
        from kindling.testing import current_eager

        return [current_eager().run(call, registry) for call in calls]
    target = producer()
    many = getattr(target, "enqueue_many", None)
    return many(calls) if many is not None else [target.send(call) for call in calls]


def reader():
    """Where handles read outcomes (anything with ``record(job_id)``): the eager session's
    memory store, or the producer if it reads the results table (a ``Client``); else ``None``."""
    if _eager is not None or os.environ.get("KINDLING_EAGER") == "1":
        from kindling.testing import current_eager

        return current_eager()
    target = producer()
    return target if hasattr(target, "record") else None
