"""What the first batch waits for: the duplicate check goes out before admission ends, and a
batch of tasks that opted out of duplicate skipping makes only the write."""

from kindling.core.registry import Registry, Task
from kindling.engine.runner import Delivery, Runner
from kindling.stores.results import MemoryResultStore
from support.tasks import delivery


def registry_tasks(r: Registry) -> None:
    """This module's tasks, on the fresh registry the shared ``reg`` fixture gives each test."""
    r.task(name="add")(lambda a, b: a + b)
    r.task(name="count", skip_succeeded=False)(lambda n: n)
    r.task(name="flop", skip_succeeded=False, max_attempts=2)(lambda: 1 / 0)


def test_the_read_is_sent_before_admission_ends_and_collected_after(reg, monkeypatch):
    store = MemoryResultStore()
    original = Task.check_arguments

    def check(self, args, kwargs):
        store.events.append(("arguments checked", self.name))
        return original(self, args, kwargs)

    monkeypatch.setattr(Task, "check_arguments", check)
    Runner(reg, store, log=None, metrics=False).run([delivery("add", 1, 2), delivery("add", 3, 4)])
    kinds = [event[0] for event in store.events]
    assert kinds == ["read sent", "arguments checked", "arguments checked", "read collected", "write sent",
                     "write collected"], kinds


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


# -- a long-lived worker's batches in phases: the next batch checked while this one is written ----


def test_the_next_batch_is_checked_while_this_one_is_written(reg):
    store = MemoryResultStore()
    runner = Runner(reg, store, log=None, metrics=False)
    first, second = [delivery("add", i, i) for i in range(2)], [delivery("add", i, i) for i in range(2, 4)]
    written = runner.execute(runner.begin(first))  # its write sent, its reply not read yet
    checked = runner.begin(second, in_flight=written.writing())
    assert [o.status for o in runner.finish(written)] == ["succeeded"] * 2
    assert [o.status for o in runner.finish(runner.execute(checked))] == ["succeeded"] * 2
    ids = [[d.ref for d in first], [d.ref for d in second]]
    assert store.events == [("read sent", ids[0]), ("read collected", ids[0]), ("write sent", ids[0]),
                            ("read sent", ids[1]), ("write collected", ids[0]), ("read collected", ids[1]),
                            ("write sent", ids[1]), ("write collected", ids[1])]


def test_a_job_of_the_batch_still_being_written_is_read_after_that_write_and_skipped(reg):
    """Sent before the earlier write is read back, the next batch's check cannot see that
    write: the ids they share are read once it is, so a job just run is skipped, not run twice."""
    store = MemoryResultStore()
    runs = []
    reg.task(name="once")(lambda i: runs.append(i))
    runner = Runner(reg, store, log=None, metrics=False)
    job = delivery("once", 1)
    again, other = Delivery("entry-2", job.body), delivery("once", 2)
    written = runner.execute(runner.begin([job]))
    checked = runner.begin([again, other], in_flight=written.writing())
    assert ("read sent", [other.ref]) in store.events  # only the id no earlier write holds
    runner.finish(written)
    outcomes = runner.finish(runner.execute(checked))
    assert [o.status for o in outcomes] == ["skipped", "succeeded"] and runs == [1, 2]
    reads = [n for n, event in enumerate(store.events) if event == ("read sent", [job.ref])]
    assert len(reads) == 2 and store.events.index(("write collected", [job.ref])) < reads[1], store.events


def test_a_failed_check_hands_the_batch_back_unrun_and_writes_nothing(reg):
    store = MemoryResultStore()
    runs = []
    reg.task(name="once")(lambda i: runs.append(i))
    runner = Runner(reg, store, log=None, metrics=False)
    checked = runner.begin([delivery("once", 1), delivery("once", 2)])
    store.fail = True
    outcomes = runner.finish(runner.execute(checked))
    assert [o.status for o in outcomes] == ["deferred"] * 2 and runs == []
    assert all(o.reason.startswith("result store unavailable") for o in outcomes)
    assert store.records == {} and not any(e[0] == "write sent" for e in store.events)


def test_a_failed_write_hands_the_batch_back(reg):
    store = MemoryResultStore()
    runner = Runner(reg, store, log=None, metrics=False)
    written = runner.execute(runner.begin([delivery("add", 1, 2)]))
    store.fail = True
    outcome = runner.finish(written)[0]
    assert outcome.status == "deferred" and outcome.record is None and store.records == {}


def test_each_batch_runs_under_its_own_deadline_when_the_next_was_begun_first(reg):
    """What a job's result upload to S3 is bounded by is its own batch's deadline."""

    class S3:
        def __init__(self):
            self.deadlines = []

        def put_object(self, bucket, key, data, *, content_type, deadline=None):
            self.deadlines.append(deadline)

    s3 = S3()
    runner = Runner(reg, MemoryResultStore(), log=None, metrics=False, payload_bucket="payloads", s3=s3,
                    safety_ms=1000)
    reg.task(name="big")(lambda: "x" * 400_000)  # too large for its record: kept in S3
    timed = runner.begin([delivery("big")], lambda: 60_000)
    untimed = runner.begin([delivery("big")])  # no deadline (a long-lived worker)
    runner.finish(runner.execute(timed))
    runner.finish(runner.execute(untimed))
    # Half the time kept back for recording is left for the write after the upload.
    assert s3.deadlines == [timed.deadline - 0.5, None]
