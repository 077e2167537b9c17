"""A Valkey Cluster failing over while a producer sends and workers run: planned
(``CLUSTER FAILOVER``, then ``FAILOVER FORCE``) with a ``kindling worker`` waiting in its
blocking read, then a primary killed (SIGKILL) with a stream worker and the Lambda drain: its
replica is promoted, the clients read the new map, and every job is recorded. Duplicates (a
job run twice: a reply lost with the primary) are counted and stated, never hidden.

The headline run (10,000 jobs) is marked ``slow``::

    .venv/bin/python -m pytest tests/service/test_valkey_cluster_failover.py -m slow -s
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from kindling.core.valkey.keys import flag_key
from support.valkey import ValkeyCluster

pytestmark = pytest.mark.valkey


def run_with_a_primary_killed(cluster: ValkeyCluster, n: int, kill_at: float = 0.3, budget_s: float = 300.0) -> dict:
    """``n`` jobs through producer, worker and drain, the stream's primary killed once
    ``kill_at`` of them are recorded. Returns the figures the tests assert and print."""
    from kindling.core.envelope import Call
    from kindling.core.errors import EnqueueError
    from kindling.core.registry import Registry
    from kindling.triggers.valkey.lambda_drain import drain
    from kindling.valkey import StreamProducer, StreamWorker, ValkeyResultStore

    url = cluster.url + "?cluster=true&wait_replicas=1"
    stream = f"vf:{uuid.uuid4().hex[:6]}"
    runs: dict[str, int] = {}
    lock = threading.Lock()
    registry = Registry()

    @registry.task(name="count")
    def count(key: str) -> str:
        with lock:
            runs[key] = runs.get(key, 0) + 1
        return key

    store = ValkeyResultStore(url, ttl_s=3600, prefix=f"vf-{uuid.uuid4().hex[:6]}")
    ids = [f"job-{i:05d}" for i in range(n)]
    resent = {"jobs": 0}
    sent, sent_at_kill = {"n": 0}, {}

    def produce() -> None:
        producer = StreamProducer(url, stream=stream)
        for start in range(0, n, 100):
            time.sleep(0.03)  # paced, so the primary dies while jobs are still being sent
            calls = [Call("count", (i,), job_id=i) for i in ids[start : start + 100]]
            while calls:
                try:
                    producer.enqueue_many(calls)
                    sent["n"] += len(calls)
                    calls = []
                except EnqueueError as exc:  # not sent, or maybe sent: send again under the same ids
                    left = set(exc.failed) | set(getattr(exc, "unknown", {}) or {})
                    calls = [c for c in calls if c.job_id in left]
                    resent["jobs"] += len(calls)
                    time.sleep(0.1)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    worker = StreamWorker(url, store=store, registry=registry, stream=stream, block_ms=100,
                          visibility_ms=3000, log=False)
    killed = promoted = None
    errors = 0
    deadline = time.monotonic() + budget_s
    turn = 0
    recorded = 0
    import os

    os.environ["KINDLING_VALKEY_URL"] = url
    os.environ["KINDLING_VALKEY_STREAMS"] = stream
    try:
        while time.monotonic() < deadline:
            turn += 1
            try:
                if turn % 4:
                    worker.run(burst=True)
                else:
                    drain(worker.runner, {"kindling": "drain", "stream": stream, "flag": flag_key(stream)},
                          lambda: 2_000, invoker=lambda event: None)
            except Exception:  # noqa: BLE001 - a round cut by the failover: the next one goes on
                errors += 1
                time.sleep(0.2)
            states = {}
            for start in range(0, n, 1000):
                try:
                    states.update(store.read_states(ids[start : start + 1000]))
                except Exception:  # noqa: BLE001
                    errors += 1
            recorded = sum(1 for s, _ in states.values() if s == "succeeded")
            if killed is None and recorded >= kill_at * n:
                sent_at_kill["n"] = sent["n"]
                killed = cluster.owner_port(stream)
                cluster.kill(killed)
            if killed is not None and promoted is None:
                promoted = cluster.wait_promoted(killed)
            if recorded == n and not producer.is_alive():
                break
    finally:
        os.environ.pop("KINDLING_VALKEY_URL", None)
        os.environ.pop("KINDLING_VALKEY_STREAMS", None)
    producer.join(30)
    return {"jobs": n, "sent_before_kill": sent_at_kill.get("n"), "recorded": recorded, "lost": n - recorded,
            "killed": killed, "promoted": promoted, "duplicates": sum(c - 1 for c in runs.values() if c > 1),
            "ran": len(runs), "resent_by_producer": resent["jobs"], "rounds_cut": errors}


def run_through_planned_failovers(cluster: ValkeyCluster, n: int) -> dict:
    """A worker (its own thread, as ``kindling worker`` runs) and a producer through
    ``CLUSTER FAILOVER`` and then ``CLUSTER FAILOVER FORCE`` of the stream's primary, each
    sent while the worker waits in its blocking read (the demoted primary answers that read
    with UNBLOCKED) and the producer sends. Returns the figures the test asserts."""
    from kindling.core.envelope import Call
    from kindling.core.errors import EnqueueError
    from kindling.core.registry import Registry
    from kindling.valkey import StreamProducer, StreamWorker, ValkeyResultStore

    url = cluster.url + "?cluster=true&wait_replicas=1"
    stream = f"fo:{uuid.uuid4().hex[:6]}"
    ran: dict[int, int] = {}
    lock = threading.Lock()
    registry = Registry()

    @registry.task(name="count")
    def count(i: int) -> None:
        with lock:
            ran[i] = ran.get(i, 0) + 1

    store = ValkeyResultStore(url, ttl_s=600, prefix=f"fo-{uuid.uuid4().hex[:6]}")
    worker = StreamWorker(url, store=store, registry=registry, stream=stream, block_ms=1_000, visibility_ms=1_500,
                          log=False)
    died: list[BaseException] = []

    def work() -> None:
        try:
            worker.run()
        except BaseException as exc:  # noqa: BLE001 - what the test looks for
            died.append(exc)

    go, resent = threading.Event(), {"jobs": 0}

    def produce() -> None:
        producer = StreamProducer(url, stream=stream)
        for start in range(0, n, 10):
            go.wait(30)  # held while the worker is brought into its blocking read
            calls = [Call("count", (i,), job_id=f"job-{i}") for i in range(start, start + 10)]
            while calls:
                try:
                    producer.enqueue_many(calls)
                    calls = []
                except EnqueueError as exc:  # sent again under the same ids: a duplicate is not run twice
                    left = set(exc.failed) | set(getattr(exc, "unknown", {}) or {})
                    calls = [c for c in calls if c.job_id in left]
                    resent["jobs"] += len(calls)
            time.sleep(0.005)

    threads = [threading.Thread(target=work, daemon=True), threading.Thread(target=produce, daemon=True)]
    for thread in threads:
        thread.start()
    primary = cluster.owner_port(stream)
    blocked = []
    for force in (False, True):
        go.clear()
        deadline, waiting = time.monotonic() + 30, 0
        while not waiting and time.monotonic() < deadline:
            waiting = cluster.blocked(primary)  # the worker waits in XREADGROUP on the primary
            time.sleep(0 if waiting else 0.02)
        blocked.append(waiting)
        go.set()  # and the producer sends, through the failover
        primary = cluster.fail_over(primary, force=force)
    threads[1].join(60)
    deadline = time.monotonic() + 60
    recorded = 0
    while recorded < n and time.monotonic() < deadline and not died:
        time.sleep(0.05)  # a batch handed back while the store failed over runs again once reclaimed
        states = store.read_states([f"job-{i}" for i in range(n)])
        recorded = sum(1 for s, _ in states.values() if s == "succeeded")
    worker.stop()
    threads[0].join(30)
    states = store.read_states([f"job-{i}" for i in range(n)])
    missing = {f"job-{i}": states.get(f"job-{i}", (None, None))[0] for i in range(n)
               if states.get(f"job-{i}", (None, None))[0] != "succeeded"}
    return {"jobs": n, "blocked_at_failover": blocked, "worker_died": died, "ran": len(ran),
            "duplicates": sum(c - 1 for c in ran.values() if c > 1), "resent_by_producer": resent["jobs"],
            "recorded": recorded, "not_recorded": dict(list(missing.items())[:20]),
            "pending": worker.client.xpending(stream, worker.group)}


def test_planned_and_forced_failovers_then_a_primary_killed_lose_no_job():
    """One cluster for both runs: starting one takes about 11 s (its replicas show in
    CLUSTER SLOTS seconds after they are attached), the failovers about 2."""
    with ValkeyCluster() as cluster:
        planned = run_through_planned_failovers(cluster, 300)
        print(f"\n[valkey cluster planned failovers] {planned}")
        assert planned["blocked_at_failover"] == [1, 1]  # each failover found the worker in its blocking read
        assert planned["worker_died"] == []  # it went on through both
        assert planned["recorded"] == 300 and planned["ran"] == 300, planned  # and every job sent ran

        killed = run_with_a_primary_killed(cluster, 600)
    print(f"\n[valkey cluster failover] {killed}")
    assert killed["killed"] is not None and killed["promoted"] is not None
    assert killed["recorded"] == 600 and killed["lost"] == 0, killed
    assert killed["ran"] == 600


@pytest.mark.slow
def test_ten_thousand_jobs_with_a_primary_killed_mid_run_lose_none():
    with ValkeyCluster() as cluster:
        figures = run_with_a_primary_killed(cluster, 10_000, kill_at=0.05, budget_s=900)
    print(f"\n[valkey cluster failover 10k] {figures}")
    assert figures["killed"] is not None and figures["promoted"] is not None
    assert figures["recorded"] == 10_000 and figures["lost"] == 0, figures
    assert figures["ran"] == 10_000
