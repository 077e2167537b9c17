"""Rate limits per task across every worker: runs are taken from one count per task and window
in the result store (one round trip per rate-limited task per batch); jobs over the limit are
handed back unrun, using no attempt, and come back spread over the next windows."""

from __future__ import annotations

import time

import pytest
from kindling.core.envelope import encode_job, new_job
from kindling.core.errors import TaskDefinitionError
from kindling.core.ratelimit import parse
from kindling.core.registry import Registry
from kindling.engine.runner import Delivery, Runner
from kindling.stores.memory import MemoryResultStore
from kindling.tools.testing import eager


@pytest.mark.parametrize(("spec", "limit", "window_ms"), [
    ("10/s", 10, 1000), ("100/m", 5, 3000), ("7/m", 7, 60_000), ("1000/h", 5, 18_000), (5, 5, 1000),
    ("1/h", 1, 3_600_000),
])
def test_a_limit_is_held_as_its_share_per_window(spec, limit, window_ms):
    rate = parse(spec)
    assert (rate.limit, rate.window_ms) == (limit, window_ms)


@pytest.mark.parametrize("spec", ["0/s", "10/d", "ten/m", "-1/s", "", True])
def test_a_limit_that_does_not_read_is_refused_at_import(spec):
    with pytest.raises(TaskDefinitionError, match="rate_limit"):
        Registry().task(name="t", rate_limit=spec)(lambda: None)


def registry_tasks(r: Registry) -> None:
    """This module's tasks, on the fresh registry the shared ``reg`` fixture gives each test."""

    @r.task(name="rated", rate_limit="1/h")
    def rated(n):
        r.runs.append(n)

    @r.task(name="plain")
    def plain(n):
        r.runs.append(("plain", n))


def _batch(task, n, start=0):
    return [Delivery(f"m{i}", encode_job(new_job(task, [i])), 1) for i in range(start, start + n)]


def test_jobs_over_the_limit_are_handed_back_unrun_with_no_attempt_in_one_round_trip(reg):
    store = MemoryResultStore()
    runner = Runner(reg, store, log=None, metrics=False)
    outcomes = runner.run(_batch("rated", 3) + _batch("plain", 2, start=10))
    assert [o.status for o in outcomes] == ["succeeded", "deferred", "deferred", "succeeded", "succeeded"]
    assert reg.runs == [0, ("plain", 10), ("plain", 11)]
    assert store.takes == 1
    deferred = [o for o in outcomes if o.status == "deferred"]
    assert all(0 < o.retry_in <= 7200 for o in deferred)  # the next window, plus part of one
    assert "rate limit (1/h)" in deferred[0].reason
    assert not {o.job_id for o in deferred} & set(store.records)  # nothing recorded: no attempt

    again = runner.run(_batch("rated", 1, start=5))  # the same window, another batch (or worker)
    assert [o.status for o in again] == ["deferred"] and reg.runs == [0, ("plain", 10), ("plain", 11)]


def test_a_batch_without_rate_limited_tasks_makes_no_extra_round_trip(reg):
    store = MemoryResultStore()
    Runner(reg, store, log=None, metrics=False).run(_batch("plain", 3))
    assert store.takes == 0


def test_eager_mode_runs_every_job_as_celerys_eager_mode_does(reg):
    with eager():
        handles = [reg.get("rated").delay(i) for i in range(3)]
        assert [h.status() for h in handles] == ["succeeded"] * 3


def _fifo(task, group, n):
    return Delivery(f"m-{group}-{n}", encode_job(new_job(task, [n])), 1, group=group)


def test_in_a_fifo_batch_a_run_is_taken_only_for_a_job_that_will_run(reg):
    """Group A's first job fails, so its rate-limited second job is handed back unrun: it
    takes no run from the window, and group B's rate-limited job gets it and runs."""
    @reg.task(name="boom")
    def boom(n):
        raise RuntimeError("no")

    store = MemoryResultStore()
    outcomes = Runner(reg, store, log=None, metrics=False, retry_delay=1).run(
        [_fifo("boom", "A", 0), _fifo("rated", "A", 1), _fifo("rated", "B", 2)])
    assert [o.status for o in outcomes] == ["failed", "deferred", "succeeded"]
    assert "FIFO group 'A'" in outcomes[1].reason
    assert reg.runs == [2]
    (count,) = [r for key, r in store.records.items() if key.startswith("rate#rated#")]
    assert count["taken"] == 1  # B's run, and no other


def test_a_run_taken_for_a_job_that_never_started_is_given_back(reg):
    """A rate-limited job cut off by the invocation's time is handed back unrun: the run it
    was granted goes back to the window, where the next delivery finds it."""
    @reg.task(name="slow")
    def slow(n):
        time.sleep(0.25)

    store = MemoryResultStore()
    runner = Runner(reg, store, log=None, metrics=False, safety_ms=100, cutoff_ms=200)
    outcomes = runner.run(_batch("slow", 1) + _batch("rated", 1, start=1), remaining_ms=lambda: 500)
    assert outcomes[1].status == "deferred" and "remaining time" in outcomes[1].reason and reg.runs == []
    (count,) = [r for key, r in store.records.items() if key.startswith("rate#rated#")]
    assert count["taken"] == 0
    assert [o.status for o in runner.run(_batch("rated", 1, start=1))] == ["succeeded"]  # the same window
