"""Eager mode behaves as the workers do: a producer (installed with dispatch.set_producer)
that runs a job, its retries and everything it enqueues inline, so that by the time a
handle is returned every outcome is recorded and no wait ever blocks."""

import time
import types

import pytest
from kindling import chain, group
from kindling.core.errors import JobFailed
from kindling.core.registry import Registry
from kindling.producer import dispatch, handles
from kindling.tools.testing import eager


def registry_tasks(r: Registry) -> None:
    """This module's tasks, on the fresh registry the shared ``reg`` fixture gives each test."""

    @r.task(name="add")
    def add(a, b=0):
        r.runs.append("add")
        return a + b

    @r.task(name="total")
    def total(results):
        r.runs.append("total")
        return sum(results)

    @r.task(name="boom")  # the default 3 attempts, as most tasks have
    def boom(*args):
        r.runs.append("boom")
        raise RuntimeError("step failed")

    @r.task(name="flaky")
    def flaky(x):
        from kindling import current_job

        r.runs.append("flaky")
        if current_job().attempt < 3:
            raise RuntimeError("not yet")
        return x


@pytest.fixture
def no_waiting(monkeypatch):
    """Any sleep is a wait that blocked: in eager mode everything has already run."""

    def sleep(seconds):
        raise AssertionError(f"a handle waited ({seconds}s) for an outcome eager mode had already recorded")

    # The handles' own name for the clock: patching the time module itself would hand the fake
    # to any module that does `from time import sleep` while it is in place.
    monkeypatch.setattr(handles, "time", types.SimpleNamespace(monotonic=time.monotonic, sleep=sleep))


def test_a_failing_chain_step_raises_job_failed_at_once_and_later_steps_never_run(reg, no_waiting):
    with eager() as jobs:
        handle = chain(reg.get("add").s(1), reg.get("boom").s(), reg.get("add").s(2)).delay()
        with pytest.raises(JobFailed, match="dead.*step failed"):
            handle.result(timeout=30)
        assert handle.status() == "dead"
        assert handle.ids[2] not in jobs.records
    assert reg.runs == ["add", "boom", "boom", "boom"]  # every attempt the workers would make


def test_a_failing_chord_member_raises_job_failed_at_once(reg, no_waiting):
    add, boom, total = reg.get("add"), reg.get("boom"), reg.get("total")
    with eager() as jobs:
        handle = group([add.s(1), boom.s(), add.s(3)]).then(total.s()).delay()
        assert handle.status() == "dead"
        with pytest.raises(JobFailed, match="member 1"):
            handle.result(timeout=30)
        assert handle.callback_id not in jobs.records


def test_a_failing_job_runs_every_attempt_and_ends_dead_as_on_the_workers(reg, no_waiting):
    with eager() as jobs:
        failing = reg.get("boom").delay()
        assert failing.status() == "dead" and jobs.records[failing.id]["attempts"] == 3
        with pytest.raises(JobFailed, match="step failed"):
            failing.result()
        assert reg.get("flaky").delay(7).result() == 7  # succeeds on its third attempt
    assert reg.runs.count("flaky") == 3


def test_eager_mode_is_the_producer_it_installs_and_restores(reg):
    before = dispatch.set_producer(None)
    try:
        with eager() as jobs:
            assert dispatch.producer() is jobs
            with eager() as inner:
                assert dispatch.producer() is inner
            assert dispatch.producer() is jobs
        assert not hasattr(dispatch, "_eager")  # no switch besides the producer slot
    finally:
        dispatch.set_producer(before)


def test_kindling_eager_installs_the_eager_producer_for_the_process(reg, monkeypatch, no_waiting):
    from kindling.tools.testing import Eager

    monkeypatch.setenv("KINDLING_EAGER", "1")
    before = dispatch.set_producer(None)
    try:
        assert isinstance(dispatch.producer(), Eager)
        handle = chain(reg.get("add").s(1), reg.get("boom").s()).delay()
        with pytest.raises(JobFailed, match="dead"):
            handle.result()
    finally:
        dispatch.set_producer(before)
