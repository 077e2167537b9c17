"""Faults between the Valkey stream worker and its dependencies, through toxiproxy.

Each test runs a real ``kindling worker --valkey`` process (visibility 2 s, batches of 100,
16 threads) on 2,000 ``chaos.ledger`` jobs while it injects one kind of fault, then checks
every job's outcome against the ledger of executions (see stream_run.py for the checks).
Outages, cuts and kills start while a batch is part-way through its jobs: the moment that
tests whether outcomes of jobs that ran survive.

Skip the suite with ``-m "not chaos"``.
"""

from __future__ import annotations

import random
import time

import pytest
from stream_run import StreamRun

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

JOBS = 2000


def test_dynamodb_latency_spikes(net, tmp_path):
    run = StreamRun("dynamodb_latency", net, tmp_path)
    run.start_worker()
    run.enqueue(JOBS, over_s=5)
    time.sleep(0.5)
    for _ in range(3):
        with net.dynamodb.toxic("latency", latency=400, jitter=200):
            run.fault("DynamoDB replies +400 +- 200 ms for 1 s")
            time.sleep(1.0)
        time.sleep(0.5)
    run.fault_cleared()
    run.finish()


def test_valkey_latency_spikes(net, tmp_path):
    run = StreamRun("valkey_latency", net, tmp_path)
    run.start_worker()
    run.enqueue(JOBS, over_s=5)
    time.sleep(0.5)
    for _ in range(3):
        with net.valkey.toxic("latency", latency=250, jitter=150), \
             net.valkey.toxic("latency", latency=50, stream="upstream"):
            run.fault("Valkey +250 +- 150 ms down, +50 ms up for 1 s")
            time.sleep(1.0)
        time.sleep(0.5)
    run.fault_cleared()
    run.finish()


def test_dynamodb_connection_resets_mid_request(net, tmp_path):
    """Windows of 0.6 s in which every DynamoDB request is cut after a few hundred to a few
    thousand bytes (limit_data upstream: the body never arrives whole), alternating with
    windows in which every reply is reset once it starts (reset_peer downstream: the write
    was done, the answer is lost), over about 6 s."""
    rng = random.Random(9)
    run = StreamRun("dynamodb_resets", net, tmp_path)
    run.start_worker()
    run.enqueue(JOBS, over_s=6)
    time.sleep(0.3)
    for _ in range(4):
        cut = rng.randint(200, 6000)
        with net.dynamodb.toxic("limit_data", bytes=cut, stream="upstream"):
            run.fault(f"DynamoDB requests cut after {cut} bytes for 0.6 s")
            time.sleep(0.6)
        time.sleep(0.3)
        after = rng.randint(0, 20)
        with net.dynamodb.toxic("reset_peer", timeout=after):
            run.fault(f"DynamoDB replies reset after {after} ms for 0.6 s")
            time.sleep(0.6)
        time.sleep(0.3)
    run.fault_cleared()
    run.finish()


def test_dynamodb_black_hole(net, tmp_path):
    """For 6 s every byte to and from DynamoDB vanishes (connections stay open), starting
    while a batch is part-way through its jobs."""
    run = StreamRun("dynamodb_black_hole", net, tmp_path, job_ms=10)
    run.start_worker()
    run.enqueue(JOBS, over_s=4)
    time.sleep(0.5)
    n = run.wait_mid_batch()
    with net.dynamodb.toxic("timeout", timeout=0), net.dynamodb.toxic("timeout", timeout=0, stream="upstream"):
        run.fault(f"DynamoDB black hole for 6 s, from {n} executions")
        time.sleep(6.0)
    run.fault_cleared()
    run.finish()


def test_dynamodb_outage_longer_than_visibility(net, tmp_path):
    """DynamoDB refuses connections for 7 s, over three times the 2 s visibility time, so
    entries handed back during the outage are reclaimed several times before it ends. It
    starts while a batch is part-way through its jobs."""
    run = StreamRun("dynamodb_outage", net, tmp_path, job_ms=10)
    run.start_worker()
    run.enqueue(JOBS, over_s=4)
    time.sleep(0.5)
    n = run.wait_mid_batch()
    with net.dynamodb.disabled():
        run.fault(f"DynamoDB down (connections refused) for 7 s, from {n} executions")
        time.sleep(7.0)
    run.fault_cleared()
    run.finish()


def test_valkey_cut_and_restored(net, tmp_path):
    """The worker's Valkey connections are closed and refused twice (3 s, then 1 s), each
    time while a batch is part-way through its jobs; the producer keeps adding jobs straight
    to Valkey meanwhile."""
    run = StreamRun("valkey_cut", net, tmp_path, job_ms=10)
    run.start_worker()
    run.enqueue(JOBS, over_s=6)
    time.sleep(0.5)
    for seconds in (3.0, 1.0):
        n = run.wait_mid_batch()
        with net.valkey.disabled():
            run.fault(f"Valkey cut for {seconds:g} s, from {n} executions")
            time.sleep(seconds)
        time.sleep(0.5)
    run.fault_cleared()
    run.finish()


def test_worker_killed_mid_batch_and_restarted(net, tmp_path):
    """SIGKILL three times while a batch is part-way through its jobs (10 ms each, batches
    of 100 on 16 threads), restarting the worker at once each time. The killed batch's jobs
    that ran have no record: those run again after the visibility time, and only those."""
    run = StreamRun("worker_sigkill", net, tmp_path, job_ms=10)
    run.enqueue(JOBS)
    run.wait_until(lambda: len(run.sent) == JOBS, 30, "the jobs to be enqueued")
    run.start_worker()
    for threshold in (300, 900, 1500):
        run.wait_until(lambda t=threshold: run.executions() >= t, 60, f"{threshold} executions")
        n = run.wait_mid_batch()
        held = run.kill_worker()
        run.fault(f"SIGKILL at {n} executions, {held} entries pending")
        run.start_worker()
    run.fault_cleared()
    run.finish()
