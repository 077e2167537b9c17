"""The Valkey trigger against a real valkey-server (tests/support/valkey.py) and DynamoDB on moto.

Run: .venv/bin/pytest tests/service/test_valkey.py -q -m valkey
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from kindling.core.valkey.keys import dead_key
from support import wait_until

pytestmark = pytest.mark.valkey

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "functions/worker/tasks.py"


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def stream() -> str:
    return f"test:{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def tasks():
    import tasks as module  # functions/worker is on pytest's pythonpath

    return module


def _scan(table: str) -> dict[str, dict]:
    import boto3
    from kindling.stores.results import from_item

    out = {}
    for page in boto3.client("dynamodb").get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        for item in page["Items"]:
            record = from_item(item)
            out[record["id"]] = record
    return out


def _worker(url: str, stream: str, table: str, *, burst: bool = True, **env) -> subprocess.Popen:
    argv = [sys.executable, "-m", "kindling.tools.cli", "worker", "--valkey", url, "--stream", stream,
            "--tasks", str(TASKS), "--table", table]
    if burst:
        argv.append("--burst")
    environment = dict(os.environ, KINDLING_LOG="0", **{k: str(v) for k, v in env.items()})
    return subprocess.Popen(argv, cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _counts(output: str) -> dict[str, int]:
    line = output.strip().splitlines()[-1]
    return {k: int(v) for k, v in (part.split("=") for part in line.split())}



def _empty(client, stream: str, group: str = "kindling") -> None:
    assert client.xlen(stream) == 0
    assert client.xpending(stream, group)["pending"] == 0


# -- a) throughput and exactly-one record per job ----------------------------------------------


def test_10k_noop_jobs_two_worker_processes(valkey_url, stream, table, capsys):
    from kindling.valkey import StreamProducer

    producer = StreamProducer(valkey_url, stream=stream)
    t0 = time.perf_counter()
    sent = producer.enqueue_many([("noop", [], {})] * 10_000)
    enqueue_s = time.perf_counter() - t0
    assert len({s.id for s in sent}) == 10_000 and producer.client.xlen(stream) == 10_000

    t0 = time.perf_counter()
    workers = [_worker(valkey_url, stream, table, KINDLING_VALKEY_BLOCK_MS=200) for _ in range(2)]
    outputs = [w.communicate(timeout=150) for w in workers]
    run_s = time.perf_counter() - t0
    for w, (_out, err) in zip(workers, outputs, strict=True):
        assert w.returncode == 0, err
    counts = [_counts(out) for out, _ in outputs]
    # every job ran exactly once across the two processes; none skipped, none failed
    assert sum(c.get("succeeded", 0) for c in counts) == 10_000, counts
    assert all(set(c) == {"succeeded"} for c in counts), counts
    assert all(c["succeeded"] > 0 for c in counts), counts  # both processes took part

    records = _scan(table)
    assert set(records) == {s.id for s in sent}
    assert all(r["status"] == "succeeded" and r["attempts"] == 1 for r in records.values())
    _empty(producer.client, stream)
    span_ms = max(r["finished_at"] for r in records.values()) - min(r["started_at"] for r in records.values())
    with capsys.disabled():
        print(f"\n[valkey 10k] enqueue_many {enqueue_s:.2f}s ({10_000 / enqueue_s:,.0f} jobs/s); "
              f"2 worker processes spawn-to-exit {run_s:.2f}s ({10_000 / run_s:,.0f} jobs/s); "
              f"first start to last finish {span_ms / 1000:.2f}s ({10_000 / (span_ms / 1000):,.0f} jobs/s); "
              f"per process {[c['succeeded'] for c in counts]}")


# -- b) a worker killed mid-batch -------------------------------------------------------------------


def test_killed_worker_entries_are_reclaimed(valkey_url, stream, table, tasks):
    import boto3
    from kindling.core.envelope import decode_job
    from kindling.stores.results import to_item
    from kindling.valkey import StreamProducer

    producer = StreamProducer(valkey_url, stream=stream)
    sent = producer.enqueue_many([("sleep", [150], {})] * 30)
    env = {"KINDLING_VALKEY_BATCH": 5, "KINDLING_VALKEY_VISIBILITY_MS": 1000, "KINDLING_VALKEY_BLOCK_MS": 200}
    a = _worker(valkey_url, stream, table, burst=False, **env)
    try:
        wait_until(lambda: len(_scan(table)) >= 5, 30, "worker A's first batch")

        def held_by_a():
            rows = producer.client.xpending_range(stream, "kindling", "-", "+", 100)
            return rows if len(rows) == 5 else None  # A is in the middle of its next batch

        pending = wait_until(held_by_a, 10, "worker A mid-batch")
    finally:
        a.send_signal(signal.SIGKILL)
        a.communicate(timeout=10)
    assert a.returncode == -signal.SIGKILL
    recorded_before = _scan(table)
    held = [p["message_id"].decode() for p in pending]
    held_jobs = {}
    for entry_id in held:
        (_, fields), = producer.client.xrange(stream, entry_id, entry_id)
        held_jobs[entry_id] = decode_job(fields[b"job"]).id
    # A recorded one of its batch but died before acknowledging: it must not run again
    already = held_jobs[held[0]]
    boto3.client("dynamodb").put_item(TableName=table, Item=to_item({
        "id": already, "task": "sleep", "status": "succeeded", "attempts": 1, "result": '"pre"',
        "started_at": 1, "finished_at": 2, "duration_ms": 1}))

    b = _worker(valkey_url, stream, table, **env)
    out, err = b.communicate(timeout=60)
    assert b.returncode == 0, err
    counts = _counts(out)
    assert counts.get("skipped") == 1, counts
    assert counts["succeeded"] == 30 - len(recorded_before) - 1, (counts, len(recorded_before))

    records = _scan(table)
    assert set(records) == {s.id for s in sent}
    assert all(r["status"] == "succeeded" for r in records.values())
    assert records[already]["result"] == '"pre"'  # not run again
    for entry_id in held[1:]:
        # attempts are counted in the record, and the killed run recorded nothing
        assert records[held_jobs[entry_id]]["attempts"] == 1
    for job_id, r in recorded_before.items():
        assert records[job_id]["finished_at"] == r["finished_at"]
    _empty(producer.client, stream)


# -- c) poison, retries, dead stream ----------------------------------------------------------------


def test_poison_retries_and_dead_stream(valkey_url, stream, table, tasks):
    from kindling.core.envelope import encode_job, new_job
    from kindling.stores.results import DynamoResultStore
    from kindling.valkey import StreamProducer, StreamWorker

    producer = StreamProducer(valkey_url, stream=stream)
    r = producer.client
    worker = StreamWorker(valkey_url, store=DynamoResultStore(table), stream=stream, visibility_ms=200,
                          block_ms=100, batch=20, max_attempts=3, log=False, retry_delay=0)  # retried on reclaim
    worker.ensure_group()
    # a job whose workers kept dying: delivered 4 times already (by a consumer that is gone)
    crashy = producer.enqueue("sleep", 1)
    r.xreadgroup("kindling", "ghost", {stream: ">"}, count=1)
    for _ in range(3):
        r.xclaim(stream, "kindling", "ghost", 0, [crashy.entry])
    r.xclaim(stream, "kindling", "ghost", 0, [crashy.entry], idle=60_000, justid=True)
    r.xadd(stream, {"job": b"{not json"})
    r.xadd(stream, {"something": "else"})
    unknown = new_job("no_such_task")
    r.xadd(stream, {"job": encode_job(unknown)})
    bad_args = producer.enqueue("sleep", nope=1)
    fails = producer.enqueue("always_fails", "boom")
    flaky = producer.enqueue("flaky", fails=1)
    ok = producer.enqueue("echo", 1, a=2)

    t0 = time.perf_counter()
    counts = worker.run(burst=True)
    assert time.perf_counter() - t0 < 20
    records = _scan(table)
    rejected = [x for x in records.values() if x["status"] == "rejected"]
    assert len(rejected) == 4, rejected
    assert records[unknown.id]["status"] == "rejected" and "no_such_task" in records[unknown.id]["error"]["message"]
    assert records[bad_args.id]["status"] == "rejected"
    assert {x["raw"] for x in rejected} >= {"{not json", ""}
    assert records[fails.id]["status"] == "dead" and records[fails.id]["attempts"] == 3
    assert records[fails.id]["error"]["message"] == "boom"
    assert records[flaky.id]["status"] == "succeeded" and records[flaky.id]["attempts"] == 2
    assert records[ok.id]["status"] == "succeeded" and records[ok.id]["attempts"] == 1
    assert records[crashy.id]["status"] == "dead"
    assert records[crashy.id]["error"]["type"] == "TooManyDeliveries"
    assert counts["dead"] == 2 and counts["rejected"] == 4 and counts["failed"] == 3, counts

    dead = {f[b"job_id"].decode(): f for _, f in r.xrange(dead_key(stream))}
    assert set(dead) == {fails.id, crashy.id}
    assert b"boom" in dead[fails.id][b"error"] and dead[fails.id][b"attempts"] == b"3"
    assert dead[fails.id][b"job"].startswith(b"{")
    _empty(r, stream)


# -- d) Lambda drain with the invocation's time running out ---------------------------------------


class FakeContext:
    aws_request_id = "req-1"

    def __init__(self, budget_ms: int):
        self.deadline = time.monotonic() + budget_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


def test_drain_stops_in_time_and_leaves_the_rest_pending(valkey_url, stream, tasks, monkeypatch):
    from kindling.stores.results import MemoryResultStore
    from kindling.triggers.sqs.handler import LambdaWorker
    from kindling.valkey import StreamProducer

    producer = StreamProducer(valkey_url, stream=stream)
    sent = producer.enqueue_many([("sleep", [50], {})] * 40)
    store = MemoryResultStore()
    handler = LambdaWorker(store=store, safety_ms=200, cutoff_ms=100, log=None)
    context = FakeContext(1500)
    t0 = time.monotonic()
    _configure_drain(monkeypatch, valkey_url, stream, KINDLING_DRAIN_BATCH="5")
    summary = handler({"kindling": "drain", "stream": stream}, context)
    elapsed_ms = (time.monotonic() - t0) * 1000
    assert elapsed_ms < 1500 - 200, (elapsed_ms, summary)  # the safety margin was kept
    done = summary["processed"]
    assert 5 <= done < 40, summary
    assert summary["counts"].get("succeeded") == done
    assert len(store.records) == done and all(x["status"] == "succeeded" for x in store.records.values())
    assert {x["worker"].get("request_id") for x in store.records.values()} == {"req-1"}  # as the SQS path's
    r = producer.client
    assert r.xlen(stream) == 40 - done  # the rest is still there: unread or pending
    assert r.xpending(stream, "kindling")["pending"] == summary["left_pending"]

    # a later invocation with time to spare picks up where this one stopped
    monkeypatch.setenv("KINDLING_DRAIN_BATCH", "10")
    summary2 = handler({"kindling": "drain", "stream": stream},
                       _after_visibility(r, stream))
    assert summary2["processed"] == 40 - done, summary2
    assert {s.id for s in sent} == set(store.records)
    _empty(r, stream)


def _configure_drain(monkeypatch, url: str, stream: str, **env: str) -> None:
    """The worker's environment for a drain of ``stream`` (an event only selects it)."""
    monkeypatch.setenv("KINDLING_VALKEY_URL", url)
    monkeypatch.setenv("KINDLING_VALKEY_STREAMS", stream)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def _after_visibility(r, stream):
    """Deferred entries stay pending for visibility_ms; make them reclaimable now."""
    for p in r.xpending_range(stream, "kindling", "-", "+", 100):
        r.xclaim(stream, "kindling", p["consumer"], 0, [p["message_id"]], idle=10 ** 7, justid=True)
    return FakeContext(60_000)


# -- e) Valkey restarted during a run -----------------------------------------------------------------


def test_worker_survives_a_valkey_restart(stream, table, start_valkey):
    from kindling.valkey import StreamProducer

    server = start_valkey()
    url = server.url
    worker = None
    try:
        first = StreamProducer(url, stream=stream).enqueue_many([("noop", [], {})] * 50)
        worker = _worker(url, stream, table, burst=False, KINDLING_VALKEY_BLOCK_MS=200)
        wait_until(lambda: len(_scan(table)) >= 50, 30, "the first 50 jobs")
        server.stop()
        time.sleep(1.0)  # the worker is now failing to reach Valkey and backing off
        server.start()  # no persistence: the stream and group are gone
        second = StreamProducer(url, stream=stream).enqueue_many([("noop", [], {})] * 50)
        wait_until(lambda: len(_scan(table)) >= 100, 30, "the 50 jobs sent after the restart")
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=20)
        assert worker.returncode == 0, err
        assert _counts(out) == {"succeeded": 100}
        records = _scan(table)
        assert set(records) == {s.id for s in first + second}
    finally:
        if worker and worker.poll() is None:
            worker.kill()
            worker.communicate()
        server.stop()


# -- f) the result store down -------------------------------------------------------------------------


class OutageStore:
    """A memory store that can be taken down; counts the calls made to it while it is down."""

    def __init__(self):
        from kindling.stores.results import MemoryResultStore

        self.memory = MemoryResultStore()
        self.records = self.memory.records
        self.calls_while_down = 0

    @property
    def fail(self) -> bool:
        return self.memory.fail

    @fail.setter
    def fail(self, value: bool) -> None:
        self.memory.fail = value

    def read_states(self, job_ids, **options):
        self.calls_while_down += self.fail
        return self.memory.read_states(job_ids)

    def get_statuses(self, job_ids, **options):
        self.calls_while_down += self.fail
        return self.memory.get_statuses(job_ids)

    def write(self, records, **options):
        self.calls_while_down += self.fail
        return self.memory.write(records)

    def begin_read(self, job_ids, **options):
        states = self.read_states(job_ids)
        return lambda: states

    def begin_write(self, records, **options):
        refused = self.write(records)
        return lambda: refused


def _delivered(r, stream: str, entry: str, times: int, group: str = "kindling") -> None:
    """Make ``entry`` look delivered ``times`` times to a consumer that died long ago."""
    r.xreadgroup(group, "ghost", {stream: ">"}, count=1)
    for _ in range(times - 1):
        r.xclaim(stream, group, "ghost", 0, [entry])
    r.xclaim(stream, group, "ghost", 0, [entry], idle=60_000, justid=True)


def _run_in_thread(worker, **options):
    import threading

    done: dict = {}
    thread = threading.Thread(target=lambda: done.update(counts=worker.run(**options)), daemon=True)
    thread.start()
    return thread, done


def test_a_store_outage_does_not_stop_the_worker(valkey_url, stream, tasks):
    from kindling.valkey import StreamProducer, StreamWorker

    producer = StreamProducer(valkey_url, stream=stream)
    store = OutageStore()
    worker = StreamWorker(valkey_url, store=store, stream=stream, visibility_ms=100, block_ms=50, batch=10,
                          max_attempts=3)
    events: list[dict] = []
    worker.runner.log = events.append
    worker.ensure_group()
    crashy = producer.enqueue("sleep", 1)  # its workers died 4 times: judged on a store read, not run
    _delivered(producer.client, stream, crashy.entry, 4)
    producer.enqueue_many([("echo", [i], {}) for i in range(5)])

    store.fail = True
    thread, done = _run_in_thread(worker, burst=True)
    time.sleep(2.0)
    assert thread.is_alive(), "the worker stopped on a store outage"
    # backing off from 0.05 s (jittered, doubling): a few rounds in 2 s, not one per 100 ms reclaim
    assert 2 <= store.calls_while_down <= 10, store.calls_while_down
    pauses = [e["retry_in_s"] for e in events if e.get("kindling") == "store_unavailable" and "retry_in_s" in e]
    assert len(pauses) >= 2 and pauses == sorted(pauses) and pauses[-1] > pauses[0], pauses

    store.fail = False
    thread.join(30)
    assert not thread.is_alive()
    assert store.records[crashy.id]["status"] == "dead"
    assert store.records[crashy.id]["error"]["type"] == "TooManyDeliveries"
    assert len(store.records) == 6 and all(r["status"] in ("succeeded", "dead") for r in store.records.values())
    assert sum(done["counts"].get(s, 0) for s in ("succeeded", "dead")) == 6, done
    _empty(producer.client, stream)


def test_deliveries_handed_back_use_no_attempts(valkey_url, stream, tasks):
    """Entries read while the store is down, or before their not_before, are handed back
    many times (visibility 100 ms) yet run as first attempts; real failures still count."""
    from kindling.producer.client import Call
    from kindling.valkey import StreamProducer, StreamWorker

    producer = StreamProducer(valkey_url, stream=stream)
    store = OutageStore()
    worker = StreamWorker(valkey_url, store=store, stream=stream, visibility_ms=100, block_ms=50, batch=10,
                          max_attempts=3, log=False, retry_delay=0)  # failures retried on reclaim
    ok = producer.enqueue("echo", 1)
    fails = producer.enqueue("always_fails", "boom")
    later = producer.enqueue_many([Call("echo", [2], delay=3)])[0]  # deferred for 3 s once the store is back

    store.fail = True
    thread, done = _run_in_thread(worker, burst=True)
    wait_until(lambda: store.calls_while_down >= 5, 20, "five hand-backs")
    store.fail = False
    thread.join(30)
    assert not thread.is_alive()
    records = store.records
    assert records[ok.id]["status"] == "succeeded" and records[ok.id]["attempts"] == 1
    assert records[later.id]["status"] == "succeeded" and records[later.id]["attempts"] == 1
    assert records[fails.id]["status"] == "dead" and records[fails.id]["attempts"] == 3
    assert records[fails.id]["error"]["message"] == "boom"
    _empty(producer.client, stream)


def test_a_drain_stops_when_the_store_is_down(valkey_url, stream, tasks, monkeypatch):
    from kindling.triggers.sqs.handler import LambdaWorker
    from kindling.valkey import StreamProducer

    producer = StreamProducer(valkey_url, stream=stream)
    producer.enqueue_many([("echo", [i], {}) for i in range(30)])
    store = OutageStore()
    store.fail = True
    handler = LambdaWorker(store=store, log=None)
    _configure_drain(monkeypatch, valkey_url, stream, KINDLING_DRAIN_BATCH="10")
    summary = handler({"kindling": "drain", "stream": stream}, FakeContext(60_000))
    assert summary["batches"] == 1 and summary["left_pending"] == 10, summary  # not the whole stream
    assert "memory store is down" in summary["store_unavailable"]
    assert producer.client.xlen(stream) == 30 and producer.client.xpending(stream, "kindling")["pending"] == 10


# -- g) one poison entry ---------------------------------------------------------------------------------

POISON = "[" * 40_000  # nesting deep enough to have broken a recursive JSON decoder


def _is_poison(body) -> bool:
    return (body.decode() if isinstance(body, bytes) else body) == POISON


def _poison_and_mates(producer, stream: str):
    """A fresh poison entry, one delivered 4 times already, and two valid jobs among them."""
    r = producer.client
    r.xgroup_create(stream, "kindling", id="0", mkstream=True)
    seasoned = r.xadd(stream, {"job": POISON}).decode()
    _delivered(r, stream, seasoned, 4)
    first = producer.enqueue("echo", 1)
    fresh = r.xadd(stream, {"job": POISON}).decode()
    second = producer.enqueue("echo", 2)
    return [seasoned, fresh], [first, second]


def _assert_poison_settled(r, stream: str, records: dict, poison: list[str], mates: list, error_type: str):
    for entry in poison:
        record = records[f"rejected#{entry}"]
        assert record["status"] == "rejected" and record["error"]["type"] == error_type, record["error"]
        assert record["raw"].startswith("[[[[")
    for sent in mates:
        assert records[sent.id]["status"] == "succeeded" and records[sent.id]["attempts"] == 1
    assert r.xlen(dead_key(stream)) == 0  # not a job that died: nothing to decode again there
    _empty(r, stream)


def test_a_poison_entry_is_rejected_and_acknowledged(valkey_url, stream, tasks, monkeypatch):
    from kindling.core import codec
    from kindling.stores.results import MemoryResultStore
    from kindling.triggers.sqs.handler import LambdaWorker
    from kindling.valkey import StreamProducer, StreamWorker

    producer = StreamProducer(valkey_url, stream=stream)
    poison, mates = _poison_and_mates(producer, stream)
    store = MemoryResultStore()
    worker = StreamWorker(valkey_url, store=store, stream=stream, visibility_ms=100, block_ms=50, log=False)
    thread, done = _run_in_thread(worker, burst=True)
    thread.join(20)
    assert not thread.is_alive() and done["counts"]["rejected"] == 2, done
    _assert_poison_settled(producer.client, stream, store.records, poison, mates, "InvalidJob")

    # the Lambda drain, with the cold path's decoder rather than orjson
    monkeypatch.setattr(codec, "loads", codec._loads)
    producer = StreamProducer(valkey_url, stream=f"{stream}:drain", client=producer.client)
    poison, mates = _poison_and_mates(producer, producer.stream)
    store = MemoryResultStore()
    handler = LambdaWorker(store=store, log=None)
    _configure_drain(monkeypatch, valkey_url, producer.stream, KINDLING_DRAIN_VISIBILITY_MS="100")
    event = {"kindling": "drain", "stream": producer.stream}
    summary = handler(event, FakeContext(60_000))
    assert summary["counts"] == {"rejected": 2, "succeeded": 2}, summary
    _assert_poison_settled(producer.client, producer.stream, store.records, poison, mates, "InvalidJob")


def test_an_entry_that_breaks_the_worker_is_rejected_alone(valkey_url, stream, tasks, monkeypatch):
    """Whatever a body does to the runner (a bug in kindling), the worker settles that entry
    alone: recorded rejected, acknowledged, batch-mates run. (The worker never decodes a body
    itself: the runner does, after the signature check.)"""
    from kindling.engine.runner import Runner
    from kindling.stores.results import MemoryResultStore
    from kindling.valkey import StreamProducer, StreamWorker

    begin = Runner.begin  # what Runner.run and the long-lived worker's phases both start with

    def begin_breaking_on_poison(self, deliveries, *args, **kwargs):
        if any(_is_poison(d.body) for d in deliveries):
            raise RecursionError("maximum recursion depth exceeded (a runner bug)")
        return begin(self, deliveries, *args, **kwargs)

    monkeypatch.setattr(Runner, "begin", begin_breaking_on_poison)
    producer = StreamProducer(valkey_url, stream=stream)
    poison, mates = _poison_and_mates(producer, stream)
    store = MemoryResultStore()
    worker = StreamWorker(valkey_url, store=store, stream=stream, visibility_ms=100, block_ms=50, log=False)
    thread, done = _run_in_thread(worker, burst=True)
    thread.join(20)
    assert not thread.is_alive() and "counts" in done, "the worker died on a poison entry"
    assert done["counts"] == {"rejected": 2, "succeeded": 2}, done
    _assert_poison_settled(producer.client, stream, store.records, poison, mates, "RecursionError")


# -- producer limits, Valkey results, --processes -------------------------------------------------


def test_maxlen_refuses_instead_of_trimming(valkey_url, stream):
    from kindling.valkey import StreamFull, StreamProducer

    producer = StreamProducer(valkey_url, stream=stream, maxlen=10)
    producer.enqueue_many([("noop", [], {})] * 8)
    with pytest.raises(StreamFull, match="maxlen=10") as info:
        producer.enqueue_many([("noop", [], {})] * 3)
    assert len(info.value.failed) == 3 and info.value.sent == []
    assert producer.client.xlen(stream) == 8  # nothing trimmed, nothing half-sent
    producer.enqueue("noop")
    producer.enqueue("noop")
    with pytest.raises(StreamFull):
        producer.enqueue("noop")


def test_valkey_results_waiters_block_and_processes_flag(valkey_url, stream):
    import threading

    from kindling.valkey import StreamProducer, ValkeyResultStore

    producer = StreamProducer(valkey_url, stream=stream)
    store = ValkeyResultStore(valkey_url, ttl_s=60)  # the worker's store (default prefix)
    first = producer.enqueue("sleep", 300)
    waited = {}

    def waiter():
        t0 = time.monotonic()
        waited["record"] = store.wait(first.id, timeout=30)
        waited["s"] = time.monotonic() - t0

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.2)
    sent = producer.enqueue_many([("echo", [i], {}) for i in range(200)] + [("always_fails", [], {})])
    # table is not needed with KINDLING_RESULTS=valkey; two processes from one command
    argv = [sys.executable, "-m", "kindling.tools.cli", "worker", "--valkey", valkey_url, "--stream", stream,
            "--tasks", str(TASKS), "--burst", "--processes", "2"]
    env = dict(os.environ, KINDLING_LOG="0", KINDLING_RESULTS="valkey", KINDLING_VALKEY_BLOCK_MS="200",
               KINDLING_VALKEY_VISIBILITY_MS="1000", KINDLING_VALKEY_BATCH="20",  # > one batch's run time
               KINDLING_RETRY_DELAY="0")  # the failing job retried on reclaim
    env.pop("KINDLING_TABLE", None)
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 2, done.stdout  # one summary per process
    assert sum(_counts(line).get("succeeded", 0) for line in lines) == 201
    thread.join(5)
    assert not thread.is_alive()
    assert waited["record"]["status"] == "succeeded" and waited["record"]["result"] == "300"
    assert waited["s"] < 30  # woken by the worker's push, not by the timeout
    assert store.wait(first.id, timeout=1)["id"] == first.id  # a second waiter is not starved
    statuses = store.get_statuses([s.id for s in sent])
    assert sum(v == "succeeded" for v in statuses.values()) == 200
    assert statuses[sent[-1].id] == "dead"
    _empty(producer.client, stream)


# -- the Valkey password and ps ----------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.fixture
def secret_url(valkey_url):
    """The server's URL for a user of its own with a password: (url, password)."""
    from kindling.valkey import connect

    user, password = f"user-{uuid.uuid4().hex[:6]}", f"pw-{uuid.uuid4().hex}"
    admin = connect(valkey_url)
    admin.execute_command("ACL", "SETUSER", user, "on", f">{password}", "~*", "&*", "+@all")
    yield valkey_url.replace("redis://", f"redis://{user}:{password}@", 1), password
    admin.execute_command("ACL", "DELUSER", user)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "kindling.tools.cli", "worker", *args, "--tasks", str(TASKS)]


def _succeeded(stdout: str) -> int:
    """Succeeded jobs summed over the summary lines of a worker and its --processes children."""
    lines = [line for line in stdout.strip().splitlines() if line != "no jobs"]
    return sum(_counts(line).get("succeeded", 0) for line in lines)


def _cli_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("KINDLING_VALKEY_URL", "KINDLING_TABLE")}
    return dict(env, KINDLING_LOG="0", KINDLING_RESULTS="valkey", KINDLING_VALKEY_BLOCK_MS="200", **extra)


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc")
def test_the_valkey_password_stays_off_command_lines(valkey_url, secret_url, stream):
    from kindling.valkey import StreamProducer, ValkeyResultStore

    url, password = secret_url
    sent = StreamProducer(url, stream=stream).enqueue_many([("echo", [i], {}) for i in range(20)])
    proc = subprocess.Popen(_cli("--valkey", url, "--stream", stream, "--processes", "3"), cwd=ROOT,
                            env=_cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        children = wait_until(lambda: (c := _children(proc.pid)) and len(c) == 2 and c, 30, "two worker children")
        for child in children:
            assert password not in _cmdline(child)
            assert password not in _cmdline(proc.pid)  # it replaced itself before starting them
        store = ValkeyResultStore(valkey_url)
        wait_until(lambda: len(store.get_statuses([s.id for s in sent])) == 20, 30, "the jobs, run with the password")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "holds a password" in err  # told where to put it instead
    assert _succeeded(out) == 20


def test_the_valkey_url_from_a_file_or_the_environment(valkey_url, secret_url, stream, tmp_path):
    from kindling.valkey import StreamProducer

    url, password = secret_url
    path = tmp_path / "valkey-url"
    path.write_text(url + "\n")
    path.chmod(0o600)
    sent = StreamProducer(url, stream=stream).enqueue_many([("echo", [i], {}) for i in range(10)])
    done = subprocess.run(_cli("--valkey-url-file", str(path), "--stream", stream, "--processes", "2", "--burst"),
                          cwd=ROOT, env=_cli_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "password" not in done.stderr
    assert _succeeded(done.stdout) == len(sent)

    sent = StreamProducer(url, stream=stream).enqueue_many([("echo", [i], {}) for i in range(10)])
    done = subprocess.run(_cli("--stream", stream, "--burst"), cwd=ROOT, env=_cli_env(KINDLING_VALKEY_URL=url),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "password" not in done.stderr, done.stderr
    assert _succeeded(done.stdout) == 10


def test_orjson_loads_when_the_worker_is_idle_not_in_a_burst(valkey_url, stream, tasks, monkeypatch):
    """The orjson import (~40 ms) is a one-off: a burst of a few jobs (a drain) never pays it,
    and a long-lived worker pays it when it first finds nothing to do."""
    import time

    from kindling.core import codec
    from kindling.stores.results import MemoryResultStore
    from kindling.valkey import StreamProducer, StreamWorker

    StreamProducer(valkey_url, stream=stream).enqueue_many([("noop", [], {})] * 3)
    monkeypatch.setattr(codec, "_orjson", None)
    monkeypatch.setattr(codec, "loads", codec._loads)
    monkeypatch.setattr(codec, "dumps", codec._dumps)
    store = MemoryResultStore()
    counts = StreamWorker(valkey_url, store=store, stream=stream, block_ms=50, log=False).run(burst=True)
    assert counts == {"succeeded": 3} and codec._orjson is None

    worker = StreamWorker(valkey_url, store=store, stream=stream, block_ms=50, log=False)
    thread, done = _run_in_thread(worker)
    try:
        deadline = time.monotonic() + 10
        while codec._orjson is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert codec._orjson is True and codec.loads is not codec._loads
    finally:
        worker.stop()
        thread.join(10)
