"""The task registry most runner and producer tests share: each task notes its runs.

``reg.runs`` lists ``(task name, *arguments)`` for every run, in order, so a test asserts
what ran (``[("add", 1, 2)]``) or that nothing did (``[]``). A module adds its own tasks
to the registry it gets.
"""

from __future__ import annotations

import time

from kindling import current_job
from kindling.core.batch import Delivery
from kindling.core.envelope import encode_job, new_job
from kindling.core.registry import Registry


def recording_registry() -> Registry:
    """``add(a, b)``, ``total(results, extra=0)``, ``boom()`` (ValueError "kaboom"),
    ``nap(ms)`` (sleeps, returns ``ms``) and ``attempt()`` (the attempt it runs as)."""
    reg = Registry()
    reg.runs = []

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

    return reg


def delivery(task: str, *args, ref: str | None = None, attempts: int = 1, **options) -> Delivery:
    """One message carrying a new job of ``task``, as a trigger hands it to the runner."""
    job = new_job(task, args, **options)
    return Delivery(ref or job.id, encode_job(job).decode(), attempts)


def statuses(outcomes) -> list[str]:
    return [str(o.status) for o in outcomes]
