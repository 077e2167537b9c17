"""The stream worker's delayed jobs, on a real valkey-server.

Run: .venv/bin/python -m pytest tests/integration/test_valkey_trigger_worker.py -q
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from tests.integration.test_valkey import valkey_server, valkey_url  # noqa: F401  (session fixtures)

pytestmark = pytest.mark.valkey


@pytest.fixture
def stream() -> str:
    return f"vt:{uuid.uuid4().hex[:8]}"


class Ledger:
    """Tasks that count their runs, and one memory store for every worker."""

    def __init__(self):
        from kindling.registry import Registry
        from kindling.results import MemoryResultStore

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


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


# -- delayed jobs ---------------------------------------------------------------------------------------


def test_a_delayed_job_waits_in_the_scheduled_set_and_runs_once_when_due(valkey_url, stream):  # noqa: F811
    from kindling.client import Call
    from kindling.envelope import encode_job, new_job, now_ms
    from kindling.valkey import StreamProducer

    ledger = Ledger()
    producer = StreamProducer(valkey_url, stream=stream)
    r = producer.client
    t0 = now_ms()
    (later,) = producer.enqueue_many([Call("slow", ["later", 1], delay=2)])
    assert later.entry is None and r.xlen(stream) == 0 and r.zcard(f"{stream}:scheduled") == 1
    # an older producer's delayed job straight on the stream: moved to the set when first read
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
    assert r.zcard(f"{stream}:scheduled") == 0 and r.xlen(stream) == 0
    assert not [e for e in ledger.log if e.get("kindling") == "deferred"]
