"""Where ``task.delay()`` and ``task.apply_async()`` send jobs: the producer slot.

By default a task's handle sends through a :class:`kindling.producer.client.Client` built from the
environment (``KINDLING_QUEUE_URL``, ``KINDLING_QUEUES``, ``KINDLING_TABLE``) at the first
call; it routes a job to its named queue (:mod:`kindling.core.routing`). Point it
elsewhere once, at start-up::

    import kindling.producer.dispatch
    kindling.producer.dispatch.set_producer(StreamProducer("redis://127.0.0.1:6390/0"))

Any object with ``send(call)`` (or ``enqueue_many([call])``) is a producer.

Eager mode runs a job inline instead, through the same runner the worker uses, and keeps
its outcome in a memory store: application tests need no queue, no table and no moto::

    from kindling.tools.testing import eager

    with eager() as jobs:
        handle = resize.delay("a.png", width=64)
        assert handle.result() == "thumbs/a.png"
        assert jobs.records[handle.id]["status"] == "succeeded"

Eager mode is a producer like any other (:class:`kindling.tools.testing.Eager`), installed with
:func:`set_producer` by ``with eager():``; ``KINDLING_EAGER=1`` puts one in front of any
other producer for a whole process (a test run). Queue names are not resolved: every job runs inline wherever
it is routed. A failing job runs every attempt the workers would give it, at once (no
retry delay), so it ends ``dead`` as on the workers and its handle's ``result()`` raises
:class:`~kindling.core.errors.JobFailed` with the recorded error.

Never imported by the worker: only by code that enqueues.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kindling.core.envelope import Call
    from kindling.core.registry import Registry

__all__ = ["asend", "installed", "producer", "reader", "send", "send_many", "set_producer"]

_producer = None


def set_producer(producer):
    """Send every task handle's jobs through ``producer`` (``None``: back to the default);
    returns the one it replaces, to put back later (as :func:`kindling.tools.testing.eager` does)."""
    global _producer
    previous, _producer = _producer, producer
    return previous


def installed():
    """The producer set with :func:`set_producer`, or ``None`` (none is made here)."""
    return _producer


def producer():
    """The producer task handles send through: the one set, else a ``Client`` from the
    environment (made at the first call). Under ``KINDLING_EAGER=1`` it is eager mode's
    unless the one set runs jobs inline itself (a ``with eager():`` block's)."""
    global _producer
    if os.environ.get("KINDLING_EAGER") == "1" and not getattr(_producer, "runs_inline", False):
        # A whole test run is eager, whatever producer the application set at start-up.
        from kindling.tools.testing import current_eager

        return current_eager()
    if _producer is None:
        from kindling.producer.client import Client  # boto3 only for programs that enqueue

        _producer = Client()
    return _producer


def send(call: Call, registry: Registry | None = None):
    """Send one call through :func:`producer`; return its handle. (``registry`` is not
    needed: a producer finds the task by the call's, or by name in the default registry.)"""
    target = producer()
    send_one = getattr(target, "send", None)
    return send_one(call) if send_one is not None else target.enqueue_many([call])[0]


async def asend(call: Call):
    """``await`` one call through :func:`producer`: its ``asend`` when it has one (a
    ``Client``, a ``StreamProducer``: batched with concurrent awaits), else its ``send`` in a
    thread (eager mode, a producer of your own), so the event loop is never blocked."""
    target = producer()
    send_async = getattr(target, "asend", None)
    if send_async is not None:
        return await send_async(call)
    import asyncio

    return await asyncio.to_thread(send, call)


def send_many(calls: list[Call], registry: Registry | None = None) -> list:
    """Send several calls at once (a group's members), in the producer's batches
    (``enqueue_many``) when it has them."""
    target = producer()
    many = getattr(target, "enqueue_many", None)
    return many(calls) if many is not None else [target.send(call) for call in calls]


def reader():
    """Where canvas handles read outcomes (:mod:`kindling.producer.handles`): the producer's
    ``reader`` if it names one (a ``StreamProducer``), else the producer itself if it reads
    outcomes (a ``Client``, eager mode); else ``None``."""
    target = producer()
    named = getattr(target, "reader", None)
    if named is not None:
        return named
    return target if hasattr(target, "record") else None
