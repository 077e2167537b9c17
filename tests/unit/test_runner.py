"""The batch runner against an in-memory store: what each kind of message becomes."""

import time

from kindling.core import codec
from kindling.core.registry import Registry
from kindling.engine.runner import Delivery, Runner
from support.tasks import delivery, statuses


def test_mixed_batch(reg, store):
    batch = [
        delivery("add", 1, 2),
        delivery("boom"),
        Delivery("m-bad", "{not json", 1),
        delivery("nope"),
        delivery("add", 1),  # missing argument
        delivery("add", 3, 4),
    ]
    outcomes = Runner(reg, store).run(batch)
    assert statuses(outcomes) == ["succeeded", "failed", "rejected", "rejected", "rejected", "succeeded"]
    ok, failed, not_json, unknown, bad_args, ok2 = (store.records[o.job_id] for o in outcomes)
    assert codec.loads(ok["result"]) == 3 and codec.loads(ok2["result"]) == 7
    assert failed["error"]["type"] == "ValueError" and failed["error"]["message"] == "kaboom"
    assert "kaboom" in failed["error"]["traceback"]
    assert not_json["id"] == "rejected#m-bad" and not_json["raw"] == "{not json"
    assert "not JSON" in not_json["error"]["message"]
    assert unknown["error"]["message"] == "unknown task 'nope'" and unknown["raw"] == batch[3].body
    assert unknown["id"] == batch[3].ref and bad_args["id"] == batch[4].ref  # recorded under the job's id
    assert "missing required argument(s): 'b'" in bad_args["error"]["message"]
    assert store.reads == 1 and store.writes == 1  # one round trip each way per batch


def test_a_duplicate_of_a_succeeded_job_does_not_run_again(reg, store):
    runner = Runner(reg, store)
    first = delivery("add", 1, 1)
    runner.run([first])
    again = runner.run([Delivery("redelivered", first.body, 2)])
    assert statuses(again) == ["skipped"]
    assert reg.runs == [("add", 1, 1)]


def test_a_job_twice_in_one_batch_runs_once(reg, store):
    d = delivery("add", 2, 2)
    outcomes = Runner(reg, store).run([d, Delivery("copy", d.body, 1)])
    assert statuses(outcomes) == ["succeeded", "skipped"]
    assert reg.runs == [("add", 2, 2)]


def test_tasks_may_opt_into_rerunning_duplicates(store):
    reg = Registry()
    runs = []
    reg.task(name="count", skip_succeeded=False)(lambda: runs.append(1))
    d = delivery("count")
    Runner(reg, store).run([d])
    Runner(reg, store).run([d])
    assert len(runs) == 2


def test_the_last_attempt_is_recorded_dead_with_its_error(reg, store):
    runner = Runner(reg, store, max_attempts=3)
    d = delivery("boom")
    assert statuses(runner.run([d])) == ["failed"]
    assert statuses(runner.run([d])) == ["failed"]
    outcomes = runner.run([d])
    assert statuses(outcomes) == ["dead"]
    record = store.records[outcomes[0].job_id]
    assert record["status"] == "dead" and record["attempts"] == 3
    assert record["error"]["message"] == "kaboom"


def test_max_attempts_comes_from_job_then_task_and_is_capped(reg, store):
    d = delivery("boom", max_attempts=10)
    runner = Runner(reg, store, attempts_cap=2)
    assert statuses(runner.run([d])) == ["failed"]
    assert statuses(runner.run([d])) == ["dead"]
    d = delivery("boom", max_attempts=1)
    assert statuses(Runner(reg, store).run([d])) == ["dead"]


def test_a_job_already_dead_is_not_run_again(reg, store):
    d = delivery("boom", max_attempts=1)
    runner = Runner(reg, store)
    runner.run([d])
    writes = store.writes
    assert statuses(runner.run([Delivery(d.ref, d.body, 2)])) == ["dead"]
    assert store.writes == writes  # nothing new to record


def test_remaining_time_cutoff_hands_back_unstarted_jobs(reg, store):
    """With 1.2 s left and 1 s kept for the write, only jobs started in the first 0.2 s run."""
    deadline = time.monotonic() + 1.2
    batch = [delivery("nap", 150) for _ in range(5)]
    outcomes = Runner(reg, store, safety_ms=1000, cutoff_ms=10).run(
        batch, remaining_ms=lambda: int((deadline - time.monotonic()) * 1000)
    )
    started = [o for o in outcomes if o.status != "deferred"]
    deferred = [o for o in outcomes if o.status == "deferred"]
    assert 1 <= len(started) <= 2 and len(deferred) >= 3
    assert all(o.job_id not in store.records for o in deferred)  # not recorded: redelivered as new
    assert len(reg.runs) == len(started)


def test_a_sync_job_is_stopped_at_its_timeout(reg, store):
    outcomes = Runner(reg, store).run([delivery("nap", 2000, timeout=0.1)])
    assert statuses(outcomes) == ["failed"]
    err = store.records[outcomes[0].job_id]["error"]
    assert err["type"] == "JobTimeout" and "timeout of 0.1s" in err["message"]


def test_a_job_is_stopped_when_the_invocation_runs_out(reg, store):
    deadline = time.monotonic() + 1.3
    outcomes = Runner(reg, store, safety_ms=1000, cutoff_ms=10).run(
        [delivery("nap", 5000)], remaining_ms=lambda: int((deadline - time.monotonic()) * 1000)
    )
    assert statuses(outcomes) == ["failed"]
    assert "remaining time ran out" in store.records[outcomes[0].job_id]["error"]["message"]


def test_async_jobs_run_concurrently_up_to_the_limit(store):
    import asyncio

    reg = Registry()
    state = {"now": 0, "max": 0}

    @reg.task(name="io")
    async def io():
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(0.05)
        state["now"] -= 1
        return "done"

    outcomes = Runner(reg, store, concurrency=4).run([delivery("io") for _ in range(10)])
    assert statuses(outcomes) == ["succeeded"] * 10
    assert state["max"] == 4


def test_async_timeout(store):
    import asyncio

    reg = Registry()
    reg.task(name="hang", timeout=0.05)(lambda: None)

    @reg.task(name="ahang", timeout=0.05)
    async def ahang():
        await asyncio.sleep(10)

    outcomes = Runner(reg, store).run([delivery("ahang")])
    assert statuses(outcomes) == ["failed"]
    assert store.records[outcomes[0].job_id]["error"]["type"] == "JobTimeout"


def test_a_store_that_is_down_loses_nothing(reg, store):
    store.fail = True
    outcomes = Runner(reg, store).run([delivery("add", 1, 2), Delivery("bad", "x", 1)])
    assert statuses(outcomes) == ["deferred", "deferred"]
    assert reg.runs == []  # nothing ran that could not be recorded
    assert all("result store unavailable" in o.reason for o in outcomes)


def test_a_result_too_large_to_record_is_a_clear_failure(store):
    reg = Registry()
    reg.task(name="big")(lambda: "x" * 400_000)
    outcomes = Runner(reg, store).run([delivery("big")])
    record = store.records[outcomes[0].job_id]
    assert record["status"] == "failed" and record["error"]["type"] == "ResultTooLarge"
    assert "result" not in record


def test_a_result_json_cannot_hold_is_a_clear_failure(store):
    reg = Registry()
    reg.task(name="obj")(lambda: object())
    outcomes = Runner(reg, store).run([delivery("obj")])
    assert "cannot be encoded as JSON" in store.records[outcomes[0].job_id]["error"]["message"]


def test_a_job_not_due_yet_is_deferred(reg, store):
    outcomes = Runner(reg, store).run([delivery("add", 1, 2, not_before=int(time.time() * 1000) + 60_000)])
    assert statuses(outcomes) == ["deferred"] and reg.runs == []


def test_tasks_see_their_attempt_number(reg, store):
    d = delivery("attempt")
    store.records[d.ref] = {"id": d.ref, "status": "failed", "attempts": 1}  # its first attempt failed
    outcomes = Runner(reg, store).run([Delivery(d.ref, d.body, 5)])
    assert codec.loads(store.records[outcomes[0].job_id]["result"]) == 2


def test_records_carry_timing_worker_and_expiry(reg, store):
    runner = Runner(reg, store, worker={"function": "fn", "version": "$LATEST"}, ttl_days=1)
    outcomes = runner.run([delivery("add", 1, 2)], request_id="req-1")
    r = store.records[outcomes[0].job_id]
    assert r["worker"] == {"function": "fn", "version": "$LATEST", "request_id": "req-1"}
    assert r["enqueued_at"] <= r["started_at"] <= r["finished_at"]
    assert r["expires_at"] == r["finished_at"] // 1000 + 86_400
    assert r["duration_ms"] >= 0


def test_sync_jobs_share_a_thread_pool_in_long_lived_workers(reg, store):
    import threading

    # Each job waits for all eight: only eight jobs running at once can get past it.
    meeting = threading.Barrier(8, timeout=30)
    reg.task(name="meet")(lambda: meeting.wait())
    outcomes = Runner(reg, store, threads=8).run([delivery("meet") for _ in range(8)])
    assert statuses(outcomes) == ["succeeded"] * 8


def test_a_pool_smaller_than_the_batch_runs_no_more_jobs_at_once_than_its_threads(reg, store):
    import threading

    meeting = threading.Barrier(8, timeout=0.5)
    reg.task(name="meet")(lambda: meeting.wait())
    outcomes = Runner(reg, store, threads=4).run([delivery("meet") for _ in range(8)])
    assert statuses(outcomes) == ["failed"] * 8  # BrokenBarrierError: never eight at once


def test_jobs_waiting_for_a_busy_thread_at_the_cutoff_are_handed_back_and_never_start(reg, store):
    """Both threads are held past the cutoff by jobs that ignore it: the waiting jobs come back
    unstarted, and no thread starts them after the batch has returned."""
    deadline = time.monotonic() + 2.0  # the cutoff comes at 1 s: the naps have long started by then
    batch = [delivery("nap", 1500, timeout=5) for _ in range(2)] + [delivery("add", 1, i) for i in range(6)]
    outcomes = Runner(reg, store, threads=2, safety_ms=1000, cutoff_ms=10).run(
        batch, remaining_ms=lambda: int((deadline - time.monotonic()) * 1000)
    )
    # the naps are stopped by the invocation's time (recorded as timed out), the rest come back
    assert statuses(outcomes) == ["failed"] * 2 + ["deferred"] * 6
    time.sleep(1.0)  # the naps' threads are free again by now
    assert sorted(c[0] for c in reg.runs) == ["nap", "nap"]


def test_a_threaded_job_started_late_is_held_to_its_own_limit(reg, store):
    """The limit of a job that starts after the batch began (its thread was busy) counts from its
    start and is enforced although the jobs ahead of it never end in time."""
    started = time.monotonic()
    outcomes = Runner(reg, store, threads=1).run([delivery("nap", 300, timeout=5), delivery("nap", 5000, timeout=0.2)])
    assert statuses(outcomes) == ["succeeded", "failed"]
    assert store.records[outcomes[1].job_id]["error"]["type"] == "JobTimeout"
    assert time.monotonic() - started < 2  # not the 5 s the second job would take


def test_many_short_threaded_jobs_all_run_once(reg, store):
    outcomes = Runner(reg, store, threads=16).run([delivery("add", i, 1) for i in range(400)])
    assert statuses(outcomes) == ["succeeded"] * 400
    assert sorted(c[1] for c in reg.runs) == list(range(400))


def test_a_threaded_job_past_its_timeout_is_recorded_and_the_batch_moves_on(reg, store):
    outcomes = Runner(reg, store, threads=4).run([delivery("nap", 1500, timeout=0.1), delivery("add", 1, 2)])
    assert statuses(outcomes) == ["failed", "succeeded"]
    assert store.records[outcomes[0].job_id]["error"]["type"] == "JobTimeout"


def test_a_runner_bug_in_a_thread_leaves_the_job_settled_and_the_threads_working(reg, store):
    """Whatever escapes a job's run on a thread (a bug in kindling, not the task) settles that job
    as a crash; the thread survives for the next batch."""

    class Broken(Runner):  # the pool runs each job through the runner's run_job step
        def run_job(self, o, deadline):
            if o.job.args == [0, 0]:
                raise RuntimeError("kindling bug")
            return super().run_job(o, deadline)

    runner = Broken(reg, store, threads=2, log=None)
    deadline = time.monotonic() + 3  # a runner without threads left would hand jobs back
    left = lambda: int((deadline - time.monotonic()) * 1000)  # noqa: E731
    first = runner.run([delivery("add", 0, 0), delivery("add", 0, 0), delivery("add", 1, 1)], remaining_ms=left)
    assert statuses(first)[2] == "succeeded" and "succeeded" not in statuses(first)[:2]
    second = runner.run([delivery("add", 2, 2), delivery("add", 3, 3), delivery("add", 4, 4)], remaining_ms=left)
    assert statuses(second) == ["succeeded"] * 3


def test_meanwhile_runs_while_threaded_jobs_run_and_a_batch_admitted_then_keeps_its_own_worker(store):
    """A long-lived worker admits its next batch while this one's jobs run in threads: each
    batch's records carry its own invocation, however the two interleave."""
    import threading

    reg = Registry()
    admitted = threading.Event()

    @reg.task(name="wait")
    def wait():
        assert admitted.wait(5)  # finishes only after the next batch was admitted
        return 1

    runner = Runner(reg, store, threads=4, log=None, metrics=False, worker={"name": "w"})
    running = runner.begin([delivery("wait"), delivery("wait")], request_id="req-a")
    ahead = {}

    def meanwhile():
        ahead["batch"] = runner.begin([delivery("wait"), Delivery("m-bad", "{not json", 1)], request_id="req-b",
                                      in_flight=running.job_ids())
        admitted.set()

    outcomes = runner.finish(runner.execute(running, meanwhile))
    assert statuses(outcomes) == ["succeeded", "succeeded"]
    assert {store.records[o.job_id]["worker"]["request_id"] for o in outcomes} == {"req-a"}
    rejected = ahead["batch"].outcomes[1]
    assert rejected.status == "rejected" and rejected.record["worker"]["request_id"] == "req-b"
    later = runner.finish(runner.execute(ahead["batch"]))
    assert statuses(later) == ["succeeded", "rejected"]
    assert store.records[later[0].job_id]["worker"]["request_id"] == "req-b"


def test_meanwhile_is_not_called_when_jobs_run_one_after_another(reg, store):
    called = []
    runner = Runner(reg, store, log=None, metrics=False)
    outcomes = runner.finish(runner.execute(runner.begin([delivery("add", 1, 2), delivery("add", 2, 2)]),
                                                lambda: called.append(1)))
    assert statuses(outcomes) == ["succeeded", "succeeded"] and called == []
