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
    from kindling.signed import Keyring

    value = json.dumps({"current": "k1", "keys": {"k1": base64.b64encode(key).decode()}})
    return Keyring("arn:test", fetch=lambda ref, deadline: value)


class Deployment:
    """A signed deployment: its tasks (``evil`` records whether it ever ran) and its store."""

    def __init__(self):
        from kindling.registry import Registry
        from kindling.results import MemoryResultStore

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
        from kindling.runner import Runner
        from kindling.signed import Verifier

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
    client.xgroup_create(stream, "kindling", id="0", mkstream=True) if not _has_group(client, stream) else None
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
    from kindling.envelope import encode_job, new_job
    from kindling.followups import member_id

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
        outcomes += worker.process(worker.fetch(50)) if worker is not None else []
        if outcomes:
            break
    assert [o.status for o in outcomes] == ["succeeded"]
    return job.id, dict(dep.store.records[job.id])


def assert_nothing_acted_on(client, stream, dep: Deployment, outcomes, victim_id: str, victim: dict, entries):
    from kindling.followups import chord_key, member_id

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
    assert client.xlen(f"{stream}:dead") == 0


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
    from kindling.runner import Outcome

    outcomes = [Outcome(e, f"rejected#{e}", None, "rejected", 4) for e in entries]
    for o in outcomes:
        o.reason = dep.store.records[o.job_id]["error"]["message"]
    assert_nothing_acted_on(client, stream, dep, outcomes, victim_id, victim, entries)


def test_the_lambda_drain_rejects_a_forged_entry_delivered_past_its_attempts(url, stream):
    from kindling.valkey import connect
    from kindling.valkey.lambda_drain import drain

    dep = Deployment()
    client = connect(url)
    victim_id, victim = real_job(url, stream, dep, dep.worker(url, stream))
    entries = [forge(client, stream, body, deliveries=9) for body in forgeries(victim_id)]

    deadline = time.monotonic() + 5

    def remaining_ms() -> int:
        return max(0, int((deadline - time.monotonic()) * 1000))

    summary = drain(dep.runner(), {"kindling": "drain", "stream": stream, "url": url}, remaining_ms, invoker=list)

    assert summary["counts"] == {"rejected": 2}, summary
    from kindling.runner import Outcome

    outcomes = [Outcome(e, f"rejected#{e}", None, "rejected", 9) for e in entries]
    for o in outcomes:
        o.reason = dep.store.records[o.job_id]["error"]["message"]
    assert_nothing_acted_on(client, stream, dep, outcomes, victim_id, victim, entries)


def test_a_signed_entry_delivered_past_its_own_attempts_is_recorded_dead_and_one_allowed_more_runs(url, stream):
    """The same crash-loop rule, judged by the runner on a verified job, with the job's own
    allowance: 4 deliveries is past the default 3 attempts, not past a job's 6."""
    from kindling.client import Call
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
    ((_, fields),) = client.xrange(f"{stream}:dead")
    assert fields[b"job_id"].decode() == crashy.id and fields[b"sig"].startswith(b"v1:k1:")
