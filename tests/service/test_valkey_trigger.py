"""Event-driven drains: debounced kicks, the drain's handshake and the race it closes.

Against a real valkey-server (tests/support/valkey.py, on a free loopback port) with a fake invoker
standing in for Lambda's asynchronous Invoke: an invocation is a thread running the drain.

Run: .venv/bin/python -m pytest tests/service/test_valkey_trigger.py -q
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid

import pytest
from kindling.core.valkey.keys import flag_key, scheduled_key

pytestmark = pytest.mark.valkey


@pytest.fixture(scope="module")
def url(start_valkey) -> str:
    return start_valkey().url


@pytest.fixture(autouse=True)
def _deployment(url, monkeypatch) -> None:
    monkeypatch.setenv("KINDLING_VALKEY_URL", url)  # the drain's server: the deployment's, never the event's


@pytest.fixture
def stream() -> str:
    return f"trig:{uuid.uuid4().hex[:8]}"


class Budget:
    """A Lambda context with ``ms`` to run."""

    aws_request_id = "req"

    def __init__(self, ms: int):
        self.deadline = time.monotonic() + ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


class Ledger:
    """Tasks that record every run, and a result store shared by every drain."""

    def __init__(self):
        from kindling.core.registry import Registry
        from kindling.stores.results import MemoryResultStore

        self.runs: dict[str, int] = {}
        self.lock = threading.Lock()
        self.store = MemoryResultStore()
        self.registry = Registry()

        @self.registry.task(name="job")
        def job(key: str, ms: float = 0) -> str:
            with self.lock:
                self.runs[key] = self.runs.get(key, 0) + 1
            if ms:
                time.sleep(ms / 1000)
            return key

    def runner(self, **options):
        from kindling.engine.runner import Runner

        options = {"safety_ms": 100, "cutoff_ms": 50, "log": None, **options}
        return Runner(self.registry, self.store, **options)


class Lambda:
    """A fake invoker: each invocation runs the drain in a thread with ``budget_ms`` to run."""

    def __init__(self, url: str, ledger: Ledger, budget_ms: int = 1500, **event):
        self.url, self.ledger, self.budget_ms, self.extra = url, ledger, budget_ms, event
        self.events: list[dict] = []
        self.summaries: list[dict] = []
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self.lock = threading.Lock()

    def __call__(self, event: dict) -> None:
        with self.lock:
            self.events.append(event)
            thread = threading.Thread(target=self._run, args=(event,), daemon=True)
            self.threads.append(thread)
        thread.start()

    def _run(self, event: dict) -> None:
        from kindling.triggers.valkey.drain_event import DrainConfig
        from kindling.triggers.valkey.lambda_drain import drain

        try:
            summary = drain(self.ledger.runner(), event, Budget(self.budget_ms).get_remaining_time_in_millis,
                            invoker=self, config=DrainConfig((event["stream"],), **self.extra))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(exc)
            raise
        with self.lock:
            self.summaries.append(summary)

    def settle(self, timeout: float = 60) -> None:
        """Wait until no drain runs and none is starting."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                alive = [t for t in self.threads if t.is_alive()]
            if not alive:
                return
            for t in alive:
                t.join(max(0.0, deadline - time.monotonic()))
        raise AssertionError("drains still running")


def fake_running(fake: Lambda) -> bool:
    with fake.lock:
        return any(t.is_alive() for t in fake.threads)


def _producer(url, stream, invoker, **options):
    from kindling.valkey import StreamProducer

    return StreamProducer(url, stream=stream, invoker=invoker, **options)


def _drain(url, ledger, event, budget_ms=5000, invoker=None, **config):
    """One drain of ``event`` on ``url`` (the deployment's, from the environment), configured
    with the event's stream and ``config`` (:class:`~kindling.triggers.valkey.drain_event.DrainConfig`)."""
    from kindling.triggers.valkey.drain_event import DrainConfig
    from kindling.triggers.valkey.lambda_drain import drain

    assert url == os.environ["KINDLING_VALKEY_URL"]
    return drain(ledger.runner(), event, Budget(budget_ms).get_remaining_time_in_millis, invoker=invoker,
                 config=DrainConfig((event["stream"],), **config))


# -- the producer's kick ------------------------------------------------------------------------------


def test_a_burst_of_enqueues_causes_one_invocation(url, stream):
    events = []
    producer = _producer(url, stream, events.append, kick_ttl_ms=900_000)
    for i in range(100):
        producer.enqueue("job", str(i))
    producer.enqueue_many([("job", [f"b{i}"], {}) for i in range(1200)])
    assert events == [{"kindling": "drain", "stream": stream, "flag": flag_key(stream)}]
    r = producer.client
    assert r.get(flag_key(stream)) == b"1" and 890_000 < r.execute_command("PTTL", flag_key(stream)) <= 900_000
    assert r.xlen(stream) == 1300


def test_a_backlog_kicks_more_drains_each_with_its_own_flag(url, stream):
    events = []
    producer = _producer(url, stream, events.append, max_drains=3, backlog_per_drain=200)
    producer.enqueue_many([("job", [str(i)], {}) for i in range(150)])
    assert [e["flag"] for e in events] == [flag_key(stream)]  # below the threshold: one drain
    producer.enqueue_many([("job", [str(i)], {}) for i in range(150, 1000)])
    assert [e["flag"] for e in events] == [flag_key(stream), flag_key(stream, 1), flag_key(stream, 2)]
    producer.enqueue("job", "more")  # every flag held: nothing more
    assert len(events) == 3


def test_a_failed_invocation_leaves_no_flag_behind(url, stream):
    calls = []

    def refused(event):
        calls.append(event)
        raise OSError("connection refused")

    producer = _producer(url, stream, refused)
    sent = producer.enqueue("job", "a")  # the job is on the stream whatever the kick did
    assert sent.entry and producer.client.xlen(stream) == 1
    assert producer.client.exists(flag_key(stream)) == 0
    assert producer.kicker.failures == 1 and isinstance(producer.kicker.last_error, OSError)
    producer.enqueue("job", "b")
    assert len(calls) == 2  # the next enqueue tries again


# -- the drain's handshake ------------------------------------------------------------------------------


def test_a_drain_runs_the_jobs_and_gives_up_its_flag(url, stream):
    ledger = Ledger()
    events = []
    producer = _producer(url, stream, events.append)
    sent = producer.enqueue_many([("job", [str(i)], {}) for i in range(250)])
    summary = _drain(url, ledger, events[0])
    assert summary["processed"] == 250 and summary["ended"] == "empty" and not summary["kicked"], summary
    assert {s.id for s in sent} == set(ledger.store.records)
    r = producer.client
    assert r.exists(flag_key(stream)) == 0 and r.xlen(stream) == 0
    assert summary["consumer"] not in {c["name"].decode() for c in r.xinfo_consumers(stream, "kindling")}
    producer.enqueue("job", "again")
    assert len(events) == 2  # the flag is free: the next job kicks a new drain


def test_a_job_added_between_the_last_read_and_the_handshake_is_run(url, stream, monkeypatch):
    """The window the handshake closes: the drain's read came back empty, then a producer
    adds a job and finds the flag still set (no invocation); the drain must see it."""
    from kindling.triggers.valkey import lambda_drain

    ledger = Ledger()
    events = []
    producer = _producer(url, stream, events.append)
    first = producer.enqueue("job", "first")
    real = lambda_drain.run_handshake
    late = []

    def handshake_after_a_producer(script, **kw):
        if not late:
            late.append(producer.enqueue("job", "late"))  # SET NX fails: the drain holds the flag
            assert len(events) == 1
        return real(script, **kw)

    monkeypatch.setattr(lambda_drain, "run_handshake", handshake_after_a_producer)
    summary = _drain(url, ledger, events[0])
    assert len(events) == 1  # the late job caused no invocation ...
    assert summary["processed"] == 2, summary  # ... and the finishing drain ran it
    assert set(ledger.store.records) == {first.id, late[0].id}
    assert producer.client.exists(flag_key(stream)) == 0


def test_checking_before_deleting_the_flag_would_strand_that_job(url, stream):
    """The order matters: a drain that looked (empty) and then deleted the flag loses a job
    added in between, whose producer saw the flag set and invoked nothing."""
    events = []
    producer = _producer(url, stream, events.append)
    r = producer.client
    r.set(flag_key(stream), b"1")  # a drain is running
    assert r.xlen(stream) == 0  # naive drain: "empty" ...
    producer.enqueue("job", "late")  # ... a producer adds a job and sees the flag: no kick ...
    r.delete(flag_key(stream))  # ... the naive drain deletes the flag and stops
    assert events == [] and r.xlen(stream) == 1 and r.exists(flag_key(stream)) == 0  # stranded


def test_many_producers_while_drains_finish_strand_nothing(url, stream):
    """Rounds of concurrent producers (small bursts at random moments, so some land while a
    drain is finishing), each round followed by silence: every job of the round must be run
    with no later enqueue to kick a drain for it. A stranded job is one that waits for the
    next kick; so no round may rely on the next one."""
    ledger = Ledger()
    fake = Lambda(url, ledger, budget_ms=400, block_ms=1)
    producers, rounds = 6, 30
    barrier = threading.Barrier(producers + 1)
    sent: list = []
    lock = threading.Lock()
    failures: list = []

    def produce(seed: int) -> None:
        rng = random.Random(seed)
        producer = _producer(url, stream, fake)
        try:
            for r in range(rounds):
                barrier.wait(30)
                for i in range(rng.choice((2, 3, 4, 5))):
                    time.sleep(rng.choice((0.001, 0.005, 0.01, 0.02, 0.04)))
                    mine = producer.enqueue_many([("job", [f"{seed}-{r}-{i}-{k}"], {})
                                                  for k in range(rng.choice((1, 1, 2, 10)))])
                    with lock:
                        sent.extend(mine)
                barrier.wait(30)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=produce, args=(seed,), daemon=True) for seed in range(producers)]
    for t in threads:
        t.start()
    for r in range(rounds):
        barrier.wait(30)  # the round starts
        barrier.wait(30)  # every producer is done with it: nothing more will be enqueued now
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with lock:
                missing = {s.id for s in sent} - set(ledger.store.records)
            if not missing:
                break
            time.sleep(0.002)
        assert not missing, f"round {r}: {len(missing)} jobs stranded"
        while fake_running(fake) and time.monotonic() < deadline:  # the next round starts with no drain
            time.sleep(0.002)
    for t in threads:
        t.join(30)
    fake.settle()
    assert not failures and not fake.errors, (failures, fake.errors)
    r = _producer(url, stream, None).client
    assert all(rec["status"] == "succeeded" for rec in ledger.store.records.values())
    assert all(n == 1 for n in ledger.runs.values()), {k: n for k, n in ledger.runs.items() if n > 1}
    assert r.xlen(stream) == 0 and r.exists(flag_key(stream)) == 0
    # debounced: far fewer invocations than enqueues, yet drains came and went round after round
    enqueues = sum(1 for _ in sent)
    assert rounds <= len(fake.events) < enqueues / 3, (len(fake.events), enqueues)
    assert {s["ended"] for s in fake.summaries} <= {"empty", "time"}, fake.summaries


# -- what a drain leaves behind -------------------------------------------------------------------------


def test_a_drain_out_of_time_hands_on_with_its_flag_and_consumer(url, stream):
    ledger = Ledger()
    events = []
    producer = _producer(url, stream, events.append)
    sent = producer.enqueue_many([("job", [str(i), 100], {}) for i in range(30)])
    handed = []
    # (a job the invocation's end cuts off is a failed attempt: retried after the visibility time)
    summary = _drain(url, ledger, events[0], budget_ms=900, invoker=handed.append, batch=5, visibility_ms=1000)
    assert summary["ended"] == "time" and summary["kicked"], summary
    assert 0 < summary["processed"] < 30
    (event,) = handed
    assert event["flag"] == flag_key(stream) and event["consumer"] == summary["consumer"]
    assert producer.client.exists(flag_key(stream)) == 1  # still held, for the next invocation
    producer.enqueue("job", "meanwhile")
    assert len(events) == 1
    summary2 = _drain(url, ledger, event, budget_ms=10_000, batch=50, visibility_ms=1000)
    assert summary2["ended"] == "empty", summary2
    assert set(ledger.store.records) >= {s.id for s in sent}
    assert len(ledger.store.records) == 31 and producer.client.exists(flag_key(stream)) == 0


def test_a_drain_that_cannot_hand_on_frees_the_flag(url, stream):
    ledger = Ledger()
    events = []
    producer = _producer(url, stream, events.append)
    producer.enqueue_many([("job", [str(i), 100], {}) for i in range(30)])

    def refused(event):
        raise OSError("no route")

    summary = _drain(url, ledger, events[0], budget_ms=900, invoker=refused, batch=5)
    assert summary["ended"] == "time" and not summary["kicked"]
    assert producer.client.exists(flag_key(stream)) == 0  # so the next enqueue kicks at once
    producer.enqueue("job", "x")
    assert len(events) == 2


def test_a_drain_waits_for_a_soon_due_delayed_job(url, stream):
    from kindling.producer.client import Call

    ledger = Ledger()
    events = []
    producer = _producer(url, stream, events.append)
    (later,) = producer.enqueue_many([Call("job", ["later"], delay=0.6)])
    assert later.entry is not None and producer.client.xlen(stream) == 1  # the drain moves it to the set
    t0 = time.monotonic()
    summary = _drain(url, ledger, events[0], budget_ms=5000)
    assert time.monotonic() - t0 >= 0.5
    assert summary["processed"] == 1 and summary["ended"] == "empty", summary
    assert ledger.store.records[later.id]["attempts"] == 1
    assert producer.client.zcard(scheduled_key(stream)) == 0


def test_a_drain_out_of_time_with_a_soon_due_job_hands_on(url, stream):
    from kindling.producer.client import Call

    ledger = Ledger()
    events = []
    producer = _producer(url, stream, events.append)
    producer.enqueue_many([Call("job", ["later"], delay=3)])
    handed = []
    summary = _drain(url, ledger, events[0], budget_ms=700, invoker=handed.append)
    assert summary["ended"] == "time" and summary["kicked"] and summary["processed"] == 0, summary
    assert 1500 < summary["next_due_in_ms"] <= 3000
    assert len(handed) == 1


def test_a_far_delayed_job_is_left_to_the_next_kick(url, stream):
    from kindling.producer.client import Call

    ledger = Ledger()
    events = []
    producer = _producer(url, stream, events.append)
    producer.enqueue_many([Call("job", ["much later"], delay=600)])
    summary = _drain(url, ledger, events[0], budget_ms=5000)
    assert summary["ended"] == "empty" and summary["processed"] == 0
    assert 590_000 < summary["next_due_in_ms"] <= 600_000
    assert producer.client.exists(flag_key(stream)) == 0


def test_a_failed_job_is_retried_by_the_drain_that_handed_it_back(url, stream, monkeypatch):
    """Its retry waits in the scheduled set (the deployment's retry delay, 1 s here), within
    the drain's horizon: the drain waits for it rather than returning."""
    monkeypatch.setenv("KINDLING_RETRY_DELAY", "1")
    ledger = Ledger()
    attempts = []

    @ledger.registry.task(name="flaky")
    def flaky() -> int:
        from kindling import current_job

        attempts.append(current_job().attempt)
        if len(attempts) == 1:
            raise RuntimeError("first attempt fails")
        return len(attempts)

    events = []
    producer = _producer(url, stream, events.append)
    job = producer.enqueue("flaky")
    summary = _drain(url, ledger, events[0], budget_ms=5000, visibility_ms=300)
    assert attempts == [1, 2], summary
    assert ledger.store.records[job.id]["status"] == "succeeded"
    assert summary["ended"] == "empty" and producer.client.xlen(stream) == 0


def test_the_safety_net_schedule_drains_without_a_flag(url, stream):
    ledger = Ledger()
    producer = _producer(url, stream, None)  # no kicks (a long-lived worker's producer, say)
    producer.enqueue_many([("job", [str(i)], {}) for i in range(10)])
    summary = _drain(url, ledger, {"kindling": "drain", "stream": stream})
    assert summary["processed"] == 10 and summary["flag"] == flag_key(stream)
    assert producer.client.exists(flag_key(stream)) == 0


# -- kindling's own Lambda Invoke ------------------------------------------------------------------------


def test_the_lambda_invoker_sends_a_signed_asynchronous_invoke(monkeypatch):
    """InvocationType=Event to the Invoke path, signed exactly as botocore signs it."""
    import datetime
    from http.server import BaseHTTPRequestHandler, HTTPServer
    from unittest import mock

    import botocore.auth
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append((self.path, dict(self.headers), body))
            status = 202 if len(seen) > 1 else 503  # the first attempt is throttled: retried
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_port}"
    for k, v in {"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "tok",
                 "AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "eu-west-1"}.items():
        monkeypatch.setenv(k, v)
    from kindling.shared.valkey.kick import LambdaInvoker

    name = "arn:aws:lambda:eu-west-1:123456789012:function:kindling-worker"
    try:
        LambdaInvoker(name, endpoint=endpoint)({"kindling": "drain", "stream": "s", "flag": "s:kick"})
    finally:
        server.shutdown()
    assert len(seen) == 2
    path, headers, body = seen[-1]
    assert path == "/2015-03-31/functions/arn%3Aaws%3Alambda%3Aeu-west-1%3A123456789012%3Afunction%3A" \
                   "kindling-worker/invocations"
    assert headers["X-Amz-Invocation-Type"] == "Event"
    assert body == b'{"kindling":"drain","stream":"s","flag":"s:kick"}'
    signed = {k: v for k, v in headers.items()
              if k.lower() in ("content-type", "x-amz-invocation-type", "x-amz-security-token")}
    request = AWSRequest("POST", endpoint + path, data=body, headers=signed)
    when = datetime.datetime.strptime(headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
    with mock.patch.object(botocore.auth, "get_current_datetime", return_value=when):
        SigV4Auth(Credentials("AKID", "secret", "tok"), "lambda", "eu-west-1").add_auth(request)
    assert headers["Authorization"] == request.headers["Authorization"]


def test_the_lambda_invoker_raises_what_aws_refuses(monkeypatch):
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from kindling.drivers.aws import AwsError
    from kindling.shared.valkey.kick import LambdaInvoker

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            data = b'{"Type":"User","message":"Function not found: nope"}'
            self.send_response(404)
            self.send_header("x-amzn-ErrorType", "ResourceNotFoundException")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for k, v in {"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_REGION": "eu-west-1"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    try:
        with pytest.raises(AwsError) as caught:
            LambdaInvoker("nope", endpoint=f"http://127.0.0.1:{server.server_port}")({"kindling": "drain"})
    finally:
        server.shutdown()
    assert caught.value.code == "ResourceNotFoundException" and not caught.value.retryable
