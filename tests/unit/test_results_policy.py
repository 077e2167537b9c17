"""The results policy (kindling.core.policy): which outcomes a task or a deployment records, and
what it gives up, for the runner, the task option, handles and canvases."""

import time

import pytest
from kindling import group
from kindling.core.envelope import encode_job, new_job
from kindling.core.errors import JobFailed, ResultNotRecorded, TaskDefinitionError
from kindling.core.policy import keeps
from kindling.core.registry import Registry, default_registry
from kindling.engine.runner import Delivery, Runner
from kindling.stores.dynamo import DynamoResultStore
from kindling.stores.results import MemoryResultStore
from kindling.tools.testing import eager
from support.tasks import delivery


def registry_tasks(r: Registry) -> None:
    """This module's tasks, on the fresh registry the shared ``reg`` fixture gives each test."""
    r.task(name="plain")(lambda n: n)
    r.task(name="quiet", results="failures")(lambda n: n)
    r.task(name="silent", results="none")(lambda n: n)
    r.task(name="quiet_flop", results="failures", max_attempts=2)(lambda: 1 / 0)
    r.task(name="silent_flop", results="none", max_attempts=2)(lambda: 1 / 0)


def run(reg, deliveries, **options):
    store = MemoryResultStore()
    outcomes = Runner(reg, store, log=None, metrics=False, **options).run(deliveries)
    return store, outcomes


@pytest.mark.parametrize("task", ["quiet", "silent"])
def test_a_batch_of_successes_that_keep_no_record_makes_no_round_trip(reg, task):
    store, outcomes = run(reg, [delivery(task, i) for i in range(10)])
    assert [o.status for o in outcomes] == ["succeeded"] * 10
    assert (store.reads, store.writes, store.records) == (0, 0, {})


def test_the_default_policy_reads_once_and_writes_once(reg):
    store, _ = run(reg, [delivery("plain", i) for i in range(10)])
    assert (store.reads, store.writes, len(store.records)) == (1, 1, 10)


def test_the_deployments_policy_applies_to_tasks_without_their_own(reg):
    store, _ = run(reg, [delivery("plain", 1)], results="failures")
    assert (store.reads, store.writes, store.records) == (0, 0, {})


def test_the_deployments_policy_is_read_from_the_environment(reg, monkeypatch):
    monkeypatch.setenv("KINDLING_RESULTS_POLICY", "none")
    assert Runner(reg, MemoryResultStore(), log=None, metrics=False).results == "none"
    monkeypatch.setenv("KINDLING_RESULTS_POLICY", "some")
    with pytest.raises(ValueError, match="KINDLING_RESULTS_POLICY must be one of 'all', 'failures', 'none'"):
        Runner(reg, MemoryResultStore(), log=None, metrics=False)


def test_a_tasks_own_policy_wins_over_the_deployments():
    r = Registry()
    r.task(name="loud", results="all")(lambda: 1)
    store, _ = run(r, [delivery("loud")], results="none")
    assert store.reads == 1 and len(store.records) == 1


def test_a_failure_is_recorded_under_failures_and_not_under_none(reg):
    store, outcomes = run(reg, [delivery("quiet_flop"), delivery("silent_flop")])
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert [r["task"] for r in store.records.values()] == ["quiet_flop"]


def test_under_none_attempts_are_counted_from_deliveries_and_dead_is_recorded(reg):
    d = delivery("silent_flop", attempts=2)
    store, (o,) = run(reg, [d])
    assert o.status == "dead" and store.records[d.ref]["attempts"] == 2
    assert store.reads == 0  # no failed record to count from: nothing read


def test_a_chord_member_and_callback_are_recorded_whatever_the_deployment_says(reg):
    member = delivery("plain", 1, job_id="c1.0", parent={"id": "c1", "index": 0, "size": 2, "then": None})
    callback = delivery("plain", 2, job_id="c1.then")
    store, _ = run(reg, [member, callback], results="none")
    assert {k: r["status"] for k, r in store.records.items() if not k.startswith("chord#")} == {
        "c1.0": "succeeded", "c1.then": "succeeded"}


def test_a_success_after_a_failed_attempt_is_recorded_under_failures_to_replace_its_record():
    assert keeps("all", "succeeded") and not keeps("failures", "succeeded")
    assert keeps("failures", "succeeded", attempt=2) and not keeps("none", "succeeded", attempt=2)


def test_rejected_and_dead_are_recorded_under_none():
    assert all(keeps("none", s) for s in ("dead", "rejected"))
    assert not any(keeps("none", s) for s in ("succeeded", "failed"))


@pytest.mark.parametrize(("options", "message"), [
    ({"results": "some"}, "results must be one of 'all', 'failures', 'none'"),
    ({"ignore_result": "yes"}, "ignore_result must be True or False"),
    ({"ignore_result": True, "results": "all"}, "ignore_result=True means results='none'"),
])
def test_a_bad_results_option_is_refused_at_declaration(options, message):
    with pytest.raises(TaskDefinitionError, match=message):
        Registry().task(name="t", **options)(lambda: None)


def test_celerys_ignore_result_is_an_alias():
    r = Registry()
    assert r.task(name="a", ignore_result=True)(lambda: None).results == "none"
    assert r.task(name="b", ignore_result=False)(lambda: None).results == "all"
    assert r.task(name="c")(lambda: None).results is None  # the deployment's


@pytest.fixture
def registered():
    """Tasks in the default registry, where a handle looks its task's policy up."""
    name = f"results-policy-{time.monotonic_ns()}"
    tasks = [default_registry.task(name=f"{name}.{kind}", results=kind)(fn)
             for kind, fn in (("all", lambda: 1), ("failures", lambda: 1), ("none", lambda: 1 / 0))]
    yield tasks
    for t in tasks:
        default_registry._tasks.pop(t.name, None)


def test_a_handle_of_a_task_that_records_no_success_raises_at_once(registered):
    loud, quiet, failing_silent = registered
    with eager():
        assert loud.delay().result() == 1
        handle = quiet.delay()
        with pytest.raises(ResultNotRecorded, match="records no success \\(results='failures'\\)"):
            handle.result(timeout=3600)  # raised at once, not after the timeout
        with pytest.raises(JobFailed, match="is dead"):
            failing_silent.apply_async(max_attempts=1).result()  # a dead job is recorded under any policy


def test_a_chord_refuses_members_or_a_callback_that_record_no_success(registered):
    loud, quiet, _ = registered
    with pytest.raises(ValueError, match="a group's member must record its success"):
        group([loud.s(), quiet.s()])
    with pytest.raises(ValueError, match="a chord's callback must record its success"):
        group([loud.s()]).then(quiet.s())


class RecordingClient:
    def __init__(self):
        self.calls = []

    def call(self, operation, payload, deadline=None):
        self.calls.append((operation, payload))
        return {}


@pytest.mark.parametrize(("task_index", "has_key"), [(True, True), (False, False)])
def test_without_the_task_index_records_carry_no_task_shard(task_index, has_key):
    client = RecordingClient()
    store = DynamoResultStore("t", client, task_index=task_index)
    store.write([{"id": "j", "task": "x", "status": "succeeded", "attempts": 1, "task_shard": "x#1"},
                 {"id": "k", "task": "x", "status": "failed", "attempts": 1, "task_shard": "x#2"}])
    items = [c[1]["RequestItems"]["t"][0]["PutRequest"]["Item"] if c[0] == "BatchWriteItem" else c[1]["Item"]
             for c in client.calls]
    assert [("task_shard" in item) for item in items] == [has_key, has_key]


def test_the_task_index_follows_the_environment(monkeypatch):
    monkeypatch.setenv("KINDLING_TASK_INDEX", "0")
    assert DynamoResultStore("t", RecordingClient()).task_index is False
    monkeypatch.delenv("KINDLING_TASK_INDEX")
    assert DynamoResultStore("t", RecordingClient()).task_index is True


def _silent_registry():
    r = Registry()
    r.task(name="silent_fail", results="none", max_attempts=3)(lambda: 1 / 0)
    r.task(name="silent_rated", results="none", max_attempts=3, rate_limit="100/s")(lambda: 1 / 0)
    return r


def _attempt(runner, job, deliveries, group=None):
    (o,) = runner.run([Delivery(f"m{deliveries}", encode_job(job).decode(), deliveries, group=group)])
    return o.status, o.attempts


@pytest.mark.parametrize("kind", ["delayed", "rate_limited", "fifo"])
def test_under_none_a_job_the_worker_hands_back_counts_the_runs_of_its_task_not_its_deliveries(kind):
    """A delayed job's hops, a rate-limited task's hand-backs and a FIFO group's hand-backs
    are deliveries on SQS: a max_attempts=3 job first run on its 5th delivery keeps its three
    attempts (its failed attempts are recorded, as under "failures")."""
    store = MemoryResultStore()
    runner = Runner(_silent_registry(), store, log=None, metrics=False, max_deliveries=100)
    task = "silent_rated" if kind == "rate_limited" else "silent_fail"
    due = time.time_ns() // 1_000_000 - 1
    job = new_job(task, [], not_before=due if kind == "delayed" else None)
    group_ = "g" if kind == "fifo" else None
    ran = [_attempt(runner, job, deliveries, group_) for deliveries in (5, 6, 7)]
    assert ran == [("failed", 1), ("failed", 2), ("dead", 3)]
    assert store.records[job.id]["status"] == "dead"


def test_under_none_a_plain_job_counts_its_deliveries_as_its_attempts_on_sqs():
    """What "none" gives up (docs/guarantees.md): with no record of a failed attempt, a plain
    job's attempts are its deliveries, a store outage's hand-back included."""
    runner = Runner(_silent_registry(), MemoryResultStore(), log=None, metrics=False, max_deliveries=100)
    assert _attempt(runner, new_job("silent_fail", []), 3) == ("dead", 3)
