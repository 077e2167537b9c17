"""The tasks most runner and producer tests share: each task notes its runs.

``reg.runs`` lists ``(task name, *arguments)`` for every run, in order, so a test asserts
what ran (``[("add", 1, 2)]``) or that nothing did (``[]``). The ``reg`` fixture
(support.fixtures) gives each test a fresh registry of these tasks, or of the ones its
module declares instead.
"""

from __future__ import annotations

import time

from kindling import current_job
from kindling.core.batch import Delivery
from kindling.core.envelope import encode_job, new_job
from kindling.core.registry import Registry


def recording_registry() -> Registry:
    """A fresh registry of :func:`recording_tasks`, its runs in ``reg.runs``."""
    reg = Registry()
    reg.runs = []
    recording_tasks(reg)
    return reg


def recording_tasks(reg: Registry) -> None:
    """``add(a, b)``, ``total(results, extra=0)``, ``boom()`` (ValueError "kaboom"),
    ``nap(ms)`` (sleeps, returns ``ms``) and ``attempt()`` (the attempt it runs as), each
    noting its run in ``reg.runs``."""

    @reg.task(name="add")
    def add(a, b):
        reg.runs.append(("add", a, b))
        return a + b

    @reg.task(name="total")
    def total(results, extra=0):
        reg.runs.append(("total", results, extra))
        return sum(results) + extra

    @reg.task(name="boom")
    def boom():
        raise ValueError("kaboom")

    @reg.task(name="nap")
    def nap(ms):
        reg.runs.append(("nap", ms))
        time.sleep(ms / 1000)
        return ms

    @reg.task(name="attempt")
    def attempt():
        return current_job().attempt


def delivery(task: str, *args, ref: str | None = None, attempts: int = 1, trace: str | None = None,
             group: str | None = None, signature: str | None = None, receipt: str | None = None,
             queue_arn: str | None = None, enqueued_at: int | None = None, **options) -> Delivery:
    """One message carrying a new job of ``task`` (``options`` go to ``new_job``: ``job_id``,
    ``parent`` ...), as a trigger hands it to the runner: its ref (the job's id unless given),
    delivery count, trace header, FIFO group, signature, SQS receipt and queue."""
    job = new_job(task, args, **options)
    if enqueued_at is not None:
        job.enqueued_at = enqueued_at
    return Delivery(ref or job.id, encode_job(job).decode(), attempts, trace=trace, group=group,
                    signature=signature, receipt=receipt, queue_arn=queue_arn)


def statuses(outcomes) -> list[str]:
    return [str(o.status) for o in outcomes]
