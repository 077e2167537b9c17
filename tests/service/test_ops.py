"""The operator's commands against moto: jobs listed through the indexes (never a Scan),
one job shown, a dead job revived as a new generation and run again, the DLQ peeked and
redriven. Records and dead letters come from the real worker loop (kindling.triggers.sqs.loop)."""

import time
import uuid

import boto3
import pytest
from kindling.core import codec
from kindling.core.envelope import Job, decode_job, encode_job, new_job
from kindling.core.records import build_record
from kindling.core.registry import Registry
from kindling.core.status import DEAD, FAILED, QUEUED, REJECTED, SUCCEEDED, may_replace
from kindling.engine.runner import Delivery, Runner
from kindling.producer.client import Call, Client
from kindling.stores.results import DynamoResultStore, MemoryResultStore
from kindling.tools import cli
from kindling.tools.ops import OpsError, Stack
from kindling.tools.ops.dlq import peek, redrive
from kindling.tools.ops.query import get_job, list_jobs, parse_since
from kindling.tools.ops.revive import RetryRefused, retry_job, revive
from kindling.triggers.sqs.loop import SqsWorker
from support import create_results_table
from support.sqs import fifo_queue_with_dlq

BROKEN = {"on": True}
registry = Registry()


@registry.task(name="ops.ok")
def ok(n=0):
    return n


@registry.task(name="emails.send", max_attempts=2)
def send_email(to):
    if BROKEN["on"]:
        raise RuntimeError(f"smtp refused {to}")
    return f"sent to {to}"


@registry.task(name="reports.build", max_attempts=2, queue="reports")
def build_report(n):
    if BROKEN["on"]:
        raise RuntimeError(f"report {n} failed")
    return n


@pytest.fixture
def indexed_table(moto_endpoint) -> str:
    """A results table shaped as template.yaml's: key ``id``, GSIs by_task and by_status."""
    return _results_table(task_index=True)


def _results_table(task_index: bool) -> str:
    """template.yaml's results table, with its by_task index or (TaskIndex=false) without."""
    return create_results_table(boto3.client("dynamodb"), f"results-{uuid.uuid4().hex[:8]}",
                                TaskIndex=str(task_index).lower())


@pytest.fixture
def stack(indexed_table) -> Stack:
    sqs = boto3.client("sqs")
    dlq = sqs.create_queue(QueueName=f"dlq-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = sqs.create_queue(QueueName=f"jobs-{uuid.uuid4().hex[:8]}", Attributes={
        "VisibilityTimeout": "1",
        "RedrivePolicy": f'{{"deadLetterTargetArn": "{dlq_arn}", "maxReceiveCount": "10"}}',
    })["QueueUrl"]
    BROKEN["on"] = True
    stack = Stack(table=indexed_table, queue_url=url)
    stack.receive_wait_s = 0  # moto's short poll sees every message
    return stack


def _queue_with_dlq(name: str, **attributes: str) -> str:
    sqs = boto3.client("sqs")
    dlq = sqs.create_queue(QueueName=f"{name}-dead-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return sqs.create_queue(QueueName=f"{name}-{uuid.uuid4().hex[:8]}", Attributes={
        "VisibilityTimeout": "1", **attributes,
        "RedrivePolicy": f'{{"deadLetterTargetArn": "{dlq_arn}", "maxReceiveCount": "10"}}',
    })["QueueUrl"]


@pytest.fixture
def reports(stack, monkeypatch) -> str:
    """A named queue ``reports`` with its own DLQ, as template.yaml rendered with it makes it;
    KINDLING_QUEUES names it, as the QueueRoutes output gives it to producers and operators."""
    url = _queue_with_dlq("reports")
    monkeypatch.setenv("KINDLING_QUEUES", f"reports={url}")
    return url


def work(stack: Stack, queue_url: str | None = None, **runner_options) -> dict:
    """Run the queue's jobs to their ends; a failed job comes back at the queue's 1 s
    visibility (no retry delay: the ops commands need dead jobs, not the delay rule)."""
    runner_options.setdefault("retry_delay", 0)
    return SqsWorker(queue_url or stack.queue_url, stack.table, registry=registry, wait=1, log=None,
                     **runner_options).run(burst=True, idle_timeout=10)


def calls(stack: Stack) -> list[str]:
    """Record the DynamoDB operations the stack's client makes from now on."""
    seen: list[str] = []
    stack.dynamodb.meta.events.register("before-call.dynamodb.*", lambda model, **_: seen.append(model.name))
    return seen


def dlq_bodies(stack: Stack, dlq_url: str | None = None) -> list[dict]:
    msgs = boto3.client("sqs").receive_message(QueueUrl=dlq_url or stack.dlq_url, MaxNumberOfMessages=10,
                                               VisibilityTimeout=0).get("Messages", [])
    return [codec.loads(m["Body"]) for m in msgs]


def dlq_of(url: str) -> str:
    sqs = boto3.client("sqs")
    policy = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"]["RedrivePolicy"]
    return sqs.get_queue_url(QueueName=codec.loads(policy)["deadLetterTargetArn"].rsplit(":", 1)[1])["QueueUrl"]


# -- the forward-only rule with the revive's status ----------------------------------------


def test_queued_replaces_only_a_dead_record_and_every_outcome_replaces_queued():
    assert may_replace(QUEUED, 0, DEAD)
    for old in (None, SUCCEEDED, FAILED, REJECTED, QUEUED):
        assert not may_replace(QUEUED, 0, old), old
    for new in (SUCCEEDED, FAILED, DEAD, REJECTED):
        assert may_replace(new, 1, QUEUED), new


def test_the_runner_reads_a_queued_record_as_no_record_and_counts_attempts_from_one():
    store = MemoryResultStore()
    store.records["j1"] = build_record(key="j1", task="emails.send", status=QUEUED, attempts=0, started_at=1,
                                       finished_at=1, generation=2)
    BROKEN["on"] = True
    runner = Runner(registry, store, log=None)
    body = codec.dumps({"version": 1, "id": "j1", "task": "emails.send", "args": ["a@b"], "kwargs": {},
                        "enqueued_at": 1_700_000_000_000})
    [o] = runner.run([Delivery("m1", body, attempts=7)])
    assert o.status == FAILED and o.attempts == 1  # a fresh allowance, whatever the deliveries
    assert store.records["j1"]["status"] == FAILED
    BROKEN["on"] = False
    [o] = runner.run([Delivery("m2", body)])
    assert o.status == SUCCEEDED and o.attempts == 2


# -- listing --------------------------------------------------------------------------------


def test_parse_since_takes_durations_and_iso_times():
    now = 1_800_000_000_000
    assert parse_since("2h", now) == now - 7_200_000
    assert parse_since("30s", now) == now - 30_000
    assert parse_since("1w", now) == now - 604_800_000
    assert parse_since("2027-01-15T00:00:00Z") == parse_since("2027-01-15T01:00:00+01:00") == 1_799_971_200_000
    assert parse_since("2027-01-15 00:00") == 1_799_971_200_000  # no zone: UTC, as the listings print
    with pytest.raises(OpsError, match="duration"):
        parse_since("yesterday")


def _write(stack: Stack, records: list[dict]) -> None:
    DynamoResultStore(stack.table).write(records)


def test_list_queries_four_shards_of_one_index_merges_newest_first_and_never_scans(stack):
    now = int(time.time() * 1000)
    records = []
    for i in range(40):  # ids spread over the four shards
        status = DEAD if i % 2 else SUCCEEDED
        task = "emails.send" if i % 4 < 2 else "ops.ok"
        records.append(build_record(key=f"job-{i:03d}", task=task, status=status, attempts=2, started_at=now - i * 1000,
                                    finished_at=now - i * 1000, error={"type": "E", "message": f"m{i}"}
                                    if status == DEAD else None))
    _write(stack, records)
    ops = calls(stack)

    dead = list_jobs(stack, status=DEAD, since_ms=now - 3_600_000, limit=100)
    assert [r["id"] for r in dead] == [f"job-{i:03d}" for i in range(1, 40, 2)]  # newest first, all shards
    assert {r["id"][-1] for r in dead} and all(r["error"]["message"] == f"m{int(r['id'][4:])}" for r in dead)
    assert ops == ["Query"] * 4

    ops.clear()
    both = list_jobs(stack, status=DEAD, task="emails.send", since_ms=now - 3_600_000)
    assert [r["id"] for r in both] == [f"job-{i:03d}" for i in range(1, 40, 4)]
    assert ops == ["Query"] * 4

    succeeded = list_jobs(stack, status=SUCCEEDED, task="ops.ok", since_ms=now - 3_600_000)
    assert [r["id"] for r in succeeded] == [f"job-{i:03d}" for i in range(2, 40, 4)]
    recent = list_jobs(stack, task="emails.send", since_ms=now - 10_500, limit=3)
    assert [r["id"] for r in recent] == ["job-000", "job-001", "job-004"]
    assert "Scan" not in ops


def test_list_reads_as_many_status_shards_as_the_deployment_writes(stack, monkeypatch):
    monkeypatch.setenv("KINDLING_STATUS_SHARDS", "8")  # the template's StatusIndexShards
    now = int(time.time() * 1000)
    _write(stack, [build_record(key=f"s8-{i:03d}", task="ops.ok", status=DEAD, attempts=1, started_at=now - i,
                                finished_at=now - i) for i in range(80)])
    ops = calls(stack)
    dead = list_jobs(stack, status=DEAD, since_ms=now - 3_600_000, limit=100)
    assert [r["id"] for r in dead] == [f"s8-{i:03d}" for i in range(80)]
    assert ops == ["Query"] * 8
    ops.clear()
    assert len(list_jobs(stack, task="ops.ok", since_ms=now - 3_600_000, limit=100)) == 80
    assert ops == ["Query"] * 4  # by_task keeps its four


def test_list_pages_through_each_shard_until_it_has_the_limit(stack):
    now = int(time.time() * 1000)
    _write(stack, [build_record(key=f"p-{i}", task="ops.ok", status=DEAD, attempts=1, started_at=now - i,
                                finished_at=now - i) for i in range(30)])
    got = list_jobs(stack, status=DEAD, since_ms=0, limit=25, page_size=2)
    assert [r["id"] for r in got] == [f"p-{i}" for i in range(25)]


def test_list_refuses_what_only_a_scan_could_answer(stack):
    with pytest.raises(OpsError, match="scan"):
        list_jobs(stack)
    with pytest.raises(OpsError, match="per task"):
        list_jobs(stack, status=SUCCEEDED)


def test_listing_by_task_without_the_by_task_index_says_what_it_needs(moto_endpoint):
    """TaskIndex=false: a task alone, or succeeded jobs, need by_task; a status and a task
    together read by_status, which is always there."""
    stack = Stack(table=_results_table(task_index=False))
    now = int(time.time() * 1000)
    _write(stack, [build_record(key="d-1", task="ops.ok", status=DEAD, attempts=1, started_at=now, finished_at=now)])
    for query in ({"task": "ops.ok"}, {"task": "ops.ok", "status": SUCCEEDED}):
        with pytest.raises(OpsError, match="needs the results table's by_task index.*TaskIndex=true"):
            list_jobs(stack, since_ms=0, **query)
    assert [r["id"] for r in list_jobs(stack, status=DEAD, task="ops.ok", since_ms=0)] == ["d-1"]


# -- the real path: worker, DLQ, revive -------------------------------------------------------


def test_a_dead_job_is_revived_as_a_new_generation_and_runs_again_from_attempt_one(stack):
    client = Client(queue_url=stack.queue_url, table=stack.table)
    doomed = client.send(Call("emails.send", ["ada@example.com"], job_id="mail-1"))
    fine = client.enqueue("ops.ok", 5)
    work(stack)
    assert client.record(doomed.id)["status"] == DEAD
    assert [b["id"] for b in dlq_bodies(stack)] == [doomed.id]

    shown = get_job(stack, doomed.id)
    assert shown["attempts"] == 2 and shown["generation"] == 1 and shown["previous"] == []
    assert "smtp refused ada@example.com" in shown["error"]["traceback"]

    done = retry_job(stack, doomed.id)
    assert done["previous_status"] == DEAD and done["generation"] == 2 and done["source"] == "dlq"
    record = client.record(doomed.id)
    assert record["status"] == QUEUED and record["attempts"] == 0 and record["generation"] == 2
    assert record["status_shard"].startswith("queued#") and record["task_shard"].startswith("emails.send#")
    assert dlq_bodies(stack) == []  # moved, not copied
    assert [r["id"] for r in list_jobs(stack, status=QUEUED, since_ms=0)] == [doomed.id]

    BROKEN["on"] = False  # the operator fixed the mail server
    work(stack)
    record = client.record(doomed.id)
    assert record["status"] == SUCCEEDED and record["attempts"] == 1 and record["generation"] == 2
    assert codec.loads(record["result"]) == "sent to ada@example.com"
    shown = get_job(stack, doomed.id)
    assert shown["generation"] == 2
    [first] = shown["previous"]
    assert first["generation"] == 1 and first["status"] == DEAD and first["attempts"] == 2
    assert first["error"]["message"] == "smtp refused ada@example.com"
    assert client.status(fine.id) == SUCCEEDED
    with pytest.raises(RetryRefused, match="already succeeded"):
        retry_job(stack, doomed.id)


def test_a_job_revived_twice_counts_its_generations_in_the_ledger(stack):
    client = Client(queue_url=stack.queue_url, table=stack.table)
    job = client.send(Call("emails.send", ["x@y"], job_id="twice"))
    work(stack)
    assert retry_job(stack, job.id)["generation"] == 2
    work(stack)  # still broken: dead again, as generation 2
    assert client.record(job.id)["status"] == DEAD
    assert retry_job(stack, job.id)["generation"] == 3
    assert [p["generation"] for p in get_job(stack, job.id)["previous"]] == [1, 2]


def test_a_revive_refuses_a_record_that_changed_since_it_was_read(stack):
    client = Client(queue_url=stack.queue_url, table=stack.table)
    job = client.send(Call("emails.send", ["x@y"], job_id="raced"))
    work(stack)
    stale = get_job(stack, job.id)
    assert revive(stack, stale) == 2
    with pytest.raises(RetryRefused, match="changed while it was being revived"):
        revive(stack, stale)  # a second operator with the same read
    newer = dict(stale, finished_at=stale["finished_at"] + 1)
    with pytest.raises(RetryRefused):
        revive(stack, newer)
    assert client.record(job.id)["generation"] == 2


def test_an_interrupted_retry_is_finished_by_running_it_again(stack, monkeypatch):
    import kindling.tools.ops.revive as rv

    client = Client(queue_url=stack.queue_url, table=stack.table)
    job = client.send(Call("emails.send", ["x@y"], job_id="interrupted"))
    work(stack)

    def boom(*args, **kwargs):
        raise ConnectionError("network gone")

    monkeypatch.setattr(rv, "_send", boom)
    with pytest.raises(ConnectionError):
        retry_job(stack, job.id)
    assert client.record(job.id)["status"] == QUEUED
    assert [b["id"] for b in dlq_bodies(stack)] == [job.id]  # released, still there
    monkeypatch.undo()
    done = retry_job(stack, job.id)
    assert done["previous_status"] == QUEUED and done["generation"] == 2  # no second generation
    assert dlq_bodies(stack) == []
    with pytest.raises(RetryRefused, match="already sent again"):
        retry_job(stack, job.id)


def test_a_job_that_dies_while_retry_searches_the_dlq_is_revived_not_sent_beside_its_dead_record(stack, monkeypatch):
    """The worker records ``dead`` and then moves the message: a retry that read no record
    and then finds the message (the worker finished meanwhile) must act on the record as it
    is now. Sent as a job with no record, it would meet its ``dead`` record on the queue and
    go straight back to the DLQ, and the retry would have said it ran again."""
    import kindling.tools.ops.revive as rv

    client = Client(queue_url=stack.queue_url, table=stack.table)
    job = client.send(Call("emails.send", ["x@y"], job_id="dies-meanwhile"))
    search = rv.find_in_dlq

    def worker_finishes_first(*args, **kwargs):
        if client.record(job.id) is None:
            work(stack)  # both attempts fail: recorded dead, then moved to the DLQ
        return search(*args, **kwargs)

    monkeypatch.setattr(rv, "find_in_dlq", worker_finishes_first)
    done = retry_job(stack, job.id)
    assert done["previous_status"] == DEAD and done["generation"] == 2
    record = client.record(job.id)
    assert record["status"] == QUEUED and record["generation"] == 2
    assert dlq_bodies(stack) == []


def _send_chord(stack: Stack, chord: str, members: list[tuple[str, list]]) -> None:
    parent = {"id": chord, "size": len(members), "then": {"task": "ops.ok", "args": [], "kwargs": {}}}
    for i, (task, args) in enumerate(members):
        job = new_job(task, args, job_id=f"{chord}.{i}", parent=dict(parent, index=i))
        boto3.client("sqs").send_message(QueueUrl=stack.queue_url, MessageBody=encode_job(job).decode())


def test_reviving_a_chords_dead_member_reopens_the_chord_and_its_callback_runs(stack):
    """The member that failed the chord runs again: once it succeeds, the chord completes."""
    from kindling.engine.followups import chord_key

    client = Client(queue_url=stack.queue_url, table=stack.table)
    _send_chord(stack, "ch-revive", [("ops.ok", [1]), ("emails.send", ["x@y"]), ("emails.send", ["z@y"])])
    work(stack)
    chord = client.record(chord_key("ch-revive"))
    assert chord["status"] == DEAD and sorted(chord["dead"]) == ["1", "2"]

    retry_job(stack, "ch-revive.1")
    chord = client.record(chord_key("ch-revive"))
    assert chord["status"] == DEAD and chord["dead"] == ["2"]  # member 2 still fails it
    retry_job(stack, "ch-revive.2")
    chord = client.record(chord_key("ch-revive"))
    assert chord["status"] == "waiting" and "dead" not in chord and "error" not in chord
    assert sorted(chord["done"]) == ["0", "1", "2"]

    BROKEN["on"] = False
    work(stack)
    assert client.record(chord_key("ch-revive"))["status"] == "completed"
    callback = client.record("ch-revive.then")
    assert callback["status"] == SUCCEEDED and codec.loads(callback["result"]) == [1, "sent to x@y", "sent to z@y"]


def test_a_redrive_reopens_the_chords_of_the_members_it_revives(stack):
    from kindling.engine.followups import chord_key

    client = Client(queue_url=stack.queue_url, table=stack.table)
    _send_chord(stack, "ch-redrive", [("emails.send", ["a@b"]), ("ops.ok", [2])])
    work(stack)
    assert client.record(chord_key("ch-redrive"))["status"] == DEAD
    report = redrive(stack, move_task=False, progress=lambda line: None)
    assert report["revived"] == 1 and client.record(chord_key("ch-redrive"))["status"] == "waiting"
    BROKEN["on"] = False
    work(stack)
    assert codec.loads(client.record("ch-redrive.then")["result"]) == ["sent to a@b", 2]


def test_retry_refuses_failed_and_unknown_jobs_and_resends_a_rejected_one_from_its_body(stack):
    client = Client(queue_url=stack.queue_url, table=stack.table)
    now = int(time.time() * 1000)
    _write(stack, [build_record(key="f1", task="ops.ok", status=FAILED, attempts=1, started_at=now, finished_at=now)])
    with pytest.raises(RetryRefused, match="runs again by itself"):
        retry_job(stack, "f1")
    with pytest.raises(RetryRefused, match="no record and no message"):
        retry_job(stack, "nobody", search=10)

    body = codec.dumps({"version": 1, "id": "rj", "task": "ops.ok", "args": [], "kwargs": {"n": "wrong"},
                        "enqueued_at": now})
    _write(stack, [build_record(key="rj", task="ops.later", status=REJECTED, attempts=0, started_at=now,
                                finished_at=now, raw=body, error={"type": "InvalidJob", "message": "unknown task"})])
    done = retry_job(stack, "rj")
    assert done["source"] == "record" and done["message_id"]
    work(stack)
    assert codec.loads(client.record("rj")["result"]) == "wrong"


# -- what a retry sends again -------------------------------------------------------------------


# Every field a job carries in its envelope (headers: a Celery message's own, never in one).
ENVELOPE_FIELDS = [name for name in Job.__slots__ if name != "headers"]


def _every_field(job_id: str) -> Job:
    """A job with every envelope field set, so a field a resend forgets shows up in a comparison."""
    job = new_job("ops.ok", job_id=job_id, max_attempts=3, timeout=12.5, not_before=1_700_000_001_000,
                  chain=[{"task": "ops.ok", "args": [], "kwargs": {}, "max_attempts": 2}],
                  parent={"id": "chord-1", "index": 2, "size": 3, "then": {"task": "ops.ok", "args": [], "kwargs": {}}},
                  payload={"bucket": "payloads-x", "key": f"args/{job_id}/{'a' * 64}", "size": 17,
                           "sha256": "b" * 64})
    job.enqueued_at = 1_700_000_000_000
    unset = [name for name in ENVELOPE_FIELDS if getattr(job, name) is None]
    assert not unset, f"set {unset} above: a retry must be seen to carry every envelope field"
    return job


def _sent_again(stack: Stack) -> list[dict]:
    got = boto3.client("sqs").receive_message(QueueUrl=stack.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0,
                                              AttributeNames=["All"]).get("Messages", [])
    return got


@pytest.mark.parametrize("source", ["dlq", "record"])
def test_a_retry_sends_the_whole_envelope_again_with_only_a_new_enqueued_at(stack, source):
    job = _every_field(f"whole-{source}")
    body = encode_job(job).decode()
    now = int(time.time() * 1000)
    if source == "dlq":
        _write(stack, [build_record(key=job.id, task=job.task, status=DEAD, attempts=3, started_at=now,
                                    finished_at=now, error={"type": "E", "message": "boom"})])
        boto3.client("sqs").send_message(QueueUrl=stack.dlq_url, MessageBody=body, MessageAttributes={
            "kindling_job_id": {"DataType": "String", "StringValue": job.id}})
    else:
        _write(stack, [build_record(key=job.id, task=job.task, status=REJECTED, attempts=0, started_at=now,
                                    finished_at=now, raw=body, error={"type": "InvalidJob", "message": "no task"})])
    assert retry_job(stack, job.id)["source"] == source
    (message,) = _sent_again(stack)
    again = decode_job(message["Body"])
    assert again.enqueued_at >= now
    assert ({name: getattr(again, name) for name in ENVELOPE_FIELDS if name != "enqueued_at"}
            == {name: getattr(job, name) for name in ENVELOPE_FIELDS if name != "enqueued_at"})


def test_a_retried_job_keeps_its_arguments_in_s3_and_the_rest_of_its_chain(stack, moto_endpoint):
    from kindling.drivers.aws.s3 import S3Client
    from kindling.engine.followups import next_id

    bucket = f"payloads-{uuid.uuid4().hex[:8]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    boto3.client("sqs").set_queue_attributes(QueueUrl=stack.queue_url, Attributes={"MaximumMessageSize": "1024"})
    client = Client(queue_url=stack.queue_url, table=stack.table, payload_bucket=bucket)
    to = "a" * 2000 + "@example.com"  # over the queue's 1 KiB: the arguments go to S3
    then = [{"task": "ops.ok", "args": [], "kwargs": {}}]
    job = client.send(Call("emails.send", [to], job_id="big-mail", chain=then))
    s3 = S3Client(endpoint=moto_endpoint)
    work(stack, payload_bucket=bucket, s3=s3)
    assert client.status(job.id) == DEAD
    assert "payload" in dlq_bodies(stack)[0]

    retry_job(stack, job.id)
    BROKEN["on"] = False
    work(stack, payload_bucket=bucket, s3=s3)
    assert client.status(job.id) == SUCCEEDED
    assert codec.loads(client.record(job.id)["result"]) == f"sent to {to}"
    after = client.record(next_id(job.id))  # the chain goes on from the retried step
    assert after is not None and after["status"] == SUCCEEDED


def _fifo_stack(table: str) -> Stack:
    """A FIFO jobs queue with its FIFO dead-letter queue, as FifoQueue=true deploys them."""
    url, _ = fifo_queue_with_dlq()
    BROKEN["on"] = True
    stack = Stack(table=table, queue_url=url, queues={})
    stack.receive_wait_s = 0
    return stack


def test_a_retry_on_a_fifo_queue_keeps_the_jobs_message_group(indexed_table):
    sqs = boto3.client("sqs")
    stack = _fifo_stack(indexed_table)
    dlq, url = stack.dlq_url, stack.queue_url
    job = new_job("ops.ok", job_id="in-order")
    now = int(time.time() * 1000)
    _write(stack, [build_record(key=job.id, task=job.task, status=DEAD, attempts=1, started_at=now, finished_at=now),
                   build_record(key="rejected-fifo", task="ops.ok", status=REJECTED, attempts=0, started_at=now,
                                finished_at=now, raw=encode_job(new_job("ops.ok", job_id="rejected-fifo")).decode())])
    # As the worker moves a dead job from a FIFO queue: its group goes with it.
    sqs.send_message(QueueUrl=dlq, MessageBody=encode_job(job).decode(), MessageGroupId="customer-42",
                     MessageDeduplicationId="m1")
    assert retry_job(stack, job.id)["generation"] == 2
    (message,) = sqs.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"]
    assert decode_job(message["Body"]).id == job.id and message["Attributes"]["MessageGroupId"] == "customer-42"
    with pytest.raises(RetryRefused, match="FIFO message group"):
        retry_job(stack, "rejected-fifo")


# -- named queues: each with its own dead-letter queue -------------------------------------------


def test_a_dead_job_of_a_named_queue_is_found_in_that_queues_dlq_and_goes_back_to_that_queue(stack, reports):
    client = Client(queue_url=stack.queue_url, table=stack.table)
    job = client.enqueue(build_report, 7)
    work(stack, reports)
    assert client.status(job.id) == DEAD
    assert [b["id"] for b in dlq_bodies(stack, dlq_of(reports))] == [job.id]

    done = retry_job(stack, job.id)  # no queue named: every DLQ of the deployment is looked through
    assert done["queue"] == "reports" and done["generation"] == 2 and done["source"] == "dlq"
    assert dlq_bodies(stack, dlq_of(reports)) == []
    assert _sent_again(stack) == []  # not the default queue: it must not run unlimited
    BROKEN["on"] = False
    work(stack, reports)
    assert client.status(job.id) == SUCCEEDED and codec.loads(client.record(job.id)["result"]) == 7


def test_retry_queue_names_the_dlq_to_look_in_and_an_unknown_name_is_refused(stack, reports):
    client = Client(queue_url=stack.queue_url, table=stack.table)
    job = client.enqueue(build_report, 8)
    work(stack, reports)
    with pytest.raises(RetryRefused, match=r"dead-letter queue of 'default'"):
        retry_job(stack, job.id, queue="default", search=20)
    with pytest.raises(OpsError, match="unknown queue 'reprots'"):
        retry_job(stack, job.id, queue="reprots")
    assert retry_job(stack, job.id, queue="reports")["queue"] == "reports"
    BROKEN["on"] = False
    work(stack, reports)
    assert client.status(job.id) == SUCCEEDED


def test_a_rejected_job_goes_to_the_queue_named_since_its_record_does_not_say_which(stack, reports):
    now = int(time.time() * 1000)
    body = codec.dumps({"version": 1, "id": "rq", "task": "reports.build", "args": [3], "kwargs": {},
                        "enqueued_at": now})
    _write(stack, [build_record(key="rq", task="reports.build", status=REJECTED, attempts=0, started_at=now,
                                finished_at=now, raw=body, error={"type": "InvalidJob", "message": "unknown task"})])
    with pytest.raises(RetryRefused, match="--queue"):
        retry_job(stack, "rq")
    assert retry_job(stack, "rq", queue="reports")["queue"] == "reports"
    assert _sent_again(stack) == []
    BROKEN["on"] = False
    work(stack, reports)
    assert codec.loads(Client(queue_url=stack.queue_url, table=stack.table).record("rq")["result"]) == 3


def test_peek_and_redrive_take_a_named_queue_and_move_its_dlq_back_to_it(stack, reports, monkeypatch, capsys):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # moto answers 500 to the move task: no retries
    client = Client(queue_url=stack.queue_url, table=stack.table)
    jobs = [client.enqueue(build_report, i) for i in range(3)]
    plain = client.send(Call("emails.send", ["x@y"], job_id="stays-dead"))
    work(stack, reports)
    work(stack)
    base = ["--table", stack.table, "--queue-url", stack.queue_url]
    assert cli.main(["dlq", "peek", "--queue", "reports", "--json", *base]) == 0
    assert sorted(m["job_id"] for m in codec.loads(capsys.readouterr().out)["messages"]) == sorted(j.id for j in jobs)
    assert cli.main(["dlq", "redrive", "--queue", "reports", *base]) == 0
    capsys.readouterr()
    assert dlq_bodies(stack, dlq_of(reports)) == [] and _sent_again(stack) == []
    assert [b["id"] for b in dlq_bodies(stack)] == [plain.id]  # the default DLQ is left alone
    BROKEN["on"] = False
    work(stack, reports)
    assert {client.status(j.id) for j in jobs} == {SUCCEEDED}

    assert cli.main(["jobs", "retry", plain.id, "--queue", "default", *base]) == 0
    assert f"job {plain.id} enqueued again" in capsys.readouterr().out


# -- the dead-letter queue --------------------------------------------------------------------


def test_peek_shows_the_dlq_with_each_jobs_record_and_leaves_the_messages_there(stack):
    client = Client(queue_url=stack.queue_url, table=stack.table)
    jobs = [client.send(Call("emails.send", [f"u{i}@x"], job_id=f"peek-{i}")) for i in range(3)]
    work(stack)
    report = peek(stack, limit=10)
    assert sorted(m["job_id"] for m in report["messages"]) == [j.id for j in jobs]
    assert {m["status"] for m in report["messages"]} == {DEAD}
    assert {m["task"] for m in report["messages"]} == {"emails.send"}
    assert all("smtp refused" in m["reason"] for m in report["messages"])
    assert report["visibility_s"] == 1  # hidden for a second at most: SQS has no peek
    assert len(dlq_bodies(stack)) == 3  # visible again at once


def test_peek_on_the_command_line_says_it_received_the_messages_and_for_how_long(stack, capsys):
    client = Client(queue_url=stack.queue_url, table=stack.table)
    client.send(Call("emails.send", ["u@x"], job_id="peeked"))
    work(stack)
    base = ["--table", stack.table, "--queue-url", stack.queue_url]
    assert cli.main(["dlq", "peek", *base]) == 0
    first = capsys.readouterr()
    assert "peek received these 1 message(s): each one's receive count went up by 1 and it was hidden for at " \
           "most 1 s" in first.err
    assert cli.main(["dlq", "peek", "--json", "--visibility", "0", *base]) == 0
    again = capsys.readouterr()
    [row] = codec.loads(again.out)["messages"]
    assert row["receives"] == 2 and "at most 0 s" in again.err  # the first look counted


def test_a_dry_run_lists_what_a_redrive_would_do_and_changes_nothing(stack, capsys):
    client = Client(queue_url=stack.queue_url, table=stack.table)
    jobs = [client.send(Call("emails.send", [f"u{i}@x"], job_id=f"dry-{i}")) for i in range(3)]
    work(stack)
    base = ["--table", stack.table, "--queue-url", stack.queue_url]
    assert cli.main(["dlq", "redrive", "--dry-run", *base]) == 0
    out = capsys.readouterr().out
    assert "looked at 3; nothing was revived or moved" in out and "would: revive and move 3" in out
    assert all(f"revive and move  {j.id}  (record: dead)" in out for j in jobs), out
    assert cli.main(["dlq", "redrive", "--dry-run", "--no-revive", "--json", *base]) == 0
    assert codec.loads(capsys.readouterr().out)["actions"] == {"move": 3}
    assert {client.status(j.id) for j in jobs} == {DEAD} and len(dlq_bodies(stack)) == 3
    assert boto3.client("sqs").receive_message(QueueUrl=stack.queue_url).get("Messages", []) == []
    assert cli.main(["dlq", "redrive", "--json", *base]) == 0
    captured = capsys.readouterr()
    assert codec.loads(captured.out)["revived"] == 3 and "chunk 1: received 3" in captured.err


class HeldCount:
    """An SQS client that counts the DLQ messages received and not yet deleted or released."""

    def __init__(self, sqs, dlq_url: str):
        self.sqs, self.dlq_url, self.held, self.most = sqs, dlq_url, set(), 0

    def __getattr__(self, name):
        return getattr(self.sqs, name)

    def receive_message(self, **kw):
        got = self.sqs.receive_message(**kw)
        if kw["QueueUrl"] == self.dlq_url:
            self.held |= {m["ReceiptHandle"] for m in got.get("Messages", [])}
            self.most = max(self.most, len(self.held))
        return got

    def delete_message_batch(self, **kw):
        self.held -= {e["ReceiptHandle"] for e in kw["Entries"]}
        return self.sqs.delete_message_batch(**kw)

    def change_message_visibility_batch(self, **kw):
        self.held -= {e["ReceiptHandle"] for e in kw["Entries"] if e["VisibilityTimeout"] == 0}
        return self.sqs.change_message_visibility_batch(**kw)


def test_redrive_revives_and_moves_the_dlq_in_bounded_chunks_with_a_line_per_chunk(stack):
    client = Client(queue_url=stack.queue_url, table=stack.table)
    jobs = [client.send(Call("emails.send", [f"u{i}@x"], job_id=f"rd-{i}")) for i in range(12)]
    work(stack)
    assert {client.status(j.id) for j in jobs} == {DEAD}
    stack._sqs = counted = HeldCount(stack.sqs, stack.dlq_url)
    lines: list[str] = []
    report = redrive(stack, progress=lines.append, chunk=5)
    assert report["revived"] == 12 and report["moved"] == 12 and report["method"] == "receive/send/delete"
    assert counted.most <= 5  # never the whole DLQ hidden at once
    assert lines == ["chunk 1: received 5, moved 5; so far moved 5, revived 5",
                     "chunk 2: received 5, moved 5; so far moved 10, revived 10",
                     "chunk 3: received 2, moved 2; so far moved 12, revived 12"]
    assert {client.status(j.id) for j in jobs} == {QUEUED}
    assert dlq_bodies(stack) == []
    BROKEN["on"] = False
    work(stack)
    assert {client.status(j.id) for j in jobs} == {SUCCEEDED}


def test_a_job_that_dies_again_while_the_redrive_runs_is_left_for_a_later_redrive_not_revived_again(stack):
    """A revived job can die again (its worker is fast) before the redrive has read the DLQ to
    its end: that new message is not the redrive's to move, or the job would be revived round
    after round while the redrive lasts."""
    client = Client(queue_url=stack.queue_url, table=stack.table)
    jobs = [client.send(Call("emails.send", [f"u{i}@x"], job_id=f"da-{i}")) for i in range(3)]
    work(stack)
    assert {client.status(j.id) for j in jobs} == {DEAD}

    def worker_meanwhile(line: str) -> None:
        if line.startswith("chunk 1:"):  # the worker runs the first revived job: it dies again
            work(stack)

    report = redrive(stack, progress=worker_meanwhile, chunk=1)
    assert report["revived"] == 3 and report["moved"] == 3 and report["status"] == "COMPLETED"
    assert report["died_again"] == 1
    revived_twice = [j.id for j in jobs if get_job(stack, j.id)["generation"] > 2]
    assert revived_twice == []
    assert [b["id"] for b in dlq_bodies(stack)] == ["da-0"]  # left in the DLQ for a later redrive


def test_redrive_by_hand_on_a_fifo_queue_sends_each_message_back_in_its_own_group(indexed_table, monkeypatch):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # moto answers 500 to the move task: no retries
    stack = _fifo_stack(indexed_table)
    client = Client(queue_url=stack.queue_url, table=stack.table)
    groups = {f"fifo-rd-{i}": f"customer-{i % 2}" for i in range(4)}
    for job_id, group in groups.items():
        client.send(Call("emails.send", [f"{job_id}@x"], job_id=job_id, group=group))
    work(stack)
    assert {client.status(i) for i in groups} == {DEAD}
    dead = boto3.client("sqs").receive_message(QueueUrl=stack.dlq_url, MaxNumberOfMessages=10,
                                               VisibilityTimeout=0)["Messages"]

    report = redrive(stack, progress=lambda line: None)

    assert report["moved"] == 4 and report["method"] == "receive/send/delete" and dlq_bodies(stack) == []
    sent = boto3.client("sqs").receive_message(QueueUrl=stack.queue_url, MaxNumberOfMessages=10,
                                               AttributeNames=["All"])["Messages"]
    assert {decode_job(m["Body"]).id: m["Attributes"]["MessageGroupId"] for m in sent} == groups
    # Deduplicated as the move of that DLQ message, not as the job's first send (same body, same
    # enqueued_at): SQS would drop that as a copy within five minutes of it.
    assert {m["Attributes"]["MessageDeduplicationId"] for m in sent} == {m["MessageId"] for m in dead}


def test_redrive_without_revive_lets_the_worker_bounce_dead_jobs_back(stack, monkeypatch):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    client = Client(queue_url=stack.queue_url, table=stack.table)
    job = client.send(Call("emails.send", ["a@b"], job_id="bounce"))
    work(stack)
    report = redrive(stack, revive_dead=False, progress=lambda line: None)
    assert report["revived"] == 0 and report["moved"] == 1
    BROKEN["on"] = False
    work(stack)
    assert client.status(job.id) == DEAD  # seen dead, not run, moved back
    assert [b["id"] for b in dlq_bodies(stack)] == [job.id]


class FakeMoveSqs:
    """SQS's message move task as AWS reports it: RUNNING with progress, then COMPLETED."""

    def __init__(self, fail: str | None = None):
        self.polls = 0
        self.started = None
        self.fail = fail

    def start_message_move_task(self, **params):
        self.started = params
        return {"TaskHandle": "h1"}

    def list_message_move_tasks(self, SourceArn, MaxResults):
        self.polls += 1
        moved = min(self.polls * 40, 100)
        status = "RUNNING" if moved < 100 else ("FAILED" if self.fail else "COMPLETED")
        return {"Results": [{"TaskHandle": "h1", "Status": status, "ApproximateNumberOfMessagesMoved": moved,
                             "ApproximateNumberOfMessagesToMove": 100, "FailureReason": self.fail or ""}]}


def test_redrive_starts_the_move_task_toward_the_jobs_queue_and_reports_its_progress():
    stack = Stack(table="t", queue_url="https://q/jobs", dlq_url="https://q/dlq")
    stack._sqs = fake = FakeMoveSqs()
    stack._arns = {"https://q/jobs": "arn:aws:sqs:r:1:jobs", "https://q/dlq": "arn:aws:sqs:r:1:dlq"}
    lines: list[str] = []
    report = redrive(stack, revive_dead=False, progress=lines.append, poll_s=0, max_per_second=50)
    assert fake.started == {"SourceArn": "arn:aws:sqs:r:1:dlq", "DestinationArn": "arn:aws:sqs:r:1:jobs",
                            "MaxNumberOfMessagesPerSecond": 50}
    assert lines == ["message move task started: dlq -> jobs", "running: moved 40 of 100", "running: moved 80 of 100",
                     "completed: moved 100 of 100"]
    assert report == {"revived": 0, "revive_refused": 0, "moved": 100, "method": "StartMessageMoveTask",
                      "status": "COMPLETED"}
    stack._sqs = FakeMoveSqs(fail="AccessDenied on the destination")
    lines.clear()
    assert redrive(stack, revive_dead=False, progress=lines.append, poll_s=0)["status"] == "FAILED"
    assert lines[-1] == "the move task failed: AccessDenied on the destination"


# -- the command line ---------------------------------------------------------------------------


def test_the_commands_print_aligned_tables_and_json(stack, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "150")
    client = Client(queue_url=stack.queue_url, table=stack.table)
    doomed = [client.send(Call("emails.send", [f"user{i}@example.com"], job_id=f"cli-{i}")) for i in range(2)]
    work(stack)
    base = ["--table", stack.table]

    assert cli.main(["jobs", "list", "--status", "dead", "--task", "emails.send", "--since", "2h", *base]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["FINISHED", "(UTC)", "ID", "TASK", "STATUS", "ATT", "DURATION", "ERROR"]
    assert {line.split()[2] for line in out[1:3]} == {d.id for d in doomed}
    status_col = out[0].index("STATUS")
    assert all(line[status_col:status_col + 4] == "dead" for line in out[1:3])  # aligned columns
    assert all(len(line) <= 150 for line in out) and out[-1] == "2 job(s)"
    assert "RuntimeError: smtp refused user" in out[1]

    assert cli.main(["jobs", "list", "--status", "dead", "--json", *base]) == 0
    assert {r["id"] for r in codec.loads(capsys.readouterr().out)} == {d.id for d in doomed}

    assert cli.main(["jobs", "show", "cli-0", *base]) == 0
    text = capsys.readouterr().out
    fields = {line[:12].strip(): line[12:].strip() for line in text.split("\n\n")[0].splitlines()}
    assert fields["status"] == "dead" and fields["attempts"] == "2" and fields["task"] == "emails.send"
    assert fields["error"] == "RuntimeError: smtp refused user0@example.com"
    assert fields["queue wait"].endswith(("ms", "s")) and fields["finished"] != "-"
    assert 'raise RuntimeError(f"smtp refused {to}")' in text.split("traceback:\n")[1]
    assert cli.main(["jobs", "show", "nope", *base]) == 1

    queue = ["--queue-url", stack.queue_url]
    assert cli.main(["dlq", "peek", *base, *queue]) == 0
    text = capsys.readouterr().out
    assert "2 visible" in text and "cli-0" in text and "cli-1" in text

    assert cli.main(["jobs", "retry", "cli-0", *base, *queue]) == 0
    assert "job cli-0 enqueued again (revived as generation 2" in capsys.readouterr().out
    assert cli.main(["jobs", "retry", "cli-0", *base, *queue]) == 1
    assert "already sent again (generation 2)" in capsys.readouterr().err
    assert cli.main(["jobs", "show", "cli-0", *base]) == 0
    text = capsys.readouterr().out
    assert "\nstatus        queued (generation 2)\n" in text and "\nrevived  " in text
    assert "generation 1  dead after 2 attempt(s)" in text

    assert cli.main(["jobs", "list", *base]) == 2  # usage: the command line lacks what it needs
    assert "give --status or --task" in capsys.readouterr().err


def test_with_signed_jobs_a_revived_or_redriven_job_still_passes_the_workers_check(stack, monkeypatch):
    """Signing on (KINDLING_SIGNING_SECRET for the producer, the worker and the operator): the
    worker keeps a dead job's signature on its DLQ copy, a redrive carries it back, and a
    revive signs the job it sends again; none of them is rejected."""
    import base64
    import json

    keys = {"current": "k1", "keys": {"k1": base64.b64encode(b"o" * 32).decode()}}
    arn = boto3.client("secretsmanager").create_secret(Name=f"ops-{uuid.uuid4().hex[:8]}",
                                                       SecretString=json.dumps(keys))["ARN"]
    monkeypatch.setenv("KINDLING_SIGNING_SECRET", arn)
    client = Client(queue_url=stack.queue_url, table=stack.table)
    doomed = client.send(Call("emails.send", ["ada@example.com"], job_id="mail-signed"))
    work(stack)
    assert client.record(doomed.id)["status"] == DEAD
    (message,) = boto3.client("sqs").receive_message(QueueUrl=stack.dlq_url, VisibilityTimeout=0,
                                                     MessageAttributeNames=["All"])["Messages"]
    assert message["MessageAttributes"]["kindling_signature"]["StringValue"].startswith("v1:k1:")
    BROKEN["on"] = False
    retry_job(stack, doomed.id)
    work(stack)
    assert client.record(doomed.id)["status"] == SUCCEEDED


def test_info_shows_the_queues_depth_and_the_last_hours_jobs_by_status_through_the_indexes(stack, capsys,
                                                                                           monkeypatch):
    import botocore.client

    client = Client(queue_url=stack.queue_url, table=stack.table)
    for i in range(2):
        client.send(Call("emails.send", [f"u{i}@x"], job_id=f"info-dead-{i}"))
    client.send(Call("ops.ok", [1], job_id="info-ok"))
    work(stack)
    client.send(Call("ops.ok", [2], job_id="info-later", delay=60))
    calls: list[str] = []
    real = botocore.client.BaseClient._make_api_call

    def record(self, operation, params):
        calls.append(operation)
        return real(self, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", record)
    base = ["--table", stack.table, "--queue-url", stack.queue_url]
    assert cli.main(["info", "--json", "--task", "ops.ok", *base]) == 0
    report = codec.loads(capsys.readouterr().out)
    assert {k: report["queue"][k] for k in ("visible", "in_flight", "delayed")} == {"visible": 0, "in_flight": 0,
                                                                                   "delayed": 1}
    assert report["dlq"]["visible"] == 2
    assert report["by_status"][DEAD] == 2 and report["by_status"][SUCCEEDED] == 1
    assert "Scan" not in calls and "Query" in calls
    assert cli.main(["info", *base]) == 0
    out = capsys.readouterr().out
    assert "jobs queue" in out and "dead-letter queue" in out and "dead 2" in out and "1 delayed" in out
