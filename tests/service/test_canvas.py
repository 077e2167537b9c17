"""Chains and chords: the worker's rules (kindling.engine.followups) and the API (kindling.producer.canvas).

The runner runs against a memory store with a ``send`` that collects what it enqueues; the
DynamoDB store's count and reads run on moto; the SQS handler's sends on moto's SQS.
"""

import subprocess
import sys
from pathlib import Path

import pytest
from kindling import chain, group
from kindling.core import codec
from kindling.core.envelope import MAX_ID_LENGTH, decode_job, encode_job, new_job
from kindling.core.errors import JobFailed, StoreUnavailable
from kindling.core.registry import Registry
from kindling.engine import followups
from kindling.engine.followups import callback_id, chord_key, member_id, next_id
from kindling.engine.runner import Delivery, Runner
from kindling.producer.canvas import MAX_CHAIN, ChainHandle, Signature, chord
from kindling.stores.results import DynamoResultStore, MemoryResultStore
from kindling.tools.testing import eager
from support import chords

ROOT = Path(__file__).resolve().parents[2]


def registry_tasks(r: Registry) -> None:
    """This module's tasks, on the fresh registry the shared ``reg`` fixture gives each test."""
    chords.chord_tasks(r)  # add and total, noting their runs

    @r.task(name="boom", max_attempts=1)
    def boom(*args):
        raise RuntimeError("member failed")

    @r.task(name="flaky", max_attempts=3)
    def flaky(x):
        from kindling import current_job

        if current_job().attempt == 1:
            raise RuntimeError("first attempt fails")
        return x


class Sent(list):
    """A trigger's send: collects jobs; ``fail`` makes it raise like a queue that is down."""

    fail = False

    def __call__(self, jobs):
        if self.fail:
            raise ConnectionError("queue unreachable")
        self.extend(jobs)


class RecordingValkey:
    """A Valkey client for a StreamWorker that records each executed pipeline's commands as
    ``(command, args)``; every reply is None (0 for a length)."""

    def __init__(self):
        self.pipes: list[list[tuple[str, tuple]]] = []

    def register_script(self, script):
        return None

    def pipeline(self, transaction=False):
        return _RecordingPipe(self.pipes)

    def added(self) -> list[dict]:
        """The fields of every XADD, in order."""
        return [args[1] for pipe in self.pipes for command, args in pipe if command == "xadd"]


class _RecordingPipe(list):
    def __init__(self, pipes: list):
        super().__init__()
        self.pipes = pipes

    def __getattr__(self, command):  # xadd, xack, xdel, ...
        return lambda *args, **kwargs: self.append((command, args))

    def execute(self):
        self.pipes.append(list(self))
        return [0 if command == "xlen" else None for command, _ in self]


@pytest.fixture
def runner(reg, store):
    return Runner(reg, store, log=None, metrics=False)


def deliver(runner, job, send, attempts=1):
    return runner.run([Delivery(f"m-{job.id}-{attempts}", encode_job(job).decode(), attempts)], send=send)[0]


def members(chord_id, calls, then):
    size = len(calls)
    return [new_job(task, args, job_id=member_id(chord_id, i),
                    parent={"id": chord_id, "index": i, "size": size, "then": then})
            for i, (task, args) in enumerate(calls)]


TOTAL = {"task": "total", "args": [], "kwargs": {"extra": 1}}


# -- chains -----------------------------------------------------------------------------------


def test_a_chain_step_gets_the_result_first_and_carries_the_rest(runner):
    sent = Sent()
    job = new_job("add", [1, 2], job_id="c1", chain=[{"task": "add", "args": [10], "kwargs": {}},
                                                     {"task": "add", "args": [], "kwargs": {"b": 100}}])
    assert deliver(runner, job, sent).status == "succeeded"
    (step,) = sent
    assert (step.task, step.args, step.kwargs, step.id) == ("add", [3, 10], {}, next_id("c1"))
    assert step.chain == [{"task": "add", "args": [], "kwargs": {"b": 100}}]
    deliver(runner, decode_job(encode_job(step)), sent)  # as the queue carries it
    last = sent[1]
    assert (last.args, last.kwargs, last.chain, last.id) == ([13], {"b": 100}, None, next_id(step.id))
    deliver(runner, last, sent)
    assert len(sent) == 2 and runner.store.records[last.id]["result"] == "113"


def test_a_chain_step_keeps_its_own_options(runner):
    sent = Sent()
    job = new_job("add", [1], chain=[{"task": "add", "args": [], "kwargs": {}, "max_attempts": 7, "timeout": 9}])
    deliver(runner, job, sent)
    assert (sent[0].max_attempts, sent[0].timeout) == (7, 9)


def test_a_step_that_does_not_succeed_ends_its_chain(runner):
    sent = Sent()
    deliver(runner, new_job("boom", chain=[{"task": "add", "args": [], "kwargs": {}}]), sent)
    deliver(runner, new_job("flaky", [1], chain=[{"task": "add", "args": [], "kwargs": {}}]), sent)  # failed
    assert sent == []


def test_chain_ids_are_derived_stable_distinct_and_valid():
    ids = ["01JD3ROOT"]
    for _ in range(MAX_CHAIN):
        ids.append(next_id(ids[-1]))
    assert len(set(ids)) == len(ids)
    assert next_id("01JD3ROOT") == next_id("01JD3ROOT")
    assert all(i.startswith("01JD3ROOT.next-") for i in ids[1:])
    longest = next_id("x" * MAX_ID_LENGTH)
    for job_id in [*ids, longest]:
        new_job("add", [1], job_id=job_id)  # valid envelope ids, all of them
    assert len(longest) <= MAX_ID_LENGTH


def test_a_duplicate_delivery_of_a_finished_step_sends_the_same_next_job(runner):
    """A worker that died after sending (before acknowledging) sends again on redelivery:
    the same id, with the result read back from the record."""
    sent = Sent()
    job = new_job("add", [2, 3], chain=[{"task": "add", "args": [], "kwargs": {}}])
    deliver(runner, job, sent)
    again = deliver(runner, job, sent, attempts=2)
    assert again.status == "skipped"
    assert [(j.id, j.args) for j in sent] == [(next_id(job.id), [5])] * 2
    # and the runner's duplicate check runs that next job once
    first, second = (deliver(runner, j, Sent()) for j in sent)
    assert (first.status, second.status) == ("succeeded", "skipped")


def test_a_chain_whose_send_fails_is_handed_back_and_sent_on_redelivery(runner, store):
    sent = Sent()
    sent.fail = True
    job = new_job("add", [1, 1], chain=[{"task": "add", "args": [], "kwargs": {}}])
    outcome = deliver(runner, job, sent)
    assert outcome.status == "deferred" and "queue unreachable" in outcome.reason
    assert outcome.retry_in and store.records[job.id]["status"] == "succeeded"  # recorded, not run again
    sent.fail = False
    assert deliver(runner, job, sent, attempts=2).status == "skipped"
    assert [j.args for j in sent] == [[2]]
    assert [r for r in runner.registry.runs if r[0] == "add"] == [("add", 1, 1)]


def test_a_redacted_step_whose_send_failed_ends_its_chain_instead_of_passing_none_on(reg, store):
    """A redact=True task's result is not recorded: a duplicate delivery cannot know it, so the
    chain ends there (logged), rather than sending the next step with None for the result."""

    @reg.task(name="secret", redact=True)
    def secret(x):
        return {"token": x}

    lines = []
    runner = Runner(reg, store, log=lines.append, metrics=False)
    sent = Sent()
    sent.fail = True
    job = new_job("secret", ["s3cr3t"], chain=[{"task": "add", "args": [1], "kwargs": {}}])
    assert deliver(runner, job, sent).status == "deferred"
    sent.fail = False
    assert deliver(runner, job, sent, attempts=2).status == "skipped"
    assert sent == []  # not add(None, 1)
    assert any("chain ends" in str(line.get("message")) and "redact" in str(line.get("message")) for line in lines)


# -- chords -----------------------------------------------------------------------------------


def test_the_callback_runs_once_after_every_member_with_results_in_order(runner, store):
    sent = Sent()
    jobs = members("g1", [("add", [i, i]) for i in range(5)], TOTAL)
    for job in reversed(jobs):  # finishing order is not the group's order
        deliver(runner, job, sent)
    (cb,) = sent
    assert (cb.id, cb.task, cb.args, cb.kwargs) == (callback_id("g1"), "total", [[0, 2, 4, 6, 8]], {"extra": 1})
    record = store.records[chord_key("g1")]
    assert record["status"] == "completed" and record["done"] == {"0", "1", "2", "3", "4"}
    assert record["callback"] == "g1.then"
    assert deliver(runner, cb, Sent()).status == "succeeded"
    assert store.records["g1.then"]["result"] == "21"


def test_duplicate_deliveries_of_members_count_once_and_send_the_callback_once(runner, store):
    sent = Sent()
    a, b, c = members("g2", [("add", [1]), ("add", [2]), ("add", [3])], TOTAL)
    for job in (a, a, b, a, b):  # duplicates before the chord completes
        deliver(runner, job, sent)
    assert store.records[chord_key("g2")]["done"] == {"0", "1"} and sent == []
    deliver(runner, c, sent)
    deliver(runner, c, sent, attempts=2)  # after it completed
    deliver(runner, a, sent, attempts=3)
    assert [j.id for j in sent] == ["g2.then"]
    # two copies of the last member in one batch: run once, counted once
    x, y = members("g3", [("add", [1]), ("add", [2])], TOTAL)
    deliver(runner, x, sent)
    body = encode_job(y).decode()
    runner.run([Delivery("r1", body), Delivery("r2", body)], send=sent)
    assert [j.id for j in sent] == ["g2.then", "g3.then"]


def test_a_member_retried_is_counted_once_when_it_succeeds(runner, store):
    sent = Sent()
    a, b = members("g4", [("flaky", [7]), ("add", [1])], TOTAL)
    deliver(runner, b, sent)
    assert deliver(runner, a, sent).status == "failed"
    assert store.records[chord_key("g4")]["done"] == {"1"}  # a failed attempt is not final
    assert deliver(runner, a, sent, attempts=2).status == "succeeded"
    assert [(j.id, j.args) for j in sent] == [("g4.then", [[7, 1]])]


def test_a_dead_member_fails_the_chord_and_the_callback_never_runs(runner, store):
    sent = Sent()
    jobs = members("g5", [("add", [1]), ("boom", []), ("add", [3])], TOTAL)
    outcomes = [deliver(runner, job, sent) for job in jobs]
    assert [o.status for o in outcomes] == ["succeeded", "dead", "succeeded"]
    assert sent == []
    record = store.records[chord_key("g5")]
    assert record["status"] == "dead" and record["dead"] == {"1"} and record["done"] == {"0", "1", "2"}
    assert record["error"]["type"] == "ChordFailed" and "member 1" in record["error"]["message"]
    assert "member failed" in record["error"]["message"]
    deliver(runner, jobs[1], sent, attempts=2)  # the dead member again: still no callback
    assert sent == []


def test_a_member_whose_record_is_gone_fails_the_chord_instead_of_waiting_for_ever(runner, store):
    """A counted member was recorded before it was counted, so a record gone when the chord
    completes (expired after the results' TTL, or deleted) never comes back: the chord fails,
    and the completing member is acknowledged, not handed back until its DLQ."""
    sent = Sent()
    jobs = members("g9", [("add", [1]), ("add", [2]), ("add", [3])], TOTAL)
    deliver(runner, jobs[0], sent)
    deliver(runner, jobs[1], sent)
    del store.records[jobs[0].id]  # expired
    last = deliver(runner, jobs[2], sent)
    assert last.status == "succeeded" and sent == []
    record = store.records[chord_key("g9")]
    assert record["status"] == "dead" and record["dead"] == {"0"}
    assert "member 0" in record["error"]["message"] and "no record" in record["error"]["message"]


def test_a_rejected_member_fails_the_chord_too(runner, store):
    sent = Sent()
    a, b = members("g6", [("add", [1]), ("no_such_task", [])], TOTAL)
    deliver(runner, a, sent)
    assert deliver(runner, b, sent).status == "rejected"
    assert store.records[chord_key("g6")]["status"] == "dead" and sent == []


def test_a_callback_whose_send_failed_is_sent_by_a_redelivery_once_its_claim_lapses(runner, store, monkeypatch):
    """The completing worker claimed the chord, then the send failed. The member comes back;
    while the claim's lease runs (the callback's time limit and a margin: a send that raised
    may still have gone out) it is handed back for the rest of the lease, then it sends."""
    clock = chords.Clock(monkeypatch)
    sent = Sent()
    a, b = members("g7", [("add", [1]), ("add", [2])], TOTAL)
    deliver(runner, a, sent)
    sent.fail = True
    assert deliver(runner, b, sent).status == "deferred"
    record = store.records[chord_key("g7")]
    assert (record["status"], record["callback"], record.get("sent_at")) == ("completed", "g7.then", None)
    sent.fail = False
    held = deliver(runner, b, sent, attempts=2)
    lease_s = runner.default_timeout + followups.CLAIM_MARGIN_S
    assert held.status == "deferred" and lease_s - 5 <= held.retry_in <= lease_s and sent == []
    clock.past_the_lease()
    assert deliver(runner, b, sent, attempts=3).status == "skipped"
    assert [j.id for j in sent] == ["g7.then"] and store.records[chord_key("g7")]["sent_at"] > 0
    deliver(runner, b, sent, attempts=4)
    assert len(sent) == 1


def test_a_member_with_a_chain_is_not_handed_back_after_its_step_is_sent(reg, store):
    """A job may carry both a chain and a parent (the envelope allows it). Its chord count
    fails once: the chain's next step must not have gone out before that, or the member's
    redelivery would send it again while it runs."""
    sent: list = []
    trap = chords.Trap(store, sent)
    runner = Runner(reg, trap, log=None, metrics=False)
    step = {"task": "add", "args": [], "kwargs": {}}
    (member,) = [new_job("add", [1], job_id=member_id("gc", 0), chain=[step],
                         parent={"id": "gc", "index": 0, "size": 1, "then": TOTAL})]
    trap.fail_on("count_member", StoreUnavailable("table unreachable"))
    first = runner.run([Delivery("m1", encode_job(member).decode())], send=trap.send)[0]
    assert first.status == "deferred", first.reason
    trap.arm(None)
    runner.run([Delivery("m2", encode_job(member).decode(), 2)], send=trap.send)
    assert sorted(j.id for j in sent) == sorted([next_id(member.id), callback_id("gc")])


def test_a_chord_completed_by_an_older_worker_counts_as_sent(runner, store):
    """Before the claim, a chord was marked ``completed`` after its send, with no
    ``completed_at``: a member delivered again finds its callback sent, even with no record."""
    sent = Sent()
    a, b = members("go", [("add", [1]), ("add", [2])], TOTAL)
    deliver(runner, a, sent)
    deliver(runner, b, sent)
    record = store.records[chord_key("go")]
    for field in ("completed_at", "sent_at"):
        del record[field]
    sent.clear()
    assert deliver(runner, b, sent, attempts=2).status == "skipped" and sent == []


def test_a_store_down_while_counting_hands_the_member_back(runner, store):
    sent = Sent()
    (a,) = members("g8", [("add", [1])], TOTAL)

    def down(*args, **kwargs):
        from kindling.core.errors import StoreUnavailable

        raise StoreUnavailable("table unreachable")

    store.count_member, real = down, store.count_member
    assert deliver(runner, a, sent).status == "deferred"
    store.count_member = real
    deliver(runner, a, sent, attempts=2)
    assert [j.id for j in sent] == ["g8.then"]


# -- the callback, exactly once: a failure or a crash at each step of the completing member ---


@pytest.fixture(params=["memory", "dynamodb"])
def chord_store(request):
    """The store as each worker process opens it: one memory store, or one table through a
    client (a connection) of its own."""
    if request.param == "memory":
        store = MemoryResultStore()
        return lambda: store
    from kindling.drivers.aws import JsonClient

    table = request.getfixturevalue("table")
    return lambda: DynamoResultStore(table, client=JsonClient("dynamodb", "DynamoDB_20120810"))


def test_a_failed_mark_of_the_chord_does_not_send_or_run_its_callback_twice(reg, chord_store, monkeypatch):
    """The callback is sent, then the store fails the chord's next write. The member is not
    handed back to send it again, and a copy of it delivered again while the callback still
    runs does not send another."""
    clock = chords.Clock(monkeypatch)
    steps = chords.steps_of_the_completing_member(reg, chord_store, "mk-probe")
    after_send = steps.index("send") + 1
    assert after_send < len(steps), steps  # the chord is written after its callback is sent
    assert chords.complete_with_a_fault(reg, chord_store, clock, "mk", after_send,
                                        StoreUnavailable("table unreachable")) == (1, 1)


def test_a_failure_at_any_step_of_the_completing_member_sends_and_runs_the_callback_once(
        reg, chord_store, monkeypatch):
    """Each call the completing member makes fails once, before taking effect or after it
    (its reply lost): one copy of the callback is sent, and it runs once, with the member
    delivered again both while the callback runs and after it. (A send whose outcome is
    unknown is a death after the send: see the next test. A call only started, the batch's
    read and write, fails when its reply is collected: as if it failed before.)"""
    clock = chords.Clock(monkeypatch)
    steps = chords.steps_of_the_completing_member(reg, chord_store, "fa-probe")
    for at, step in enumerate(steps):
        for after in (False,) if step == "send" or step.startswith("begin_") else (False, True):
            chord_id = f"fa{at}{'after' if after else 'before'}"
            outcome = chords.complete_with_a_fault(reg, chord_store, clock, chord_id, at, chords.failure_at(step),
                                                   after=after)
            assert outcome == (1, 1), (step, after)


def test_a_crash_at_any_step_of_the_completing_member_runs_the_callback_once(reg, chord_store, monkeypatch):
    """The worker dies after each step (and after the last: its message never settled), and
    the member is delivered again: while the callback runs, and after the claim's lease.
    One copy of the callback is sent, and it runs once."""
    clock = chords.Clock(monkeypatch)
    steps = chords.steps_of_the_completing_member(reg, chord_store, "cr-probe")
    for at in range(len(steps) + 1):
        outcome = chords.complete_with_a_fault(reg, chord_store, clock, f"cr{at}", at, chords.Crash())
        assert outcome == (1, 1), steps[at:at + 1]


def test_a_callback_unrecorded_past_its_lease_is_sent_again_and_still_runs_once(reg, chord_store, monkeypatch):
    """What no record can tell apart: a claimer that died (or lost its mark) right after the
    send, and one that died before it. Once the claim's lease is over (the callback's time
    limit and a margin) and the callback still has no record, a delivery of the member sends
    it again, so a callback is never lost; the copies carry one id and the runner skips the
    one delivered after the other's success. Every other step sends it once."""
    clock = chords.Clock(monkeypatch)
    steps = chords.steps_of_the_completing_member(reg, chord_store, "lw-probe")
    send = steps.index("send")
    for at in range(len(steps) + 1):
        copies, runs = chords.complete_with_a_fault(reg, chord_store, clock, f"lw{at}", at, chords.Crash(),
                                                    callback_waits=True)
        assert runs == 1 and copies == (2 if send < at < len(steps) else 1), (steps[at:at + 1], copies, runs)


def test_a_group_without_callback_is_completed_and_sends_nothing(runner, store):
    sent = Sent()
    for job in members("g9", [("add", [1]), ("add", [2])], None):
        deliver(runner, job, sent)
    assert sent == [] and store.records[chord_key("g9")]["status"] == "completed"


# -- large values: results kept in S3, follow-ups too large for their queue ------------------


@pytest.fixture
def big(reg):
    """Tasks with large values: ``big(n)`` returns n characters, ``length(x)`` their count."""
    reg.task(name="big")(lambda n: "r" * n)
    reg.task(name="length")(lambda x, *rest: len(x))
    return reg


def s3_runner(reg, store, bucket, moto_endpoint, **options):
    from kindling.drivers.aws.s3 import S3Client

    return Runner(reg, store, metrics=False, payload_bucket=bucket, s3=S3Client(endpoint=moto_endpoint),
                  **{"log": None, **options})


def test_a_result_kept_in_s3_is_passed_on_to_the_next_step_and_the_callback(big, store, bucket, moto_endpoint):
    from kindling.core.records import MAX_RESULT_BYTES

    n = MAX_RESULT_BYTES + 10
    runner = s3_runner(big, store, bucket, moto_endpoint)
    sent = Sent()
    step = new_job("big", [n], chain=[{"task": "length", "args": [], "kwargs": {}}])
    assert deliver(runner, step, sent).status == "succeeded"
    assert "result_payload" in store.records[step.id]  # kept in S3, yet passed on from memory
    (after,) = sent
    assert after.id == next_id(step.id) and after.args == ["r" * n]
    # a duplicate delivery reads the record and fetches the result from S3: the same job again
    assert deliver(runner, step, sent, attempts=2).status == "skipped"
    assert (sent[1].id, sent[1].task, sent[1].args) == (after.id, after.task, after.args)
    # a chord's callback collects every member's result, fetching the one kept in S3
    sent.clear()
    for job in members("gl", [("big", [n]), ("add", [1])], {"task": "length", "args": [], "kwargs": {}}):
        deliver(runner, job, sent)
    (then,) = sent
    assert then.id == callback_id("gl") and then.args == [["r" * n, 1]]
    assert store.records[chord_key("gl")]["status"] == "completed"


def _warnings(lines):
    return [line["message"] for line in lines if line.get("level") == "WARNING"]


@pytest.mark.parametrize("damage", ["deleted", "shorter", "altered"])
def test_a_member_result_lost_from_s3_fails_the_chord_and_the_completing_member_is_acknowledged(
        big, store, bucket, moto_endpoint, damage):
    """Deleted, or not the bytes its pointer names: no retry brings it back, so the chord
    fails as it does for a dead member, instead of the last member deferred until the DLQ."""
    import boto3
    from kindling.core.records import MAX_RESULT_BYTES
    from kindling.producer.canvas import GroupHandle

    lines = []
    runner = s3_runner(big, store, bucket, moto_endpoint, log=lines.append)
    n = MAX_RESULT_BYTES + 10
    first, kept, last = members("gm", [("add", [1]), ("big", [n]), ("add", [2])], TOTAL)
    sent = Sent()
    deliver(runner, first, sent)
    deliver(runner, kept, sent)
    key = store.records[kept.id]["result_payload"]["key"]
    s3 = boto3.client("s3")
    if damage == "deleted":
        s3.delete_object(Bucket=bucket, Key=key)
    else:
        s3.put_object(Bucket=bucket, Key=key, Body=b'"' + b"x" * (n if damage == "altered" else 5) + b'"')
    outcome = deliver(runner, last, sent)
    assert (outcome.status, outcome.retry_in, sent) == ("succeeded", None, [])  # acknowledged, nothing sent
    record = store.records[chord_key("gm")]
    assert record["status"] == "dead" and record["dead"] == {"1"} and record["done"] == {"0", "1", "2"}
    message = record["error"]["message"]
    assert record["error"]["type"] == "ChordFailed" and message.startswith("member 1's result is lost: ")
    assert f"s3://{bucket}/{key}" in message
    assert {"deleted": "NoSuchKey", "shorter": "the pointer says", "altered": "sha256"}[damage] in message
    (warning,) = _warnings(lines)
    assert warning.startswith("chord gm failed: member 1's result is lost") and "callback will not run" in warning

    # readers see the failure; a redelivery of the last member changes nothing and says nothing new
    class Reader:
        def record(self, job_id):
            return store.records.get(job_id)

    with pytest.raises(JobFailed, match="member 1's result is lost"):
        GroupHandle("gm", 3, True, Reader()).result(timeout=1)
    assert deliver(runner, last, sent, attempts=2).status == "skipped"
    assert sent == [] and len(_warnings(lines)) == 1


def test_a_chain_step_whose_result_is_lost_from_s3_ends_its_chain_on_redelivery(big, store, bucket, moto_endpoint):
    """A duplicate delivery must read the step's result back to send the next one: with the
    object gone the chain ends there, said once in the log, and the delivery is acknowledged."""
    import boto3
    from kindling.core.records import MAX_RESULT_BYTES

    lines = []
    runner = s3_runner(big, store, bucket, moto_endpoint, log=lines.append)
    step = new_job("big", [MAX_RESULT_BYTES + 10], chain=[{"task": "length", "args": [], "kwargs": {}}])
    down = Sent()
    down.fail = True
    assert deliver(runner, step, down).status == "deferred"  # the queue refused the next step
    key = store.records[step.id]["result_payload"]["key"]
    boto3.client("s3").delete_object(Bucket=bucket, Key=key)
    sent = Sent()
    again = deliver(runner, step, sent, attempts=2)
    assert (again.status, again.retry_in, sent) == ("skipped", None, [])
    warning = _warnings(lines)[-1]
    assert warning.startswith(f"chain ends after {step.id}: its result is lost") and next_id(step.id) in warning
    assert f"s3://{bucket}/{key}" in warning and "NoSuchKey" in warning
    assert store.records[step.id]["status"] == "succeeded"  # the step itself did succeed


class FlakyS3:
    """Kindling's S3 client with reads that fail as it fails when S3 cannot answer now."""

    def __init__(self, s3, error):
        self.s3, self.error = s3, error

    def put_object(self, *args, **kwargs):
        return self.s3.put_object(*args, **kwargs)

    def get_object(self, *args, **kwargs):
        if self.error is not None:
            raise self.error
        return self.s3.get_object(*args, **kwargs)


@pytest.mark.parametrize("error", [
    ("SlowDown", "Please reduce your request rate.", 503, True),
    ("InternalError", "We encountered an internal error.", 500, True),
    ("ConnectionError", "ConnectionRefusedError: [Errno 111] Connection refused", 0, True),
    ("DeadlineExceeded", "no time left for another attempt", 0, True),
    # Not retryable, yet not a lost object: the worker's role or setup, which an operator can fix.
    ("AccessDenied", "Access Denied", 403, False),
], ids=lambda e: e[0])
def test_a_result_in_s3_that_cannot_be_read_now_hands_the_job_back(big, store, bucket, moto_endpoint, error):
    """S3 throttled, failing or out of reach: the chord waits and the chain stays where it
    is; both are tried again on redelivery and go on once S3 answers."""
    from kindling.core.records import MAX_RESULT_BYTES
    from kindling.drivers.aws.errors import AwsError
    from kindling.drivers.aws.s3 import S3Client

    s3 = FlakyS3(S3Client(endpoint=moto_endpoint), None)
    runner = Runner(big, store, metrics=False, log=None, payload_bucket=bucket, s3=s3)
    n = MAX_RESULT_BYTES + 10
    step = new_job("big", [n], chain=[{"task": "length", "args": [], "kwargs": {}}])
    first, second = members("gt", [("big", [n]), ("add", [1])], TOTAL)
    down = Sent()
    down.fail = True
    deliver(runner, step, down)
    deliver(runner, first, Sent())
    s3.error = AwsError(*error, attempts=5)
    sent = Sent()
    again = deliver(runner, step, sent, attempts=2)
    last = deliver(runner, second, sent)
    assert (again.status, last.status, sent) == ("deferred", "deferred", [])
    assert "PayloadUnavailable" in again.reason and error[0] in last.reason and again.retry_in
    assert store.records[chord_key("gt")]["status"] == "waiting"
    s3.error = None
    assert deliver(runner, step, sent, attempts=3).status == "skipped"
    assert deliver(runner, second, sent, attempts=2).status == "skipped"
    assert [j.id for j in sent] == [next_id(step.id), callback_id("gt")]
    assert store.records[chord_key("gt")]["status"] == "completed"


def test_handles_read_a_last_result_kept_in_s3(bucket, moto_endpoint):
    from kindling.drivers.aws.s3 import S3Client
    from kindling.producer.canvas import GroupHandle
    from kindling.shared import payloads

    s3 = S3Client(endpoint=moto_endpoint)
    ref = payloads.put(s3, bucket, "results", "h1", codec.dumps({"big": "r" * 1000}).encode())

    class Reader:
        """A producer that reads the results table: records, and the S3 client to follow a pointer."""

        def __init__(self):
            self.s3 = s3
            self.records = {"h1": {"status": "succeeded", "result_payload": ref},
                            chord_key("hg"): {"status": "completed"},
                            "hg.0": {"status": "succeeded", "result_payload": ref}}

        def record(self, job_id):
            return self.records.get(job_id)

    assert ChainHandle(["h1"], Reader()).result(timeout=1) == {"big": "r" * 1000}
    assert GroupHandle("hg", 1, False, Reader()).result(timeout=1) == [{"big": "r" * 1000}]


def sqs_event(*jobs, attempts=1):
    return {"Records": [{"messageId": f"m{n}", "body": encode_job(j).decode(), "eventSource": "aws:sqs",
                         "receiptHandle": f"r{n}", "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:q",
                         "attributes": {"ApproximateReceiveCount": str(attempts)}} for n, j in enumerate(jobs)]}


def test_the_sqs_handler_sends_a_follow_up_too_large_for_its_queue_through_s3(big, table, bucket, monkeypatch):
    import boto3
    from kindling.triggers.sqs.handler import LambdaWorker

    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=f"small-{table}", Attributes={"MaximumMessageSize": "1024"})["QueueUrl"]
    monkeypatch.setenv("KINDLING_TABLE", table)
    monkeypatch.setenv("KINDLING_QUEUE_URL", url)
    monkeypatch.setenv("KINDLING_PAYLOAD_BUCKET", bucket)
    worker = LambdaWorker(big, log=None, metrics=False)
    step = new_job("big", [3000], job_id="l1", chain=[{"task": "length", "args": [], "kwargs": {}}])
    # two steps whose next jobs fit one message each but not one batch together
    pair = [new_job("big", [500], job_id=f"p{i}", chain=[{"task": "length", "args": [], "kwargs": {}}])
            for i in range(2)]
    chord_members = members("gs", [("big", [600]), ("big", [600])], {"task": "length", "args": [], "kwargs": {}})
    assert worker(sqs_event(step, *pair, *chord_members), None) == {"batchItemFailures": []}
    messages = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        messages += batch
    jobs = {j.id: j for j in (decode_job(m["Body"]) for m in messages)}
    assert set(jobs) == {next_id("l1"), next_id("p0"), next_id("p1"), "gs.then"}
    assert jobs[next_id("l1")].payload["key"].startswith(f"args/{next_id('l1')}/") and jobs[next_id("l1")].args == []
    assert jobs["gs.then"].payload is not None and jobs[next_id("p0")].payload is None
    # the worker reads them back from S3 and runs them
    assert worker(sqs_event(*jobs.values()), None) == {"batchItemFailures": []}
    records = {i: boto3.client("dynamodb").get_item(TableName=table, Key={"id": {"S": i}})["Item"] for i in jobs}
    assert {i: r["result"]["S"] for i, r in records.items()} == {next_id("l1"): "3000", next_id("p0"): "500",
                                                                 next_id("p1"): "500", "gs.then": "2"}


def test_a_follow_up_too_large_for_its_queue_without_a_bucket_hands_the_job_back(big, table, monkeypatch):
    import boto3
    from kindling.triggers.sqs.handler import LambdaWorker

    url = boto3.client("sqs").create_queue(QueueName=f"nob-{table}",
                                           Attributes={"MaximumMessageSize": "1024"})["QueueUrl"]
    monkeypatch.setenv("KINDLING_TABLE", table)
    monkeypatch.setenv("KINDLING_QUEUE_URL", url)
    monkeypatch.delenv("KINDLING_PAYLOAD_BUCKET", raising=False)
    lines = []
    worker = LambdaWorker(big, log=lines.append, metrics=False)
    step = new_job("big", [3000], chain=[{"task": "length", "args": [], "kwargs": {}}])
    assert worker(sqs_event(step), None) == {"batchItemFailures": [{"itemIdentifier": "m0"}]}
    assert any("KINDLING_PAYLOAD_BUCKET" in str(line) for line in lines)
    assert "Messages" not in boto3.client("sqs").receive_message(QueueUrl=url)


def test_the_local_sqs_loop_sends_a_follow_up_too_large_for_its_queue_through_s3(big, table, bucket, monkeypatch):
    import boto3
    from kindling.triggers.sqs.loop import SqsWorker

    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=f"loopl-{table}", Attributes={"MaximumMessageSize": "1024"})["QueueUrl"]
    monkeypatch.setenv("KINDLING_PAYLOAD_BUCKET", bucket)
    step = new_job("big", [3000], chain=[{"task": "length", "args": [], "kwargs": {}}])
    sqs.send_message(QueueUrl=url, MessageBody=encode_job(step).decode())
    SqsWorker(url, table, registry=big, wait=1, log=None).run(burst=True, idle_timeout=10)
    item = boto3.client("dynamodb").get_item(TableName=table, Key={"id": {"S": next_id(step.id)}})["Item"]
    assert item["status"]["S"] == "succeeded" and item["result"]["S"] == "3000"


def test_the_valkey_worker_keeps_a_large_follow_up_inline_on_its_stream(big, store):
    """A stream entry has no queue's 1 MiB limit: no S3 round trip, no bucket needed."""
    from kindling.shared.valkey.connection import FIELD
    from kindling.triggers.valkey.worker import StreamWorker

    valkey = RecordingValkey()
    runner = Runner(big, store, log=None, metrics=False, payload_bucket="")
    step = new_job("length", ["x" * (2 * 1024 * 1024)])
    StreamWorker("redis://127.0.0.1:1/0", runner=runner, stream="s", client=valkey, heartbeat=False).send([step])
    (fields,) = valkey.added()
    assert decode_job(fields[FIELD]) == step


def test_a_trigger_that_cannot_enqueue_logs_and_settles(reg, store):
    lines = []
    runner = Runner(reg, store, log=lines.append, metrics=False)
    outcome = deliver(runner, new_job("add", [1], chain=[{"task": "add", "args": [], "kwargs": {}}]), None)
    assert outcome.status == "succeeded"
    assert any("cannot enqueue" in line.get("message", "") for line in lines)


# -- the DynamoDB store: one UpdateItem per count, idempotent ---------------------------------


def test_dynamo_counts_a_member_once_and_returns_the_record_before(table):
    store = DynamoResultStore(table)
    key = chord_key("d1")
    assert store.count_member(key, 0, 2, ok=True, at_ms=1000, ttl_s=60) == {}
    before = store.count_member(key, 0, 2, ok=True, at_ms=1001, ttl_s=60)  # a retried count
    assert before["done"] == ["0"] and before["status"] == "waiting" and before["size"] == 2
    assert store.count_member(key, 1, 2, ok=False, reason="dead: boom", at_ms=1002)["done"] == ["0"]
    after = store.count_member(key, 1, 2, ok=False, reason="again", at_ms=1003)
    assert after["done"] == ["0", "1"] and after["dead"] == ["1"] and after["status"] == "dead"
    assert "dead: boom" in after["error"]["message"]  # the first reason stays
    assert store.claim_chord(key, "d1.then", at_ms=1004) is False  # a dead chord stays dead
    assert store.count_member(key, 1, 2, ok=False)["status"] == "dead"
    # a member that succeeded but whose result is lost: the error says so, not "did not succeed"
    store.count_member(chord_key("d3"), 0, 2, ok=True)
    store.count_member(chord_key("d3"), 1, 2, ok=True)
    store.count_member(chord_key("d3"), 0, 2, ok=False, message="member 0's result is lost: gone")
    lost = store.count_member(chord_key("d3"), 0, 2, ok=False, message="again")
    assert (lost["status"], lost["dead"], lost["done"]) == ("dead", ["0"], ["0", "1"])
    assert lost["error"] == {"type": "ChordFailed", "message": "member 0's result is lost: gone"}


def test_dynamo_reads_results_and_marks_a_chord(table):
    store = DynamoResultStore(table)
    from kindling.core.records import build_record

    records = [build_record(key=member_id("d2", i), task="add", status="succeeded", attempts=1, started_at=1,
                            finished_at=2, result=codec.dumps(i * 10)) for i in range(150)]
    store.write(records)
    found = store.read_results([r["id"] for r in records] + ["missing"])
    assert len(found) == 150 and found["d2.149"] == ("succeeded", "1490", None)
    ref = {"bucket": "b", "key": "results/d2.big/" + "0" * 64, "size": 400_000, "sha256": "0" * 64}
    store.write([build_record(key="d2.big", task="add", status="succeeded", attempts=1, started_at=1, finished_at=2,
                              result_payload=ref)])
    assert store.read_results(["d2.big"])["d2.big"] == ("succeeded", None, ref)  # the pointer, to fetch it
    key = chord_key("d2")
    assert store.claim_chord(key, "d2.then", at_ms=5) is False  # never counted: nothing to claim
    store.count_member(key, 0, 1, ok=True)
    assert store.claim_chord(key, "d2.then", at_ms=10) is True
    assert store.claim_chord(key, "d2.then", at_ms=11) is False  # one claim wins
    assert store.claim_chord(key, "d2.then", at_ms=12, claimed_at=9) is False  # not the claim made then
    assert store.claim_chord(key, "d2.then", at_ms=20, claimed_at=10) is True  # taken over once
    assert store.claim_chord(key, "d2.then", at_ms=21, claimed_at=10) is False
    store.mark_chord_sent(key, at_ms=30)
    assert store.claim_chord(key, "d2.then", at_ms=40, claimed_at=20) is False  # sent: never taken over
    import boto3

    item = boto3.client("dynamodb").get_item(TableName=table, Key={"id": {"S": "chord#d2"}})["Item"]
    assert item["status"]["S"] == "completed" and item["callback"]["S"] == "d2.then"
    assert (item["completed_at"]["N"], item["sent_at"]["N"]) == ("20", "30")
    assert "task_shard" not in item and item["status_shard"]["S"].startswith("chord#")  # listed as a chord
    store.count_member(chord_key("d4"), 0, 1, ok=False)
    store.mark_chord_sent(chord_key("d4"), at_ms=1)  # a dead chord is not marked
    assert "sent_at" not in boto3.client("dynamodb").get_item(TableName=table, Key={"id": {"S": "chord#d4"}})["Item"]


# -- the triggers ------------------------------------------------------------------------------


def test_the_sqs_handler_sends_follow_ups_to_its_queue(reg, table, monkeypatch):
    import boto3
    from kindling.triggers.sqs.handler import LambdaWorker

    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=f"canvas-{table}")["QueueUrl"]
    monkeypatch.setenv("KINDLING_TABLE", table)
    monkeypatch.setenv("KINDLING_QUEUE_URL", url)
    worker = LambdaWorker(reg, log=None, metrics=False)

    def event(*jobs):
        return {"Records": [{"messageId": f"m{n}", "body": encode_job(j).decode(), "eventSource": "aws:sqs",
                             "attributes": {"ApproximateReceiveCount": "1"}} for n, j in enumerate(jobs)]}

    step = new_job("add", [1, 2], job_id="s1", chain=[{"task": "add", "args": [4], "kwargs": {}}])
    assert worker(event(step), None) == {"batchItemFailures": []}
    assert worker(event(*members("sg", [("add", [1]), ("add", [2])], TOTAL)), None) == {"batchItemFailures": []}
    bodies = [decode_job(m["Body"]) for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]]
    assert sorted((j.id, j.task, j.args) for j in bodies) == [(next_id("s1"), "add", [3, 4]),
                                                              ("sg.then", "total", [[1, 2]])]


def test_the_sqs_handler_sends_a_follow_up_to_its_tasks_named_queue(reg, table, monkeypatch):
    import boto3
    from kindling.triggers.sqs.handler import LambdaWorker

    reg.task(name="report", queue="reports")(lambda x: x)
    sqs = boto3.client("sqs")
    default = sqs.create_queue(QueueName=f"jobs-{table}")["QueueUrl"]
    reports = sqs.create_queue(QueueName=f"reports-{table}")["QueueUrl"]
    monkeypatch.setenv("KINDLING_TABLE", table)
    monkeypatch.setenv("KINDLING_QUEUE_URL", default)
    monkeypatch.setenv("KINDLING_QUEUES", f"reports={reports}")
    step = new_job("add", [1, 2], job_id="r1", chain=[{"task": "report", "args": [], "kwargs": {}}])
    event = {"Records": [{"messageId": "m1", "body": encode_job(step).decode(), "eventSource": "aws:sqs",
                          "attributes": {"ApproximateReceiveCount": "1"}}]}
    assert LambdaWorker(reg, log=None, metrics=False)(event, None) == {"batchItemFailures": []}
    (message,) = sqs.receive_message(QueueUrl=reports, MaxNumberOfMessages=10)["Messages"]
    assert decode_job(message["Body"]).args == [3]
    assert "Messages" not in sqs.receive_message(QueueUrl=default, MaxNumberOfMessages=10)


def test_with_signing_on_the_worker_signs_its_follow_ups_for_their_queue_and_stream(reg, store, table, monkeypatch):
    import base64
    import json

    import boto3
    from kindling.core import jobsig
    from kindling.shared.signed import Keyring, Verifier
    from kindling.shared.valkey.connection import FIELD, SIG_FIELD
    from kindling.triggers.sqs.handler import LambdaWorker
    from kindling.triggers.valkey.worker import StreamWorker

    key = b"s" * 32
    secret = json.dumps({"current": "k1", "keys": {"k1": base64.b64encode(key).decode()}})

    def verifier():
        return Verifier(Keyring("arn:secret", fetch=lambda ref, deadline: secret))

    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=f"signed-{table}")["QueueUrl"]
    monkeypatch.setenv("KINDLING_QUEUE_URL", url)
    worker = LambdaWorker(reg, store=store, log=None, metrics=False, verifier=verifier())
    step = new_job("add", [1, 2], chain=[{"task": "add", "args": [], "kwargs": {}}])
    text = encode_job(step).decode()
    arn = "arn:aws:sqs:us-east-1:000000000000:" + url.rsplit("/", 1)[1]
    event = {"Records": [{"messageId": "m1", "body": text, "eventSource": "aws:sqs", "eventSourceARN": arn,
                          "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {
                              jobsig.ATTRIBUTE: {"stringValue": jobsig.sign("k1", key, jobsig.sqs_destination(arn),
                                                                            text), "dataType": "String"}}}]}
    assert worker(event, None) == {"batchItemFailures": []}
    (message,) = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    signature = message["MessageAttributes"][jobsig.ATTRIBUTE]["StringValue"]
    assert jobsig.verify({"k1": key}, jobsig.sqs_destination(url), message["Body"], signature) is None

    valkey = RecordingValkey()
    runner = Runner(reg, MemoryResultStore(), log=None, metrics=False, verifier=verifier())
    StreamWorker("redis://127.0.0.1:1/0", runner=runner, stream="s", client=valkey, heartbeat=False).send([step])
    (fields,) = valkey.added()
    assert jobsig.verify({"k1": key}, jobsig.stream_destination("s"), fields[FIELD], fields[SIG_FIELD]) is None


def test_the_sqs_handler_hands_a_job_back_when_its_follow_up_cannot_be_sent(reg, table, monkeypatch):
    from kindling.triggers.sqs.handler import LambdaWorker

    monkeypatch.setenv("KINDLING_TABLE", table)
    monkeypatch.delenv("KINDLING_QUEUE_URL", raising=False)
    worker = LambdaWorker(reg, log=None, metrics=False)
    job = new_job("add", [1], chain=[{"task": "add", "args": [], "kwargs": {}}])
    event = {"Records": [{"messageId": "m1", "body": encode_job(job).decode(), "eventSource": "aws:sqs",
                          "attributes": {"ApproximateReceiveCount": "1"}, "receiptHandle": "r",
                          "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:q"}]}
    assert worker(event, None) == {"batchItemFailures": [{"itemIdentifier": "m1"}]}


def test_the_valkey_worker_sends_follow_ups_on_its_stream(reg, store):
    from kindling.shared.valkey.connection import FIELD
    from kindling.triggers.valkey.worker import StreamWorker

    valkey = RecordingValkey()
    runner = Runner(reg, store, log=None, metrics=False)
    worker = StreamWorker("redis://127.0.0.1:1/0", runner=runner, stream="s", client=valkey, heartbeat=False)
    step = new_job("add", [1, 2], chain=[{"task": "add", "args": [4], "kwargs": {}}])
    (outcome,) = worker.process([Delivery("1-0", encode_job(step).decode())])
    assert outcome.status == "succeeded"
    sent = [(args[0], decode_job(args[1][FIELD])) for pipe in valkey.pipes for command, args in pipe
            if command == "xadd"]
    assert [(stream, job.id, job.args) for stream, job in sent] == [("s", next_id(step.id), [3, 4])]
    order = [command for pipe in valkey.pipes for command, _ in pipe if command in ("xadd", "xack", "xdel")]
    assert order == ["xadd", "xack", "xdel"]  # the next step is on the stream before this entry is acknowledged


def test_a_member_the_valkey_worker_records_dead_for_too_many_deliveries_fails_its_chord(reg, store):
    """Entries whose workers kept dying are recorded dead by the runner without running, and
    followed up as any outcome is."""
    from kindling.shared.valkey.connection import FIELD
    from kindling.triggers.valkey.worker import StreamWorker

    valkey = RecordingValkey()
    runner = Runner(reg, store, log=None, metrics=False)
    worker = StreamWorker("redis://127.0.0.1:1/0", runner=runner, stream="s", client=valkey, heartbeat=False)
    (member,) = members("gv", [("add", [1])], TOTAL)
    step = new_job("add", [1, 1], chain=[{"task": "add", "args": [], "kwargs": {}}])
    deliver(runner, step, Sent())  # recorded succeeded; its worker died before sending the next step
    crashed = [Delivery("1-0", encode_job(member).decode(), 9, counts_runs=True),
               Delivery("2-0", encode_job(step).decode(), 9, counts_runs=True)]
    outcomes = worker.process(crashed)
    assert [o.status for o in outcomes] == ["dead", "skipped"]
    assert store.records[member.id]["error"]["type"] == "TooManyDeliveries"
    assert store.records[chord_key("gv")]["status"] == "dead"
    sent = [decode_job(args[1][FIELD]) for pipe in valkey.pipes for command, args in pipe
            if command == "xadd" and args[0] == "s"]  # not the dead stream's copy
    assert [(j.id, j.args) for j in sent] == [(next_id(step.id), [2])]


# -- the API -----------------------------------------------------------------------------------


def test_signatures_chains_and_groups_are_checked_when_built(reg):
    add = reg.get("add")
    sig = add.s(1, b=2)
    assert isinstance(sig, Signature) and sig.call_object() == {"task": "add", "args": [1], "kwargs": {"b": 2}}
    assert sig.set(timeout=5, max_attempts=2).call_object()["timeout"] == 5
    assert (add.s(1) | add.s() | add.s()).steps == chain(add.s(1), add.s(), add.s()).steps
    with pytest.raises(ValueError, match="at least one"):
        chain()
    with pytest.raises(TypeError, match="signatures"):
        chain(add.s(1), "add")
    with pytest.raises(ValueError, match="at most 101"):
        chain(*[add.s()] * 102)
    assert group([]).members == ()  # Celery's empty group: its results are []
    with pytest.raises(TypeError, match="callback is a signature"):
        group([add.s(1)]).then(add)
    with pytest.raises(ValueError, match="chord id"):
        chord([add.s(1)], add.s()).apply_async(chord_id="x" * 101)
    with pytest.raises(ValueError, match="chord id"):
        chord([add.s(1)], add.s()).apply_async(chord_id="bad id")


def test_chain_and_group_send_through_the_producer_with_derived_ids(reg):
    import kindling.producer.dispatch as dispatch
    from kindling.producer.client import Call, JobHandle

    class Producer:
        def __init__(self):
            self.calls = []

        def send(self, call):
            self.calls.append(call)
            return JobHandle(call.job_id or "first", "t", None)

        def enqueue_many(self, calls):
            self.calls.extend(calls)
            return [JobHandle(c.job_id, "t", None) for c in calls]

    producer = Producer()
    dispatch.set_producer(producer)
    try:
        add, total = reg.get("add"), reg.get("total")
        h = chain(add.s(1, 2), add.s(3), total.s()).apply_async(job_id="root")
        g = group([add.s(i) for i in range(3)]).then(total.s(extra=1)).apply_async(chord_id="grp")
    finally:
        dispatch.set_producer(None)
    first, *ms = producer.calls
    assert isinstance(first, Call) and first.job_id == "root" and first.chain == [
        {"task": "add", "args": [3], "kwargs": {}}, {"task": "total", "args": [], "kwargs": {}}]
    assert h.ids == ["root", next_id("root"), next_id(next_id("root"))] and h.id == "root"
    assert [c.job_id for c in ms] == ["grp.0", "grp.1", "grp.2"] == g.member_ids
    assert ms[2].parent == {"id": "grp", "index": 2, "size": 3, "then": {"task": "total", "args": [],
                                                                          "kwargs": {"extra": 1}}}
    assert g.callback_id == "grp.then"
    with pytest.raises(Exception, match="cannot read outcomes"):
        h.result()


def test_eager_mode_runs_chains_and_chords_inline(reg):
    add, total, boom = reg.get("add"), reg.get("total"), reg.get("boom")
    with eager() as jobs:
        h = chain(add.s(1, 2), add.s(10), add.s(b=100)).delay()
        assert isinstance(h, ChainHandle) and h.result() == 113 and h.status() == "succeeded"
        g = group([add.s(i, i) for i in range(4)]).then(total.s(extra=1)).delay()
        assert g.status() == "completed" and g.result() == 13
        assert group([add.s(1), add.s(2)]).delay().result() == [1, 2]
        bad = group([add.s(1), boom.s(), add.s(3)]).then(total.s()).delay()
        assert bad.status() == "dead"
        with pytest.raises(JobFailed, match="member 1"):
            bad.result()
        assert bad.callback_id not in jobs.records
        stopped = chain(boom.s(), add.s()).delay()
        with pytest.raises(JobFailed):
            stopped.result()
        assert stopped.ids[1] not in jobs.records
    assert [r for r in reg.runs if r[0] == "total"] == [("total", [0, 2, 4, 6], 1)]


def test_kindling_exports_the_canvas_lazily():
    script = ("import sys, kindling\n"
              "assert 'kindling.producer.canvas' not in sys.modules\n"
              "from kindling import chain, group, Signature\n"
              "assert 'kindling.producer.canvas' in sys.modules\n")
    subprocess.run([sys.executable, "-c", script], check=True,
                   env={"PYTHONPATH": str(ROOT / "layers/kindling")})


def test_a_batch_of_plain_jobs_loads_neither_followups_nor_canvas():
    script = ("import sys\n"
              "from kindling.core.registry import Registry\n"
              "from kindling.stores.results import MemoryResultStore\n"
              "from kindling.engine.runner import Delivery, Runner\n"
              "from kindling.core.envelope import encode_job, new_job\n"
              "r = Registry()\n"
              "r.task(name='noop')(lambda: None)\n"
              "out = Runner(r, MemoryResultStore(), log=None, metrics=False).run(\n"
              "    [Delivery('m', encode_job(new_job('noop')).decode())], send=print)\n"
              "assert out[0].status == 'succeeded', out\n"
              "assert not {'kindling.engine.followups', 'kindling.producer.canvas'} & set(sys.modules)\n")
    subprocess.run([sys.executable, "-c", script], check=True, env={"PYTHONPATH": str(ROOT / "layers/kindling")})


def test_the_worker_role_may_enqueue_follow_ups_and_count_members():
    from cfnlint.decode import cfn_yaml

    template = cfn_yaml.load(str(ROOT / "template.yaml"))
    statements = template["Resources"]["WorkerRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    by_sid = {s["Sid"]: s for s in statements if "Sid" in s}  # unconditional ones: whatever the parameters
    assert by_sid["EnqueueJobs"]["Action"] == "sqs:SendMessage"
    assert {"Fn::GetAtt": ["JobsQueue", "Arn"]} in by_sid["EnqueueJobs"]["Resource"]
    assert "dynamodb:UpdateItem" in by_sid["RecordResults"]["Action"]


def test_the_local_sqs_loop_runs_a_chain_and_a_chord_on_its_queue(reg, table):
    import uuid

    import boto3
    from kindling.producer.client import Client
    from kindling.triggers.sqs.loop import SqsWorker

    url = boto3.client("sqs").create_queue(QueueName=f"loop-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    client = Client(queue_url=url, table=table)
    import kindling.producer.dispatch as dispatch

    dispatch.set_producer(client)
    try:
        steps = chain(reg.get("add").s(1, 2), reg.get("add").s(10)).delay()
        chord = group([reg.get("add").s(i, i) for i in range(3)]).then(reg.get("total").s()).delay()
    finally:
        dispatch.set_producer(None)
    SqsWorker(url, table, registry=reg, wait=1, log=None).run(burst=True, idle_timeout=10)
    assert steps.result(timeout=5) == 13 and chord.result(timeout=5) == 6
