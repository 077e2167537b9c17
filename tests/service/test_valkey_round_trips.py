"""Round trips per batch of the long-lived stream worker, counted on the clients.

A round trip to Valkey a hop away costs a millisecond or more; a batch of 500 no-ops costs
about 20 ms of Python. So the number of round trips a batch waits for, on the thread that
runs its jobs, is what a worker loses to the network (infra/bench/scenarios/network.py measures it).
The steady state is counted here deterministically: the difference between a run of 2n
batches and one of n, so that start-up (the group's creation, the first blocking read) and
the end (the idle check, the consumer forgotten) cancel out. Before the stream worker
overlapped them, a batch of no-ops waited for five round trips on its jobs' thread: the
stream read (scheduled jobs moved, idle entries reclaimed), the new entries' read, the
duplicate check, the previous batch's acknowledgement, its own write.

Run: .venv/bin/pytest tests/service/test_valkey_round_trips.py -q -m valkey
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter

import pytest

pytestmark = pytest.mark.valkey

BATCH = 25


class Counting:
    """Wraps a kindling Valkey client's round trips (``_run``: one write of commands, their
    replies read): each counted with the thread that waited for it and its first command."""

    def __init__(self, client, where: str, trips: list):
        self.original, self.where, self.trips = client._run, where, trips
        client._run = self

    def __call__(self, out, count, what, retry, deadline):
        waiter = "jobs' thread" if threading.current_thread() is threading.main_thread() else "other"
        self.trips.append((self.where, waiter, _first_command(what)))
        return self.original(out, count, what, retry, deadline)


def _first_command(what: str) -> str:
    """``XREADGROUP`` or ``a pipeline of 3 commands (XACK, ...)`` -> the first command's name."""
    return what.split("(", 1)[1].split(",")[0].rstrip(")") if "(" in what else what


async def _async_noop() -> None:
    pass


def _run(url: str, batches: int, kind: str) -> tuple[Counter, Counter, list]:
    """Run ``batches`` batches of no-ops (``kind``: "sync", one by one on the worker's
    thread, or "async", on its event loop); the round trips counted by thread and by client."""
    from kindling.core.envelope import encode_job, new_job
    from kindling.core.registry import Registry
    from kindling.valkey import StreamWorker, ValkeyResultStore, connect

    stream = f"trips:{uuid.uuid4().hex[:8]}"
    registry = Registry()
    registry.task(name="noop")(_async_noop if kind == "async" else lambda: None)
    setup = connect(url)
    pipe = setup.pipeline(transaction=False)
    for _ in range(batches * BATCH):
        pipe.xadd(stream, {"job": encode_job(new_job("noop", []))})
    pipe.execute()
    store = ValkeyResultStore(url, prefix=f"trips-{uuid.uuid4().hex[:6]}")
    worker = StreamWorker(url, registry=registry, store=store, stream=stream, batch=BATCH, max_batch=BATCH,
                          block_ms=50, heartbeat=False, log=False, concurrency=10)
    trips: list = []
    Counting(worker.client, "stream", trips)
    Counting(store.client, "store", trips)
    counts = worker.run(burst=True)
    assert counts == {"succeeded": batches * BATCH}, counts
    assert setup.xlen(stream) == 0 and setup.xpending(stream, "kindling")["pending"] == 0
    return Counter(w for _, w, _ in trips), Counter(where for where, _, _ in trips), trips


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_batch_waits_for_one_round_trip_its_write(valkey_url, kind):
    """Per batch: the stream read (the previous batch's acknowledgement, scheduled jobs
    moved, idle entries reclaimed and new ones read, in one pipeline) and the duplicate
    check go out on a thread of their own while the batch before is executed; the thread
    that runs the jobs waits only for the write of their records (which must be read back
    before the next batch may run: no batch runs into a store outage). (With jobs in threads, the
    worker's thread is their waiter, and reads ahead while they run:
    tests/service/test_valkey_pipeline.py.)"""
    _run(valkey_url, 1, kind)  # the server's script cache warmed: no NOSCRIPT in either run
    small, small_where, _ = _run(valkey_url, 4, kind)
    large, large_where, large_trips = _run(valkey_url, 8, kind)
    per_batch = {k: (large[k] - small[k]) / 4 for k in set(large) | set(small)}
    where = {k: (large_where[k] - small_where[k]) / 4 for k in set(large_where) | set(small_where)}
    detail = (per_batch, where, large_trips)
    assert per_batch.get("jobs' thread", 0) == 1, detail
    assert where == {"stream": 1, "store": 2}, detail  # acknowledge + read; check, write



def _read_sizes(url: str, jobs: int, **options) -> tuple[list[int], object]:
    """The COUNT of each read a burst run of ``jobs`` no-ops asks for, and the worker."""
    from kindling.core.envelope import encode_job, new_job
    from kindling.core.registry import Registry
    from kindling.valkey import StreamWorker, ValkeyResultStore, connect

    stream = f"sizes:{uuid.uuid4().hex[:8]}"
    registry = Registry()
    registry.task(name="noop")(lambda: None)
    pipe = connect(url).pipeline(transaction=False)
    for _ in range(jobs):
        pipe.xadd(stream, {"job": encode_job(new_job("noop", []))})
    pipe.execute()
    worker = StreamWorker(url, registry=registry, store=ValkeyResultStore(url, prefix=f"sizes-{uuid.uuid4().hex[:6]}"),
                          stream=stream, block_ms=50, heartbeat=False, log=False, **options)
    asked: list[int] = []
    fetch = worker.port.fetch

    def counting(*args, **kwargs):
        asked.append(worker.port.batch)
        return fetch(*args, **kwargs)

    worker.port.fetch = counting
    assert worker.run(burst=True) == {"succeeded": jobs}
    return asked, worker


def test_quick_full_rounds_grow_the_reads_up_to_max_batch(valkey_url, monkeypatch):
    """Under a backlog of quick jobs each round reads twice as many entries as the round
    before it read, up to ``max_batch`` (kindling.core.valkey.readsize): the round trips a batch waits
    for are spread over more jobs. Every round counts as quick here, whatever this
    machine's speed, so that the sizes asked for are exact."""
    monkeypatch.setattr("kindling.core.valkey.readsize.QUICK_S", 3600.0)
    asked, worker = _read_sizes(valkey_url, 1500, batch=50, max_batch=400)
    # The first round's own read and the one it reads ahead while running are both 50.
    assert asked[:6] == [50, 50, 100, 200, 400, 400], asked
    assert set(asked[6:]) <= {400}, asked
    assert worker.batch == 50  # the next run starts from batch again


def test_slow_rounds_keep_the_first_size(valkey_url, monkeypatch):
    monkeypatch.setattr("kindling.core.valkey.readsize.QUICK_S", 0.0)  # no round is quick
    asked, _ = _read_sizes(valkey_url, 300, batch=50, max_batch=400)
    assert set(asked) == {50}, asked


def test_max_batch_equal_to_batch_fixes_the_size(valkey_url, monkeypatch):
    monkeypatch.setattr("kindling.core.valkey.readsize.QUICK_S", 3600.0)
    asked, _ = _read_sizes(valkey_url, 300, batch=50, max_batch=50)
    assert set(asked) == {50}, asked
