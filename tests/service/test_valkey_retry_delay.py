"""A failed job on a Valkey stream is retried when its policy says (``Retry(after=N)``, its
task's ``backoff=``, the deployment's retry delay), not when the visibility time is up: it
waits in ``<stream>:scheduled`` due at the time of settling plus that delay, keeps its
signature, and comes back as its next attempt, recorded once per attempt.

The default delay for a task without retry options is one setting for every trigger.

Against a real valkey-server (tests/support/valkey.py, on a free loopback port). Nothing here
waits out a delay: a job is brought due by moving the scheduled set with a clock set ahead.
"""

from __future__ import annotations

import base64
import json
import time
import uuid

import pytest
from kindling.core.valkey.keys import dead_key, scheduled_key

pytestmark = pytest.mark.valkey

KEY = b"r" * 32


@pytest.fixture(scope="module")
def url(start_valkey) -> str:
    return start_valkey().url


@pytest.fixture
def stream() -> str:
    return f"retry:{uuid.uuid4().hex[:8]}"


def keyring():
    from kindling.shared.signed import Keyring

    value = json.dumps({"current": "k1", "keys": {"k1": base64.b64encode(KEY).decode()}})
    return Keyring("arn:test", fetch=lambda ref, deadline: value)


class Tasks:
    def __init__(self):
        from kindling.core.errors import Retry
        from kindling.core.policy import Backoff
        from kindling.core.registry import Registry
        from kindling.stores.results import MemoryResultStore

        self.store = MemoryResultStore()
        self.registry = reg = Registry()
        self.runs: list[str] = []

        @reg.task(name="later")
        def later():
            self.runs.append("later")
            if len(self.runs) == 1:
                raise Retry(after=20)
            return "done"

        @reg.task(name="backing_off", backoff=Backoff(base=7, factor=3, jitter=False), max_attempts=4)
        def backing_off():
            self.runs.append("backing_off")
            raise RuntimeError("still down")

        @reg.task(name="plain")
        def plain():
            self.runs.append("plain")
            raise RuntimeError("no options")

    def runner(self, **options):
        from kindling.engine.runner import Runner
        from kindling.shared.signed import Verifier

        return Runner(self.registry, self.store, log=None, metrics=False, verifier=Verifier(keyring()), **options)


def send(url, stream, task: str):
    from kindling.valkey import StreamProducer

    return StreamProducer(url, stream=stream, signing=keyring()).enqueue(task)


def settle_one(worker):
    """Run what the worker reads once; the scheduled set's member and score, with the time
    just before and just after settling."""
    before = _now_ms()
    outcomes = []
    for _ in range(3):
        outcomes += worker.process(worker.fetch(50))
        if outcomes:
            break
    after = _now_ms()
    return outcomes, before, after


def scheduled(client, stream) -> list[tuple[bytes, float]]:
    return client.zrangebyscore(scheduled_key(stream), "-inf", "+inf", withscores=True)


def bring_due(client, stream) -> None:
    """Move every scheduled job onto the stream, as a worker whose clock has reached them does."""
    from kindling.shared.valkey.scheduled import MOVE_DUE, move_args

    client.register_script(MOVE_DUE)(keys=[scheduled_key(stream), stream], args=move_args(_now_ms() + 10**9))


def _now_ms() -> int:
    return int(time.time() * 1000)


def assert_waits(client, stream, job, seconds: float, before: int, after: int):
    ((member, score),) = scheduled(client, stream)
    assert before + seconds * 1000 <= score <= after + seconds * 1000, (score - before, score - after)
    signature, _, body = member.partition(b"\n")
    assert signature.startswith(b"v1:k1:") and json.loads(body)["id"] == job.id  # kept with its signature
    assert client.xlen(stream) == 0  # acknowledged and deleted from the stream
    assert client.xpending(stream, "kindling")["pending"] == 0


def worker(url, stream, tasks: Tasks, **options):
    from kindling.valkey import StreamWorker

    return StreamWorker(url, runner=tasks.runner(**options), stream=stream, block_ms=50, visibility_ms=2000,
                        heartbeat=False)


def test_retry_after_is_honoured_by_the_stream_worker(url, stream):
    from kindling.valkey import connect

    tasks, client = Tasks(), connect(url)
    w = worker(url, stream, tasks)
    job = send(url, stream, "later")

    (o,), before, after = settle_one(w)

    assert (o.status, o.retry_in) == ("failed", 20)
    assert tasks.store.records[job.id]["status"] == "failed" and tasks.store.records[job.id]["attempts"] == 1
    assert_waits(client, stream, job, 20, before, after)
    assert w.process(w.fetch(50)) == []  # not back before it is due
    bring_due(client, stream)
    (o,), _, _ = settle_one(w)
    assert (o.job_id, o.status, o.attempts) == (job.id, "succeeded", 2)
    assert tasks.runs == ["later", "later"]
    assert scheduled(client, stream) == [] and client.xlen(stream) == 0


def test_a_tasks_backoff_is_honoured_by_the_stream_worker_attempt_after_attempt(url, stream):
    from kindling.valkey import connect

    tasks, client = Tasks(), connect(url)
    w = worker(url, stream, tasks)
    job = send(url, stream, "backing_off")
    for attempt, delay in ((1, 7), (2, 21), (3, 63)):
        (o,), before, after = settle_one(w)
        assert (o.status, o.attempts, o.retry_in) == ("failed", attempt, delay)
        assert_waits(client, stream, job, delay, before, after)
        assert tasks.store.records[job.id]["attempts"] == attempt  # one record per attempt
        bring_due(client, stream)
    (o,), _, _ = settle_one(w)
    assert (o.status, o.attempts) == ("dead", 4)
    assert tasks.runs == ["backing_off"] * 4
    assert scheduled(client, stream) == [] and client.xlen(dead_key(stream)) == 1


def test_the_deployments_retry_delay_is_the_default_of_a_stream_worker(url, stream, monkeypatch):
    from kindling.core import policy
    from kindling.stores.results import MemoryResultStore
    from kindling.valkey import StreamWorker, connect

    monkeypatch.delenv("KINDLING_RETRY_DELAY", raising=False)
    tasks, client = Tasks(), connect(url)
    w = StreamWorker(url, registry=tasks.registry, store=MemoryResultStore(), stream=stream, block_ms=50,
                     heartbeat=False, log=False, metrics=False)
    job = send(url, stream, "plain")
    (o,), before, after = settle_one(w)
    assert (o.status, o.retry_in) == ("failed", policy.DEFAULT_RETRY_DELAY_S)
    ((member, score),) = scheduled(client, stream)
    assert before + policy.DEFAULT_RETRY_DELAY_S * 1000 <= score <= after + policy.DEFAULT_RETRY_DELAY_S * 1000
    assert json.loads(member.partition(b"\n")[2])["id"] == job.id


def test_retry_after_and_backoff_are_honoured_by_the_lambda_drain(url, stream, monkeypatch):
    from kindling.triggers.valkey.lambda_drain import drain
    from kindling.valkey import connect

    tasks, client = Tasks(), connect(url)
    later, backing_off = send(url, stream, "later"), send(url, stream, "backing_off")
    deadline = time.monotonic() + 5

    def remaining_ms() -> int:
        return max(0, int((deadline - time.monotonic()) * 1000))

    before = _now_ms()
    monkeypatch.setenv("KINDLING_VALKEY_URL", url)  # the deployment names the server and streams, not the event
    monkeypatch.setenv("KINDLING_VALKEY_STREAMS", stream)
    monkeypatch.setenv("KINDLING_DRAIN_VISIBILITY_MS", "2000")
    summary = drain(tasks.runner(), {"kindling": "drain", "stream": stream}, remaining_ms, invoker=list)
    assert summary["counts"] == {"failed": 2}, summary
    due = {json.loads(member.partition(b"\n")[2])["id"]: score for member, score in scheduled(client, stream)}
    settled = [tasks.store.records[j.id]["finished_at"] for j in (later, backing_off)]
    assert before <= min(settled)
    assert 20_000 <= due[later.id] - tasks.store.records[later.id]["finished_at"] <= 1_000 + 20_000
    assert 7_000 <= due[backing_off.id] - tasks.store.records[backing_off.id]["finished_at"] <= 1_000 + 7_000
    assert client.xlen(stream) == 0


def test_one_default_retry_delay_for_every_trigger(monkeypatch, moto_endpoint):
    """A task without retry options is retried after the same delay whichever trigger runs
    it: the Lambda handler, ``kindling worker`` on SQS or on Valkey, a StreamWorker."""
    import argparse

    import boto3
    from kindling.core import policy
    from kindling.engine.runner import Runner
    from kindling.stores.results import MemoryResultStore
    from kindling.tools.cli import valkey_worker
    from kindling.triggers.sqs.handler import LambdaWorker
    from kindling.triggers.sqs.loop import SqsWorker
    from kindling.valkey import StreamWorker

    queue = boto3.client("sqs").create_queue(QueueName=f"q-{uuid.uuid4().hex[:8]}")["QueueUrl"]

    def delays() -> set:
        ns = argparse.Namespace(valkey="redis://127.0.0.1:1/0", table="t", stream="s", concurrency=1)
        return {
            LambdaWorker(store=MemoryResultStore()).runner.retry_delay,
            SqsWorker(queue, "t", store=MemoryResultStore()).runner.retry_delay,
            valkey_worker(ns).runner.retry_delay,
            StreamWorker("redis://127.0.0.1:1/0", store=MemoryResultStore(), heartbeat=False).runner.retry_delay,
            Runner(None, MemoryResultStore()).retry_delay,
        }

    monkeypatch.delenv("KINDLING_RETRY_DELAY", raising=False)
    assert delays() == {policy.DEFAULT_RETRY_DELAY_S}
    monkeypatch.setenv("KINDLING_RETRY_DELAY", "11")
    assert delays() == {11.0}
