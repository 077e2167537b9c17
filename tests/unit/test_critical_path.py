"""What the first batch waits for: the duplicate check goes out before admission ends, and a
batch of tasks that opted out of duplicate skipping makes only the write."""

import pytest
from kindling.envelope import encode_job, new_job
from kindling.registry import Registry, Task
from kindling.results import MemoryResultStore
from kindling.runner import Delivery, Runner


@pytest.fixture
def reg():
    r = Registry()
    r.task(name="add")(lambda a, b: a + b)
    r.task(name="count", skip_succeeded=False)(lambda n: n)
    r.task(name="flop", skip_succeeded=False, max_attempts=2)(lambda: 1 / 0)
    return r


def delivery(task, *args, attempts=1, job_id=None):
    job = new_job(task, args, job_id=job_id)
    return Delivery(job.id, encode_job(job).decode(), attempts)


def test_the_read_is_sent_before_admission_ends_and_collected_after(reg, monkeypatch):
    store = MemoryResultStore()
    original = Task.check_arguments

    def check(self, args, kwargs):
        store.events.append(("arguments checked", self.name))
        return original(self, args, kwargs)

    monkeypatch.setattr(Task, "check_arguments", check)
    Runner(reg, store, log=None, metrics=False).run([delivery("add", 1, 2), delivery("add", 3, 4)])
    kinds = [event[0] for event in store.events]
    assert kinds == ["read sent", "arguments checked", "arguments checked", "read collected"], kinds


def test_a_batch_of_opted_out_tasks_makes_only_the_write(reg):
    store = MemoryResultStore()
    outcomes = Runner(reg, store, log=None, metrics=False).run([delivery("count", i) for i in range(5)])
    assert [o.status for o in outcomes] == ["succeeded"] * 5
    assert (store.reads, store.writes) == (0, 1)
    assert [e for e in store.events if e[0] == "read sent"] == []


def test_a_mixed_batch_reads_only_the_ids_that_need_it(reg):
    store = MemoryResultStore()
    plain, opted = delivery("add", 1, 1), delivery("count", 1)
    Runner(reg, store, log=None, metrics=False).run([plain, opted])
    assert store.events[0] == ("read sent", [plain.ref])


def test_an_opted_out_failure_is_numbered_after_the_run_and_dies_on_its_last_attempt(reg):
    store = MemoryResultStore()
    runner = Runner(reg, store, log=None, metrics=False)
    d = delivery("flop")
    first = runner.run([Delivery(d.ref, d.body, 5)])[0]  # delivered 5 times (hand-backs), run once
    assert first.status == "failed" and store.records[d.ref]["attempts"] == 1
    assert store.records[d.ref]["status_shard"].startswith("failed#")
    second = runner.run([Delivery(d.ref, d.body, 6)])[0]
    assert second.status == "dead" and store.records[d.ref]["attempts"] == 2
    assert store.records[d.ref]["status_shard"].startswith("dead#")


def test_an_opted_out_job_runs_again_after_dead_and_a_success_replaces_the_record(reg):
    store = MemoryResultStore()
    job_id = "opted-1"
    store.records[job_id] = {"id": job_id, "status": "dead", "attempts": 3}
    outcome = Runner(reg, store, log=None, metrics=False).run([delivery("count", 7, job_id=job_id)])[0]
    assert outcome.status == "succeeded" and store.records[job_id]["status"] == "succeeded"
