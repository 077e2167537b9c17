"""What the stream worker holds at once is bounded by its ``chunk``, whatever its read size.

A read of many entries is run ``chunk`` at a time: the rest wait undecoded (held by the
heartbeat), and a batch settled lets go of its outcomes. Counted, not timed: the decoded
entries alive (``Outcome`` objects, after a collection) whenever the store is written.

Run: .venv/bin/python -m pytest tests/service/test_valkey_worker_memory.py -q
"""

from __future__ import annotations

import gc
import threading
import uuid

import pytest

pytestmark = pytest.mark.valkey

JOBS, READ, CHUNK = 1200, 600, 100


@pytest.fixture
def stream() -> str:
    return f"vm:{uuid.uuid4().hex[:8]}"


def _outcomes_alive() -> int:
    from kindling.core.batch import Outcome

    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is Outcome)


class CountingStore:
    """A memory store that counts the decoded entries alive at each write (``concurrency``
    1: the store of one connection, with which the worker admits a read-ahead batch later)."""

    def __init__(self, concurrency: int | None):
        from kindling.stores.results import MemoryResultStore

        self.inner = MemoryResultStore()
        if concurrency is not None:
            self.concurrency = concurrency
        self.alive_at_writes: list[int] = []
        self.before = _outcomes_alive()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def begin_write(self, records, **options):
        self.alive_at_writes.append(_outcomes_alive() - self.before)
        return self.inner.begin_write(records, **options)


def _worker(url, stream, store, registry, **options):
    from kindling.valkey import StreamWorker

    worker = StreamWorker(url, store=store, registry=registry, stream=stream, batch=READ, max_batch=READ,
                          block_ms=100, threads=0, log=False, **options)
    worker.chunk = CHUNK  # after construction: a worker without the setting ignores it (and fails below)
    return worker


def _registry(runs: list[str], on_run=None):
    from kindling.core.registry import Registry

    registry = Registry()

    @registry.task(name="count")
    def count(key: str) -> None:
        runs.append(key)
        if on_run is not None:
            on_run()

    return registry


@pytest.mark.parametrize("concurrency", [None, 1], ids=["read-ahead admitted", "one-connection store"])
def test_a_large_read_is_run_chunk_by_chunk_and_settled_batches_let_go(valkey_url, stream, concurrency):
    from kindling.valkey import StreamProducer

    runs: list[str] = []
    StreamProducer(valkey_url, stream=stream).enqueue_many([("count", [str(i)], {}) for i in range(JOBS)])
    store = CountingStore(concurrency)
    worker = _worker(valkey_url, stream, store, _registry(runs))
    reads: list[int] = []
    fetch = worker.port.fetch
    worker.port.fetch = lambda *a, **k: reads.append(len(got := fetch(*a, **k))) or got

    counts = worker.run(burst=True)

    assert counts == {"succeeded": JOBS} and sorted(runs, key=int) == [str(i) for i in range(JOBS)]
    assert max(reads) == READ  # the reads are as large as the read size says
    # The batch running, the next one admitted beside it and the one before it (until its
    # settlement, made beside the running one): three chunks at most, never a read's worth.
    assert max(store.alive_at_writes) <= 3 * CHUNK, store.alive_at_writes
    assert len(store.alive_at_writes) >= JOBS // CHUNK


def test_entries_read_but_not_yet_run_are_handed_back_when_the_worker_stops(valkey_url, stream):
    from kindling.valkey import StreamProducer

    runs: list[str] = []
    holder: dict = {}
    StreamProducer(valkey_url, stream=stream).enqueue_many([("count", [str(i)], {}) for i in range(JOBS)])
    registry = _registry(runs, on_run=lambda: holder["a"].stop())
    a = holder["a"] = _worker(valkey_url, stream, CountingStore(None), registry, consumer="a",
                              visibility_ms=600_000)
    a.run(burst=True)
    assert 0 < len(runs) <= 2 * CHUNK  # the chunk running when it stopped (and one admitted beside it)

    # What it had read beyond them was given back at once: pending, but idle past the
    # visibility time, so another consumer takes it now and runs every job once.
    pending = a.client.xpending_range(stream, a.group, min="-", max="+", count=JOBS)
    assert pending and all(p["time_since_delivered"] >= 600_000 for p in pending)
    holder["a"] = type("NoStop", (), {"stop": staticmethod(lambda: None)})  # b's runs stop nothing
    b = _worker(valkey_url, stream, CountingStore(None), registry, consumer="b", visibility_ms=600_000)
    done: dict = {}
    thread = threading.Thread(target=lambda: done.update(counts=b.run(burst=True)), daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    assert sorted(runs, key=int) == [str(i) for i in range(JOBS)]
