"""The long-lived stream worker checks its next batch while this one is written (and, with
its jobs in threads, reads and checks it while this one runs), and keeps every guarantee of
the one-batch-at-a-time loop: records only move forward, a job already succeeded is
skipped, a read that fails hands its batch back, and no entry is acknowledged before its
record is written. Against a real valkey-server (tests/support/valkey.py).

Run: .venv/bin/pytest tests/service/test_valkey_pipeline.py -q -m valkey
"""

from __future__ import annotations

import time
import uuid
from collections import Counter

import pytest
from kindling.core.errors import StoreUnavailable
from kindling.stores.results import MemoryResultStore

pytestmark = pytest.mark.valkey

THREADED = 4  # sync jobs in threads: the next batch is read and checked while one runs


@pytest.fixture
def stream() -> str:
    return f"pipe:{uuid.uuid4().hex[:8]}"


class Timeline(MemoryResultStore):
    """A memory store that logs, in order, when each read and write is sent and when its reply
    is read. Like a remote store, a read is answered as of when it was sent; a write counts
    from when its reply is read (a worker may rely on it no sooner), and at that moment the
    entries it records must still be pending: none acknowledged before its record is written.

    ``down_from_write``: the write whose reply is read n-th (0-based) fails, and so does every
    call for ``down_s`` seconds after it (an outage starting then).
    """

    def __init__(self, valkey, stream: str, down_from_write: int | None = None, down_s: float = 0.3,
                 fail_read: int | None = None):
        super().__init__()
        self.valkey, self.stream = valkey, stream
        self.entries: dict[str, str] = {}  # job id -> stream entry
        self.acked_before_written: list[str] = []
        self.down_from_write, self.down_s, self.down_until = down_from_write, down_s, 0.0
        self.fail_read = fail_read
        self.read_replies = self.write_replies = 0

    def _down(self) -> bool:
        return time.monotonic() < self.down_until

    def begin_read(self, job_ids, *, deadline=None):
        ids = list(job_ids)
        self.events.append(("read sent", ids))
        failing = self._down() or self.read_replies == self.fail_read
        self.read_replies += 1
        states = None if failing else self.read_states(ids)

        def collect():
            self.events.append(("read collected", ids))
            if states is None:
                raise StoreUnavailable("the read failed (test)")
            return states

        return collect

    def begin_write(self, records, *, deadline=None):
        records = list(records)
        ids = [r["id"] for r in records]
        self.events.append(("write sent", ids))

        def collect():
            self.events.append(("write collected", ids))
            pending = {e["message_id"].decode() for e in self.valkey.xpending_range(
                self.stream, "kindling", min="-", max="+", count=10_000)}
            self.acked_before_written += [i for i in ids if self.entries.get(i) not in pending]
            n, self.write_replies = self.write_replies, self.write_replies + 1
            if n == self.down_from_write:
                self.down_until = time.monotonic() + self.down_s
            if self._down():
                raise StoreUnavailable("the write failed (test)")
            return self.write(records)

        return collect


def _setup(url: str, stream: str, jobs: list, threads: int = 0, task=None, **store_options):
    from kindling.core.envelope import encode_job, new_job
    from kindling.core.registry import Registry
    from kindling.valkey import StreamWorker, connect

    runs: Counter = Counter()
    registry = Registry()
    registry.task(name="count")(task or (lambda key: runs.update([key])))
    client = connect(url)
    store = Timeline(client, stream, **store_options)
    client.xgroup_create(stream, "kindling", id="0", mkstream=True)
    for job in jobs:
        job = job if not isinstance(job, str) else new_job("count", [job], job_id=job)
        store.entries[job.id] = client.xadd(stream, {"job": encode_job(job)}).decode()
    worker = StreamWorker(url, registry=registry, store=store, stream=stream, batch=5, max_batch=5,
                          block_ms=50, visibility_ms=200, log=False, threads=threads)
    return worker, store, runs, client


def _batches(store: Timeline) -> list[frozenset]:
    """The ids of each batch, in order: what each write recorded."""
    return [frozenset(ids) for kind, ids in store.events if kind == "write sent"]


def _at(store: Timeline, kind: str, ids) -> int:
    return next(n for n, (k, i) in enumerate(store.events) if k == kind and frozenset(i) == frozenset(ids))


def _settled(client, stream: str) -> None:
    assert client.xlen(stream) == 0 and client.xpending(stream, "kindling")["pending"] == 0


@pytest.mark.parametrize(("threads", "before"), [
    (0, "write collected"),  # the next batch is read and checked before this one's write is read back
    (THREADED, "write sent"),  # with threads, before that write even goes out: while the jobs run
])
def test_batch_n_plus_1_is_read_and_checked_early(valkey_url, stream, threads, before):
    keys = [f"job-{i:02d}" for i in range(20)]
    worker, store, runs, client = _setup(valkey_url, stream, keys, threads=threads)
    counts = worker.run(burst=True)
    assert counts == {"succeeded": 20} and runs == Counter(keys)
    batches = _batches(store)
    assert len(batches) == 4, batches
    for this, following in zip(batches, batches[1:], strict=False):
        assert _at(store, "read sent", following) < _at(store, before, this), store.events
    assert store.acked_before_written == []
    _settled(client, stream)


@pytest.mark.parametrize("threads", [0, THREADED])
def test_a_job_in_two_batches_in_a_row_runs_once(valkey_url, stream, threads):
    """The second delivery's check goes out before the first one's record is written (with
    threads, while the first one still runs): its id is read again after that write, so the
    job is skipped, not run twice."""
    keys = [f"job-{i:02d}" for i in range(9)]
    worker, store, runs, client = _setup(valkey_url, stream, keys[:5] + ["job-04"] + keys[5:], threads=threads)
    counts = worker.run(burst=True)
    assert counts == {"succeeded": 9, "skipped": 1}, counts
    assert runs == Counter(keys)
    assert store.records["job-04"]["status"] == "succeeded" and store.records["job-04"]["attempts"] == 1
    assert store.acked_before_written == []
    _settled(client, stream)


def test_a_read_that_fails_hands_its_batch_back_and_it_runs_later(valkey_url, stream):
    keys = [f"job-{i:02d}" for i in range(15)]
    worker, store, runs, client = _setup(valkey_url, stream, keys, fail_read=1)  # the second batch's check
    counts = worker.run(burst=True)
    assert runs == Counter(keys), runs  # each run once: the handed-back batch did not run until read
    assert counts["succeeded"] == 15 and counts["deferred"] == 5, counts
    assert all(r["status"] == "succeeded" and r["attempts"] == 1 for r in store.records.values())
    assert store.acked_before_written == []
    _settled(client, stream)


@pytest.mark.parametrize("threads", [0, THREADED])
def test_when_a_write_fails_the_batch_already_checked_is_handed_back_unrun(valkey_url, stream, threads):
    """The store goes down as batch 1's write is read back: batch 2, checked while the store
    was up (with threads, read ahead while batch 1 ran), is not run into the outage (it would
    run again after its own write failed)."""
    keys = [f"job-{i:02d}" for i in range(15)]
    worker, store, runs, client = _setup(valkey_url, stream, keys, threads=threads, down_from_write=0, down_s=0.3)
    counts = worker.run(burst=True)
    first = sorted(_batches(store)[0])
    assert runs == Counter(keys + first), runs  # only the batch whose record was lost ran twice
    assert counts["succeeded"] == 15, counts
    assert store.acked_before_written == []
    assert all(r["status"] == "succeeded" for r in store.records.values()) and len(store.records) == 15
    _settled(client, stream)


def test_a_record_that_may_not_be_replaced_is_left_and_its_entry_settled(valkey_url, stream):
    """Records only move forward: a job already succeeded is skipped, one already dead is not run."""
    keys = [f"job-{i:02d}" for i in range(12)]
    worker, store, runs, client = _setup(valkey_url, stream, keys)
    store.records["job-06"] = {"id": "job-06", "status": "succeeded", "attempts": 1, "result": "before"}
    store.records["job-07"] = {"id": "job-07", "status": "dead", "attempts": 3}
    counts = worker.run(burst=True)
    assert runs == Counter(k for k in keys if k not in ("job-06", "job-07"))
    assert store.records["job-06"]["result"] == "before" and store.records["job-07"]["status"] == "dead"
    assert counts == {"succeeded": 10, "skipped": 1, "dead": 1}, counts
    _settled(client, stream)


# -- jobs in threads: the next batch is read and checked while this one runs ----------------


def test_threaded_a_batch_read_ahead_when_the_worker_stops_is_given_back_unrun(valkey_url, stream):
    """SIGTERM while batch 1 runs and batch 2 has been read ahead: batch 1 is finished and
    acknowledged, batch 2 is not started and goes back to the stream's pending list with its
    delivery uncounted and reclaimable at once; the next worker runs it."""
    from kindling.valkey import StreamWorker

    keys = [f"job-{i:02d}" for i in range(10)]
    runs: Counter = Counter()
    first: dict = {}

    def count(key: str) -> None:
        if first:  # the first worker: stopped once batch 2's check has gone out
            store = first["store"]
            until = time.monotonic() + 5
            while not any(kind == "read sent" and "job-05" in ids for kind, ids in store.events):
                assert time.monotonic() < until, store.events
                time.sleep(0.005)
            first["worker"].stop()
        runs.update([key])

    worker, store, _, client = _setup(valkey_url, stream, keys, threads=THREADED, task=count)
    first.update(worker=worker, store=store)
    counts = worker.run(burst=True)
    assert runs == Counter(keys[:5]), runs
    assert counts == {"succeeded": 5, "deferred": 5}, counts
    pending = client.xpending_range(stream, "kindling", min="-", max="+", count=100)
    assert len(pending) == 5 and all(p["times_delivered"] == 0 for p in pending), pending
    assert all(p["time_since_delivered"] >= 200 for p in pending), pending  # reclaimable now

    first.clear()
    later = StreamWorker(valkey_url, registry=worker.runner.registry, store=store, stream=stream, batch=5,
                         max_batch=5, block_ms=50, visibility_ms=200, log=False, threads=THREADED)
    assert later.run(burst=True) == {"succeeded": 5}
    assert runs == Counter(keys), runs
    assert store.acked_before_written == []
    _settled(client, stream)


def test_threaded_a_runner_bug_admitting_a_batch_read_ahead_waits_for_the_next_round(valkey_url, stream, monkeypatch):
    """A bug in admission is contained by running the batch's entries one by one: not while
    the batch read ahead waits beside a running one (that would hold up the running batch's
    waiter and its limits), but in the next round, where it is admitted again."""
    from kindling.engine.runner import Runner

    keys = [f"job-{i:02d}" for i in range(10)]
    spans: dict = {}

    def count(key: str) -> None:
        start = time.monotonic()
        time.sleep(0.1)
        spans[key] = (start, time.monotonic())

    original, failed = Runner.begin, []

    def begin(self, deliveries, *args, in_flight=(), **kwargs):
        if in_flight and not failed:  # the first batch read ahead
            failed.append(len(deliveries))
            raise RuntimeError("kindling bug (test)")
        return original(self, deliveries, *args, in_flight=in_flight, **kwargs)

    monkeypatch.setattr(Runner, "begin", begin)
    worker, store, _, client = _setup(valkey_url, stream, keys, threads=THREADED, task=count)
    counts = worker.run(burst=True)
    assert failed == [5] and counts == {"succeeded": 10}, (failed, counts)
    first_done = max(spans[k][1] for k in keys[:5])
    assert all(spans[k][0] >= first_done for k in keys[5:]), spans  # batch 2 ran after batch 1, not beside it
    assert store.acked_before_written == []
    _settled(client, stream)
