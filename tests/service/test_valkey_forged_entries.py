"""With signing on, an entry whose signature has not been checked is never acted on: not by
the worker's crash-loop rule, not by the drain, not by an operator's retry or redrive.

A forger with ordinary stream access (XADD, XREADGROUP, XCLAIM) can push an entry's delivery
count past any job's attempts. Such an entry must still be judged on its signature first:
recorded ``rejected`` under a key of its own, the job it names untouched, its chain and its
chord left alone.

Against a real valkey-server (tests/support/valkey.py, on a free loopback port).
"""

from __future__ import annotations

import base64
import json
import time
import uuid

import pytest
from kindling.core.valkey.keys import dead_key

pytestmark = pytest.mark.valkey

KEY = b"f" * 32
CHORD = "forged-chord"
THEN = {"task": "add", "args": [], "kwargs": {}}


@pytest.fixture(scope="module")
def url(start_valkey) -> str:
    return start_valkey().url


@pytest.fixture
def stream() -> str:
    return f"forge:{uuid.uuid4().hex[:8]}"


def keyring(key=KEY):
    from kindling.shared.signed import Keyring

    value = json.dumps({"current": "k1", "keys": {"k1": base64.b64encode(key).decode()}})
    return Keyring("arn:test", fetch=lambda ref, deadline: value)


class Deployment:
    """A signed deployment: its tasks (``evil`` records whether it ever ran) and its store."""

    def __init__(self):
        from kindling.core.registry import Registry
        from kindling.stores.results import MemoryResultStore

        self.evil_ran: list = []
        self.store = MemoryResultStore()
        self.registry = Registry()

        @self.registry.task(name="add")
        def add(*numbers):
            return sum(numbers)

        @self.registry.task(name="evil")
        def evil(*args):
            self.evil_ran.append(args)

    def runner(self):
        from kindling.engine.runner import Runner
        from kindling.shared.signed import Verifier

        return Runner(self.registry, self.store, max_attempts=3, log=None, metrics=False, safety_ms=100,
                      cutoff_ms=50, verifier=Verifier(keyring()))

    def worker(self, url, stream):
        from kindling.valkey import StreamWorker

        return StreamWorker(url, runner=self.runner(), stream=stream, block_ms=50, visibility_ms=60_000,
                            heartbeat=False)


def forge(client, stream, body: bytes, deliveries: int) -> str:
    """XADD an unsigned entry and deliver it ``deliveries`` times to a consumer that is gone,
    leaving it idle long enough for any worker to reclaim it at once."""
    entry = client.xadd(stream, {b"job": body})
    if not _has_group(client, stream):
        client.xgroup_create(stream, "kindling", id="0", mkstream=True)
    client.xreadgroup("kindling", "ghost", {stream: ">"}, count=100)
    for _ in range(deliveries - 1):
        client.xclaim(stream, "kindling", "ghost", 0, [entry])
    client.xclaim(stream, "kindling", "ghost", 0, [entry], idle=3_600_000, justid=True)
    (info,) = client.xpending_range(stream, "kindling", min=entry, max=entry, count=1)
    assert info["times_delivered"] == deliveries
    return entry.decode() if isinstance(entry, bytes) else entry


def _has_group(client, stream) -> bool:
    try:
        return any(g["name"] in (b"kindling", "kindling") for g in client.xinfo_groups(stream))
    except Exception:  # noqa: BLE001 - no stream yet
        return False


def forgeries(victim_id: str):
    """Two forged bodies: one naming a finished job with a chain step of the forger's choosing,
    one naming a chord member that has not run."""
    from kindling.core.envelope import encode_job, new_job
    from kindling.engine.followups import member_id

    chained = new_job("add", [1], job_id=victim_id, chain=[{"task": "evil", "args": ["pwned"], "kwargs": {}}])
    member = new_job("add", [2], job_id=member_id(CHORD, 0),
                     parent={"id": CHORD, "index": 0, "size": 2, "then": THEN})
    return encode_job(chained), encode_job(member)


def real_job(url, stream, dep: Deployment, worker) -> tuple[str, dict]:
    """A job the deployment really ran (signed, succeeded): the one a forger names."""
    from kindling.valkey import StreamProducer

    job = StreamProducer(url, stream=stream, signing=keyring()).enqueue("add", 20, 22)
    outcomes = []
    for _ in range(5):
        outcomes += worker.process(worker.fetch(50))
        if outcomes:
            break
    assert [o.status for o in outcomes] == ["succeeded"]
    return job.id, dict(dep.store.records[job.id])


def assert_nothing_acted_on(client, stream, dep: Deployment, outcomes, victim_id: str, victim: dict, entries):
    from kindling.engine.followups import chord_key, member_id

    forged = [o for o in outcomes if o.ref in entries]
    assert sorted(o.status for o in forged) == ["rejected", "rejected"], [(o.status, o.reason) for o in forged]
    assert all(o.job_id == f"rejected#{o.ref}" for o in forged)
    assert all("unsigned message" in o.reason for o in forged)
    for entry in entries:
        assert dep.store.records[f"rejected#{entry}"]["status"] == "rejected"
    assert dep.store.records[victim_id] == victim  # the named job's record untouched
    assert member_id(CHORD, 0) not in dep.store.records
    assert chord_key(CHORD) not in dep.store.records  # the chord is not failed
    assert dep.evil_ran == []
    assert client.xlen(stream) == 0  # no chain step enqueued; the forgeries acknowledged
    assert client.xlen(dead_key(stream)) == 0


def test_the_stream_worker_rejects_a_forged_entry_delivered_past_its_attempts(url, stream):
    from kindling.valkey import connect

    dep = Deployment()
    worker = dep.worker(url, stream)
    client = connect(url)
    victim_id, victim = real_job(url, stream, dep, worker)
    entries = [forge(client, stream, body, deliveries=7) for body in forgeries(victim_id)]

    outcomes = []
    for _ in range(5):
        outcomes += worker.process(worker.fetch(50))

    assert_nothing_acted_on(client, stream, dep, outcomes, victim_id, victim, entries)


def test_the_stream_worker_loop_rejects_a_forged_entry_delivered_past_its_attempts(url, stream):
    from kindling.valkey import connect

    dep = Deployment()
    worker = dep.worker(url, stream)
    client = connect(url)
    victim_id, victim = real_job(url, stream, dep, worker)
    entries = [forge(client, stream, body, deliveries=4) for body in forgeries(victim_id)]

    counts = worker.run(burst=True)

    assert counts.get("rejected") == 2 and "dead" not in counts, counts
    rejected = [dep.store.records[f"rejected#{e}"] for e in entries]
    assert all(r["status"] == "rejected" for r in rejected)
    from kindling.engine.runner import Outcome

    outcomes = [Outcome(e, f"rejected#{e}", None, "rejected", 4) for e in entries]
    for o in outcomes:
        o.reason = dep.store.records[o.job_id]["error"]["message"]
    assert_nothing_acted_on(client, stream, dep, outcomes, victim_id, victim, entries)


def test_the_lambda_drain_rejects_a_forged_entry_delivered_past_its_attempts(url, stream, monkeypatch):
    from kindling.triggers.valkey.lambda_drain import drain
    from kindling.valkey import connect

    dep = Deployment()
    client = connect(url)
    victim_id, victim = real_job(url, stream, dep, dep.worker(url, stream))
    entries = [forge(client, stream, body, deliveries=9) for body in forgeries(victim_id)]

    deadline = time.monotonic() + 5

    def remaining_ms() -> int:
        return max(0, int((deadline - time.monotonic()) * 1000))

    monkeypatch.setenv("KINDLING_VALKEY_URL", url)  # the deployment names the server and streams, not the event
    monkeypatch.setenv("KINDLING_VALKEY_STREAMS", stream)
    summary = drain(dep.runner(), {"kindling": "drain", "stream": stream}, remaining_ms, invoker=list)

    assert summary["counts"] == {"rejected": 2}, summary
    from kindling.engine.runner import Outcome

    outcomes = [Outcome(e, f"rejected#{e}", None, "rejected", 9) for e in entries]
    for o in outcomes:
        o.reason = dep.store.records[o.job_id]["error"]["message"]
    assert_nothing_acted_on(client, stream, dep, outcomes, victim_id, victim, entries)


def test_a_signed_entry_delivered_past_its_own_attempts_is_recorded_dead_and_one_allowed_more_runs(url, stream):
    """The same crash-loop rule, judged by the runner on a verified job, with the job's own
    allowance: 4 deliveries is past the default 3 attempts, not past a job's 6."""
    from kindling.producer.client import Call
    from kindling.valkey import StreamProducer, connect

    dep = Deployment()
    worker = dep.worker(url, stream)
    client = connect(url)
    worker.ensure_group()
    producer = StreamProducer(url, stream=stream, signing=keyring())
    crashy, patient = producer.enqueue_many([Call("add", (1,)), Call("add", (2,), max_attempts=6)])
    client.xreadgroup("kindling", "ghost", {stream: ">"}, count=10)
    for _ in range(2):
        client.xclaim(stream, "kindling", "ghost", 0, [crashy.entry, patient.entry])
    client.xclaim(stream, "kindling", "ghost", 0, [crashy.entry, patient.entry], idle=3_600_000, justid=True)

    outcomes = worker.process(worker.fetch(50))  # reclaimed: their 4th delivery

    assert {o.job_id: (o.status, o.deliveries) for o in outcomes} == {crashy.id: ("dead", 4),
                                                                      patient.id: ("succeeded", 4)}
    dead = dep.store.records[crashy.id]
    assert dead["error"]["type"] == "TooManyDeliveries" and "delivered 4 times" in dead["error"]["message"]
    ((_, fields),) = client.xrange(dead_key(stream))
    assert fields[b"job_id"].decode() == crashy.id and fields[b"sig"].startswith(b"v1:k1:")


# -- the operator's tools: kindling jobs retry --valkey, kindling dlq redrive --valkey ---------------


class Dying:
    """A signed deployment with its records in Valkey, whose ``boom`` jobs die at once."""

    def __init__(self, url, stream):
        from kindling.core.registry import Registry
        from kindling.engine.runner import Runner
        from kindling.shared.signed import Verifier
        from kindling.valkey import StreamWorker, ValkeyResultStore

        self.store = ValkeyResultStore(url, prefix=f"forge{uuid.uuid4().hex[:6]}")
        reg = Registry()

        @reg.task(name="boom", max_attempts=1)
        def boom(x):
            raise RuntimeError(f"boom {x}")

        runner = Runner(reg, self.store, log=None, metrics=False, verifier=Verifier(keyring()))
        self.worker = StreamWorker(url, runner=runner, stream=stream, block_ms=50, heartbeat=False)
        self.url, self.stream = url, stream

    def send(self, *xs):
        from kindling.valkey import StreamProducer

        return StreamProducer(self.url, stream=self.stream, signing=keyring()).enqueue_many(
            [("boom", (x,), {}) for x in xs])

    def kill(self, *xs):
        jobs = self.send(*xs)
        assert self.worker.run(burst=True) == {"dead": len(xs)}
        return jobs

    def ops(self):
        from kindling.tools.ops import dead_stream

        return (dead_stream.DeadStream(self.url, self.stream, keyring=keyring()),
                dead_stream.ValkeyRecords(self.url, prefix=self.store.prefix))


def forged_dead_entry(client, stream, victim_id: str) -> str:
    """What a forger adds to the dead stream: an unsigned body naming a real job (and a chord),
    with the ``job_id`` field the worker writes."""
    from kindling.core.envelope import encode_job, new_job

    body = encode_job(new_job("boom", ["forged"], job_id=victim_id,
                              parent={"id": CHORD, "index": 0, "size": 2, "then": THEN}))
    entry = client.xadd(dead_key(stream), {b"job": body, b"job_id": victim_id, b"error": b"x", b"attempts": b"1"})
    return entry.decode() if isinstance(entry, bytes) else entry


def test_a_retry_acts_only_on_the_signed_entry_of_the_job_never_a_forged_one(url, stream):
    from kindling.engine.followups import chord_key
    from kindling.valkey import connect

    dying = Dying(url, stream)
    client = connect(url)
    (job,) = dying.send(1)
    forged = forged_dead_entry(client, stream, job.id)  # older than the real entry: searched first
    assert dying.worker.run(burst=True) == {"dead": 1}
    ((_, real_fields),) = [(i, f) for i, f in client.xrange(dead_key(stream)) if f.get(b"sig")]
    dead_stream, records = dying.ops()
    from kindling.tools.ops.dead_stream import retry

    done = retry(dead_stream, records, job.id)

    assert (done["previous_status"], done["generation"]) == ("dead", 2)
    ((_, sent),) = client.xrange(stream)
    assert sent[b"job"] == real_fields[b"job"] and sent[b"sig"] == real_fields[b"sig"]
    assert [i.decode() for i, _ in client.xrange(dead_key(stream))] == [forged]  # left where it is
    assert dying.store.record(chord_key(CHORD)) is None


def test_a_retry_refuses_a_job_whose_only_dead_entry_is_not_validly_signed(url, stream):
    from kindling.tools.ops.dead_stream import retry
    from kindling.tools.ops.revive import RetryRefused
    from kindling.valkey import connect

    dying = Dying(url, stream)
    client = connect(url)
    (job,) = dying.kill(2)
    ((real_entry, _),) = client.xrange(dead_key(stream))
    client.xdel(dead_key(stream), real_entry)  # trimmed: only the forger's entry names the job now
    forged_dead_entry(client, stream, job.id)
    dead_stream, records = dying.ops()

    with pytest.raises(RetryRefused, match="not validly signed.*unsigned message"):
        retry(dead_stream, records, job.id)

    record = dying.store.get(job.id)
    assert (record["status"], record.get("generation", 1)) == ("dead", 1)  # not revived
    assert client.xlen(stream) == 0 and client.xlen(dead_key(stream)) == 1


def test_a_redrive_moves_and_revives_only_validly_signed_entries(url, stream):
    from kindling.engine.followups import chord_key
    from kindling.tools.ops.dead_stream import redrive
    from kindling.valkey import connect

    dying = Dying(url, stream)
    client = connect(url)
    real, victim = dying.kill(3, 4)
    victim_entry = next(i for i, f in client.xrange(dead_key(stream)) if f[b"job_id"] == victim.id.encode())
    client.xdel(dead_key(stream), victim_entry)
    forged = forged_dead_entry(client, stream, victim.id)
    dead_stream, records = dying.ops()
    lines: list[str] = []

    report = redrive(dead_stream, records, progress=lines.append)

    assert (report["moved"], report["revived"], report["unverified"], report["total"]) == (1, 1, 1, 2), report
    assert any(forged in line and "unsigned message" in line for line in lines), lines
    assert dying.store.get(real.id)["status"] == "queued"
    assert dying.store.get(victim.id)["status"] == "dead"  # the job the forgery names is not revived
    assert dying.store.record(chord_key(CHORD)) is None
    ((_, sent),) = client.xrange(stream)
    assert sent[b"sig"].startswith(b"v1:k1:")
    assert [i.decode() for i, _ in client.xrange(dead_key(stream))] == [forged]


def test_the_redrive_command_checks_signatures_with_the_deployments_secret(url, stream, moto_endpoint, monkeypatch,
                                                                          capsys):
    import boto3
    from kindling.tools.cli import main
    from kindling.valkey import connect

    value = json.dumps({"current": "k1", "keys": {"k1": base64.b64encode(KEY).decode()}})
    arn = boto3.client("secretsmanager").create_secret(Name=f"forge-{uuid.uuid4().hex[:8]}",
                                                       SecretString=value)["ARN"]
    dying = Dying(url, stream)
    client = connect(url)
    (job,) = dying.kill(5)
    forged = forged_dead_entry(client, stream, job.id)
    monkeypatch.setenv("KINDLING_SIGNING_SECRET", arn)
    monkeypatch.setenv("KINDLING_VALKEY_URL", url)
    capsys.readouterr()

    code = main(["dlq", "redrive", "--valkey", "--stream", stream, "--no-revive"])

    out = capsys.readouterr().out
    assert code == 1 and "moved 1 of 2" in out and "1 not validly signed (left in the dead stream)" in out, out
    assert [i.decode() for i, _ in client.xrange(dead_key(stream))] == [forged]
    ((_, sent),) = client.xrange(stream)
    assert sent[b"sig"].startswith(b"v1:k1:")
