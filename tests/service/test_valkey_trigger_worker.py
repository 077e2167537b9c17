"""The stream worker's long jobs, delayed jobs and housekeeping, on a real valkey-server.

Run: .venv/bin/python -m pytest tests/service/test_valkey_trigger_worker.py -q
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from kindling.core.valkey.keys import dead_key, scheduled_key
from support import wait_until

pytestmark = pytest.mark.valkey


@pytest.fixture
def stream() -> str:
    return f"vt:{uuid.uuid4().hex[:8]}"


class Ledger:
    """Tasks that count their runs, and one memory store for every worker."""

    def __init__(self):
        from kindling.core.registry import Registry
        from kindling.stores.results import MemoryResultStore

        self.runs: dict[str, int] = {}
        self.lock = threading.Lock()
        self.store = MemoryResultStore()
        self.registry = Registry()
        self.log: list[dict] = []

        @self.registry.task(name="slow")
        def slow(key: str, ms: float) -> str:
            with self.lock:
                self.runs[key] = self.runs.get(key, 0) + 1
            time.sleep(ms / 1000)
            return key

        @self.registry.task(name="fails", max_attempts=1)
        def fails(key: str) -> None:
            raise RuntimeError(f"{key} fails")

    def worker(self, url, stream, **options):
        from kindling.valkey import StreamWorker

        worker = StreamWorker(url, store=self.store, registry=self.registry, stream=stream, **options)
        worker.runner.log = self.log.append
        return worker


def _in_thread(fn, **kwargs):
    out: dict = {}
    thread = threading.Thread(target=lambda: out.update(result=fn(**kwargs)), daemon=True)
    thread.start()
    return thread, out



# -- a batch that outlasts the visibility time ------------------------------------------------------


def _long_batch(url, stream, heartbeat: bool):
    """Worker A reads 40 jobs of 1.5 s (run at once, 40 threads) with a visibility time of
    1 s; worker B, idle beside it, reclaims whatever A's claim lets go of."""
    from kindling.valkey import StreamProducer

    ledger = Ledger()
    producer = StreamProducer(url, stream=stream)
    sent = producer.enqueue_many([("slow", [str(i), 1500], {}) for i in range(40)])
    a = ledger.worker(url, stream, consumer="a", batch=40, visibility_ms=1000, block_ms=100, threads=40,
                      heartbeat=heartbeat)
    b = ledger.worker(url, stream, consumer="b", batch=40, visibility_ms=1000, block_ms=100, threads=40,
                      heartbeat=heartbeat)
    a.ensure_group()
    ta, _ = _in_thread(a.run, burst=True)
    wait_until(lambda: producer.client.xpending(stream, "kindling")["pending"] == 40, 10, "A holding all 40")
    tb, _ = _in_thread(b.run, burst=True)
    ta.join(30)
    tb.join(30)
    assert not ta.is_alive() and not tb.is_alive()
    assert {s.id for s in sent} == set(ledger.store.records)
    return ledger, a


def test_a_live_worker_keeps_its_claim_on_a_long_batch(valkey_url, stream):
    ledger, a = _long_batch(valkey_url, stream, heartbeat=True)
    assert sorted(ledger.runs.values()) == [1] * 40  # each ran once: B never took A's entries
    assert all(r["status"] == "succeeded" and r["attempts"] == 1 for r in ledger.store.records.values())
    assert a.heartbeat.beats >= 3  # every third of the visibility time, for 1.5 s


def test_without_the_heartbeat_the_same_batch_runs_twice(valkey_url, stream):
    """What the heartbeat prevents: the batch outlives the visibility time and is run again."""
    ledger, _ = _long_batch(valkey_url, stream, heartbeat=False)
    assert sum(n > 1 for n in ledger.runs.values()) > 0, ledger.runs


def test_the_heartbeat_leaves_entries_another_consumer_took_over(valkey_url, stream):
    from kindling.shared.valkey.connection import connect
    from kindling.triggers.valkey.heartbeat import Heartbeat
    from kindling.valkey import StreamProducer

    producer = StreamProducer(valkey_url, stream=stream)
    r = producer.client
    first, second = producer.enqueue_many([("slow", ["x", 1], {})] * 2)
    r.xgroup_create(stream, "kindling", id="0")
    r.xreadgroup("kindling", "a", {stream: ">"}, count=2)
    r.xclaim(stream, "kindling", "b", 0, [second.entry], justid=True)  # taken over: a stalled
    time.sleep(0.05)
    beat = Heartbeat(lambda: connect(valkey_url), stream, "kindling", 1.0)
    assert beat.beat("a", [first.entry, second.entry]) == 1
    held = {p["message_id"].decode(): (p["consumer"].decode(), p["time_since_delivered"], p["times_delivered"])
            for p in r.xpending_range(stream, "kindling", "-", "+", 10)}
    assert held[first.entry][0] == "a" and held[first.entry][1] < 40 and held[first.entry][2] == 1
    assert held[second.entry][0] == "b"  # not taken back


# -- delayed jobs ---------------------------------------------------------------------------------------


def test_a_delayed_job_waits_in_the_scheduled_set_and_runs_once_when_due(valkey_url, stream):
    from kindling.core.envelope import encode_job, new_job, now_ms
    from kindling.producer.client import Call
    from kindling.valkey import StreamProducer

    ledger = Ledger()
    producer = StreamProducer(valkey_url, stream=stream)
    r = producer.client
    t0 = now_ms()
    (later,) = producer.enqueue_many([Call("slow", ["later", 1], delay=2)])
    # on the stream: the first worker to read it records it scheduled and moves it to the set
    assert later.entry is not None and r.xlen(stream) == 1 and r.zcard(scheduled_key(stream)) == 0
    # a raw envelope with a not_before, straight on the stream: the same
    legacy = new_job("slow", ["legacy", 1], not_before=t0 + 2000)
    r.xadd(stream, {"job": encode_job(legacy)})
    # visibility 300 ms: a delay of more than 6 times it, which reclaims used to run out
    worker = ledger.worker(valkey_url, stream, visibility_ms=300, block_ms=100, max_attempts=3)
    worker.run(burst=True)
    records = ledger.store.records
    for job_id in (later.id, legacy.id):
        assert records[job_id]["status"] == "succeeded" and records[job_id]["attempts"] == 1
        assert records[job_id]["started_at"] >= t0 + 2000
    assert ledger.runs == {"later": 1, "legacy": 1}
    assert r.zcard(scheduled_key(stream)) == 0 and r.xlen(stream) == 0
    assert not [e for e in ledger.log if e.get("kindling") == "deferred"]


def test_a_delayed_job_goes_on_the_stream_and_its_first_reader_records_it_scheduled(valkey_url, stream):
    """So ``kindling jobs show`` says when it is due from the start; it then waits in the
    scheduled set, due at its not_before, without an attempt."""
    from kindling.producer.client import Call
    from kindling.valkey import StreamProducer

    ledger = Ledger()
    producer = StreamProducer(valkey_url, stream=stream)
    r = producer.client
    (later,) = producer.enqueue_many([Call("slow", ["later", 1], delay=3600)])
    assert r.xlen(stream) == 1 and r.zcard(scheduled_key(stream)) == 0
    worker = ledger.worker(valkey_url, stream, block_ms=50)
    [o] = worker.process(worker.fetch(10))
    assert (o.status, ledger.runs) == ("deferred", {})
    record = ledger.store.records[later.id]
    assert (record["status"], record["attempts"]) == ("scheduled", 0)
    [(_, due)] = r.zrangebyscore(scheduled_key(stream), "-inf", "+inf", withscores=True)
    assert record["due_at"] == int(due) and r.xlen(stream) == 0


# -- housekeeping ----------------------------------------------------------------------------------------


def test_the_dead_stream_is_capped_and_the_trimmed_count_logged(valkey_url, stream):
    from kindling.valkey import StreamProducer

    ledger = Ledger()
    producer = StreamProducer(valkey_url, stream=stream)
    producer.enqueue_many([("fails", [str(i)], {}) for i in range(600)])
    worker = ledger.worker(valkey_url, stream, batch=100, block_ms=50, dead_maxlen=100)
    counts = worker.run(burst=True)
    assert counts == {"dead": 600}
    length = producer.client.xlen(dead_key(stream))
    assert 100 <= length <= 200, length  # MAXLEN ~: whole nodes (100 entries) are trimmed
    trimmed = [e for e in ledger.log if e.get("kindling") == "dead_trimmed"]
    assert trimmed and all(e["maxlen"] == 100 and e["stream"] == dead_key(stream) for e in trimmed)
    assert sum(e["trimmed"] for e in trimmed) == 600 - length
    assert len(ledger.store.records) == 600  # the records are all kept


def test_consumers_holding_nothing_are_removed(valkey_url, stream):
    from kindling.valkey import StreamProducer

    ledger = Ledger()
    producer = StreamProducer(valkey_url, stream=stream)
    r = producer.client
    producer.enqueue_many([("slow", [str(i), 1], {}) for i in range(3)])
    r.xgroup_create(stream, "kindling", id="0")
    r.execute_command("XGROUP CREATECONSUMER", stream, "kindling", "gone-empty")
    r.xreadgroup("kindling", "gone-holding", {stream: ">"}, count=1)  # a dead consumer's entry
    worker = ledger.worker(valkey_url, stream, consumer="me", visibility_ms=60_000, block_ms=50)
    worker.ensure_group()
    r.xreadgroup("kindling", "me", {stream: ">"}, count=1)  # "me" holds one too
    time.sleep(0.1)
    assert worker.forget_consumers(stale_ms=50) == 1  # gone-empty only
    names = {c["name"].decode() for c in r.xinfo_consumers(stream, "kindling")}
    assert names == {"gone-holding", "me"}

    # a worker that stops with nothing pending leaves no consumer behind (its entries reclaimable now)
    held = [p["message_id"] for p in r.xpending_range(stream, "kindling", "-", "+", 10)]
    r.xclaim(stream, "kindling", "me", 0, held, idle=10 ** 7, justid=True)
    assert worker.run(burst=True) == {"succeeded": 3}
    names = {c["name"].decode() for c in r.xinfo_consumers(stream, "kindling")}
    assert names == {"gone-holding"}  # holds nothing now, but idle for less than STALE_CONSUMER_MS
