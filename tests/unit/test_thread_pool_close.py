"""A runner's job threads end when its pool is closed: a test path or a tool that makes
runners one after another leaves no threads behind, and a runner closed this way makes new
threads at its next threaded batch."""

from __future__ import annotations

import threading

from kindling.engine.runner import Runner
from kindling.stores.results import MemoryResultStore
from support.tasks import delivery


def job_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("kindling_") and t.is_alive()]


def test_closing_the_thread_pool_ends_its_threads_and_the_next_batch_makes_new_ones(reg):
    before = set(job_threads())
    runner = Runner(reg, MemoryResultStore(), threads=3, log=None, metrics=False)
    assert [str(o.status) for o in runner.run([delivery("add", i, 1) for i in range(3)])] == ["succeeded"] * 3
    made = set(job_threads()) - before
    assert len(made) == 3

    runner.thread_pool.close()
    for thread in made:
        thread.join(timeout=5)
    assert [t for t in made if t.is_alive()] == []
    assert runner.thread_pool is None

    assert [str(o.status) for o in runner.run([delivery("add", i, 1) for i in range(2)])] == ["succeeded"] * 2
    again = set(job_threads()) - before
    assert len(again) == 2 and not again & made
    runner.thread_pool.close()
