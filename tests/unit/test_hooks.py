"""Hooks (kindling.engine.hooks) through the runner: what they are called with, and that nothing a
hook does changes a job's outcome. Every trigger's calls: tests/conformance/test_hook_calls.py."""

import asyncio
import io
import sys
import threading
import time

import pytest
from kindling.core import codec
from kindling.core.envelope import encode_job, new_job
from kindling.core.errors import StoreUnavailable, TaskDefinitionError
from kindling.core.registry import Registry
from kindling.engine.runner import Delivery, Runner
from kindling.shared import logs
from kindling.stores.memory import MemoryResultStore


def deliver(name, *args, deliveries=1):
    job = new_job(name, list(args))
    return Delivery(f"m-{job.id}", encode_job(job).decode(), deliveries)


@pytest.fixture
def calls(reg):
    """The hook calls the module's registry noted: (hook, job id, task, attempt, max attempts, error)."""
    return reg.calls


def registry_tasks(r: Registry) -> None:
    """This module's tasks and hooks, on the fresh registry the shared ``reg`` fixture gives each test."""
    r.calls = calls = []

    @r.task(name="ok")
    def ok():
        return 1

    @r.task(name="boom", max_attempts=2)
    def boom():
        raise ValueError("no")

    for name in ("on_success", "on_failure", "on_dead"):
        getattr(r, name)(lambda job, error, name=name: calls.append((name, job.id, job.task, job.attempt,
                                                                      job.max_attempts, error)))


def test_each_hook_gets_the_jobs_context_and_its_error(reg, calls):
    store = MemoryResultStore()
    ok, boom = deliver("ok"), deliver("boom")
    runner = Runner(reg, store, log=None, metrics=False)
    first = runner.run([ok, boom])
    ok_id, boom_id = (o.job_id for o in first)
    assert calls[0] == ("on_success", ok_id, "ok", 1, 3, None)
    assert calls[1][:5] == ("on_failure", boom_id, "boom", 1, 2) and isinstance(calls[1][5], ValueError)
    assert calls[1][5] is first[1].error and calls[1][5].__traceback__ is not None  # Sentry reads the traceback
    calls.clear()
    runner.run([Delivery(boom.ref, boom.body, 2)])
    assert [c[:4] for c in calls] == [("on_failure", boom_id, "boom", 2), ("on_dead", boom_id, "boom", 2)]
    assert calls[0][5] is calls[1][5]


def test_a_hook_that_raises_is_logged_and_changes_nothing(calls):
    reg = Registry()

    def broken(job, error):
        raise RuntimeError("the hook's bug")

    reg.task(name="ok", on_success=broken)(lambda: 1)
    reg.on_success(lambda job, error: calls.append(job.id))
    buf = io.StringIO()
    store = MemoryResultStore()
    outcome = Runner(reg, store, log=logs.LogSink(buf), metrics=False).run([deliver("ok")])[0]
    assert outcome.status == "succeeded" and store.record(outcome.job_id)["status"] == "succeeded"
    assert calls == [outcome.job_id]  # the next hook still ran
    (line,) = [codec.loads(x) for x in buf.getvalue().splitlines() if "hook_failed" in x]
    assert line["level"] == "ERROR" and line["job_id"] == outcome.job_id and line["hook"].endswith("broken")
    assert line["error"] == "RuntimeError: the hook's bug" and line["status"] == "succeeded"


def test_a_hook_that_exits_changes_nothing_either(calls):
    reg = Registry()
    reg.task(name="ok", on_success=lambda job, error: sys.exit(3))(lambda: 1)
    outcome = Runner(reg, MemoryResultStore(), log=None, metrics=False).run([deliver("ok")])[0]
    assert outcome.status == "succeeded"


def test_an_outcome_the_store_refused_calls_no_hook(reg, calls):
    d = deliver("ok")

    class Refusing(MemoryResultStore):
        def begin_write(self, records, *, deadline=None):
            return lambda: {r["id"]: "succeeded" for r in records}

    outcome = Runner(reg, Refusing(), log=None, metrics=False).run([d])[0]
    assert outcome.status == "skipped" and calls == []


def test_a_batch_handed_back_calls_no_hook(reg, calls):
    class Down(MemoryResultStore):
        def begin_write(self, records, *, deadline=None):
            raise StoreUnavailable("down")

    outcomes = Runner(reg, Down(), log=None, metrics=False).run([deliver("ok"), deliver("boom")])
    assert [o.status for o in outcomes] == ["deferred", "deferred"] and calls == []


def test_a_job_dead_unrun_calls_on_dead_without_an_error(reg, calls):
    outcome = Runner(reg, MemoryResultStore(), max_deliveries=5, log=None, metrics=False).run(
        [deliver("ok", deliveries=5)])[0]
    assert outcome.status == "dead" and calls == [("on_dead", outcome.job_id, "ok", 1, 3, None)]


def test_a_duplicate_or_rejected_delivery_calls_no_hook(reg, calls):
    store = MemoryResultStore()
    runner = Runner(reg, store, log=None, metrics=False)
    d = deliver("ok")
    runner.run([d])
    calls.clear()
    assert runner.run([d])[0].status == "skipped"
    assert runner.run([Delivery("bad", "not json", 1)])[0].status == "rejected"
    assert calls == []


@pytest.mark.parametrize("option", ["on_success", "on_failure", "on_dead"])
def test_a_hook_must_be_callable(option):
    with pytest.raises(TaskDefinitionError, match=option):
        Registry().task(name="t", **{option: "sentry"})(lambda: 1)
    with pytest.raises(TaskDefinitionError, match=option):
        getattr(Registry(), option)("sentry")


@pytest.mark.parametrize("results", ["failures", "none"])
def test_a_success_the_results_policy_does_not_record_still_calls_on_success(results):
    """The results policy decides what is written, not what happened: the hook still hears of it."""
    from kindling.engine.runner import Runner
    from kindling.stores.results import MemoryResultStore
    from support.tasks import delivery

    reg, seen = Registry(), []

    @reg.task(name="quiet", results=results, on_success=lambda job, error: seen.append(job.id))
    def quiet():
        return 1

    store = MemoryResultStore()
    d = delivery("quiet")
    [o] = Runner(reg, store, log=None, metrics=False).run([d])
    assert str(o.status) == "succeeded" and store.records == {}
    assert seen == [d.ref]


class HookInterrupt(BaseException):
    """Derived from BaseException alone, as a framework's own interrupt may be."""


@pytest.mark.parametrize("raised", [KeyboardInterrupt("ctrl-c"), HookInterrupt("own"), SystemExit(3),
                                    asyncio.CancelledError("cancelled"), GeneratorExit()],
                         ids=lambda e: type(e).__name__)
def test_a_hook_raising_any_base_exception_changes_nothing(calls, raised):
    reg = Registry()

    def interrupting(job, error):
        raise raised

    reg.task(name="ok", on_success=interrupting)(lambda: 1)
    reg.on_success(lambda job, error: calls.append(job.id))
    buf, store = io.StringIO(), MemoryResultStore()
    outcome = Runner(reg, store, log=logs.LogSink(buf), metrics=False).run([deliver("ok")])[0]
    assert outcome.status == "succeeded" and store.record(outcome.job_id)["status"] == "succeeded"
    assert calls == [outcome.job_id]  # the next hook still ran
    (line,) = [codec.loads(x) for x in buf.getvalue().splitlines() if "hook_failed" in x]
    assert line["error"].startswith(type(raised).__name__)


def test_hooks_still_running_at_the_batchs_budget_are_abandoned_not_the_batch(calls):
    """Two slow on_failure hooks and a budget that holds neither: the batch returns its
    outcomes, recorded, and one log line says which hook was abandoned and how many were
    never called."""
    release = threading.Event()
    reg = Registry()

    @reg.task(name="boom", max_attempts=2)
    def boom():
        raise ValueError("no")

    def slow(job, error):
        calls.append(job.id)
        release.wait(10)

    reg.on_failure(slow)
    reg.on_failure(slow)
    buf, store = io.StringIO(), MemoryResultStore()
    runner = Runner(reg, store, log=logs.LogSink(buf), metrics=False, safety_ms=200, cutoff_ms=50)
    try:
        outcome = runner.run([deliver("boom")], remaining_ms=lambda: 400)[0]
        assert outcome.status == "failed" and store.record(outcome.job_id)["status"] == "failed"
        assert calls == [outcome.job_id]  # the second hook never started
        (line,) = [codec.loads(x) for x in buf.getvalue().splitlines() if "hook_abandoned" in x]
        assert line["level"] == "WARNING" and line["job_id"] == outcome.job_id and line["hook"].endswith("slow")
        assert line["not_called"] == 1
    finally:
        release.set()


def test_without_a_budget_hooks_run_to_their_end(calls):
    reg = Registry()
    reg.task(name="ok")(lambda: 1)
    reg.on_success(lambda job, error: (time.sleep(0.05), calls.append(threading.get_ident())))
    outcome = Runner(reg, MemoryResultStore(), log=None, metrics=False).run([deliver("ok")])[0]
    assert outcome.status == "succeeded" and calls == [threading.get_ident()]  # inline, on the batch's thread


def test_in_lambda_a_slow_hook_is_abandoned_and_the_batch_is_still_answered(calls):
    """The invocation answers with its batch settled (the failed job reported for its retry)
    while its hooks are still running, instead of running into its timeout."""
    from kindling.triggers.sqs.handler import LambdaWorker

    release = threading.Event()
    reg = Registry()
    reg.task(name="boom")(lambda: (_ for _ in ()).throw(ValueError("no")))
    reg.on_failure(lambda job, error: (calls.append(job.id), release.wait(10)))
    reg.on_failure(lambda job, error: calls.append("second"))
    buf = io.StringIO()
    worker = LambdaWorker(reg, store=MemoryResultStore(), log=logs.LogSink(buf), metrics=False, retry_delay=0,
                          safety_ms=200, cutoff_ms=50)

    class Context:
        aws_request_id = "req-1"
        deadline = time.monotonic() + 0.4

        def get_remaining_time_in_millis(self):
            return int((self.deadline - time.monotonic()) * 1000)

    d = deliver("boom")
    event = {"Records": [{"messageId": d.ref, "receiptHandle": "rh", "body": d.body,
                          "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
                          "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:jobs",
                          "awsRegion": "us-east-1"}]}
    try:
        response = worker(event, Context())
        assert response == {"batchItemFailures": [{"itemIdentifier": d.ref}]}
        assert len(calls) == 1 and "second" not in calls
        assert any("hook_abandoned" in line for line in buf.getvalue().splitlines())
    finally:
        release.set()


def test_with_the_budget_already_spent_no_hook_is_started(calls):
    from kindling.engine import hooks

    reg = Registry()
    reg.task(name="ok")(lambda: 1)
    outcomes = Runner(reg, MemoryResultStore(), log=None, metrics=False).run([deliver("ok"), deliver("ok")])
    reg.on_success(lambda job, error: calls.append(job.id))
    lines = []
    hooks.call(reg, outcomes, lines.append, lambda o: 3, deadline=time.monotonic() - 1)
    assert calls == []
    (line,) = lines
    assert line["kindling"] == "hook_abandoned" and line["not_called"] == 2


@pytest.mark.parametrize("deadline", [None, "a budget"], ids=["no budget", "under a budget"])
def test_a_hook_sees_the_context_variables_of_the_batch_that_calls_it(deadline):
    """Under a budget hooks run on a thread of their own; what the batch's context holds (an
    error tracker's scope, a tracing span, a logger's keys: all context variables) is there
    as when they run on the batch's thread."""
    import contextvars

    from kindling.engine import hooks

    scope = contextvars.ContextVar("scope", default="none")
    seen = []
    reg = Registry()
    reg.task(name="ok")(lambda: 1)
    outcomes = Runner(reg, MemoryResultStore(), log=None, metrics=False).run([deliver("ok")])
    reg.on_success(lambda job, error: seen.append(scope.get()))
    scope.set("the batch's")
    hooks.call(reg, outcomes, None, lambda o: 3, deadline=None if deadline is None else time.monotonic() + 5)
    assert seen == ["the batch's"]
