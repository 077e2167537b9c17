"""Large payloads through S3 (moto): the queue's own limit, arguments and results behind a
pointer, and every way reading one can fail as that job's outcome, never the batch's."""

import socket
import uuid

import boto3
import pytest
from kindling.core import codec
from kindling.core.envelope import decode_job, encode_job, new_job
from kindling.core.errors import PayloadTooLarge, PayloadUnavailable
from kindling.core.records import MAX_RESULT_BYTES
from kindling.core.registry import Registry
from kindling.drivers.aws.s3 import S3Client
from kindling.engine.runner import Delivery, Runner
from kindling.producer.client import Client
from kindling.shared import payloads
from kindling.stores.results import DynamoResultStore, MemoryResultStore

BIG = 2 * 1024 * 1024


@pytest.fixture
def s3(moto_endpoint):
    return S3Client(endpoint=moto_endpoint)


@pytest.fixture
def queue(moto_endpoint):
    def make(**attributes):
        return boto3.client("sqs").create_queue(
            QueueName=f"jobs-{uuid.uuid4().hex[:8]}", Attributes={k: str(v) for k, v in attributes.items()})["QueueUrl"]
    return make


def registry_tasks(r: Registry) -> None:
    """This module's tasks, on the fresh registry the shared ``reg`` fixture gives each test."""

    @r.task(name="size")
    def size(blob, *, pad=""):
        return len(blob) + len(pad)

    @r.task(name="echo")
    def echo(blob):
        return blob

    @r.task(name="big")
    def big(n):
        return "r" * n

    @r.task(name="async_size")
    async def async_size(blob):
        return len(blob)

    @r.task(name="secret", redact=True)
    def secret(n):
        return "s" * n


def receive(queue_url):
    sqs = boto3.client("sqs")
    messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10,
                                   AttributeNames=["ApproximateReceiveCount"]).get("Messages", [])
    return [Delivery(m["MessageId"], m["Body"], 1) for m in messages]


def pointer_job(s3, bucket, task, args, kwargs=None):
    """A delivery whose arguments are in S3, as a producer sends it."""
    job = new_job(task)
    ref = payloads.put(s3, bucket, "args", job.id, payloads.encode_arguments(list(args), kwargs or {}))
    job = new_job(task, job_id=job.id, payload=ref)
    return job, Delivery(job.id, encode_job(job).decode(), 1)


# -- the producer ---------------------------------------------------------------------------


def test_the_limit_is_the_queues_read_once_per_client(queue, monkeypatch):
    url = queue(MaximumMessageSize=1024)
    client = Client(queue_url=url, table="unused", payload_bucket="")
    calls = []
    real = client.sqs.get_queue_attributes
    monkeypatch.setattr(client.sqs, "get_queue_attributes", lambda **kw: calls.append(kw) or real(**kw))
    client.enqueue("size", "x" * 500)
    with pytest.raises(PayloadTooLarge, match=r"the queue takes at most 1,024 .*KINDLING_PAYLOAD_BUCKET"):
        client.enqueue("size", "x" * 1100)
    client.enqueue_many([("size", ["y" * 400], {})] * 5)  # batches of at most 1 KiB in all
    assert calls == [{"QueueUrl": url, "AttributeNames": ["MaximumMessageSize"]}]
    assert client.max_message_bytes == 1024


def test_a_queue_of_1_mib_takes_a_message_the_old_256_kib_limit_refused(queue):
    url = queue(MaximumMessageSize=1_048_576)
    client = Client(queue_url=url, table="unused", payload_bucket="")
    client.enqueue("size", "x" * 600_000)  # inline: no bucket needed
    (d,) = receive(url)
    assert decode_job(d.body).payload is None


def test_arguments_over_the_limit_go_to_s3_behind_a_pointer(queue, bucket, s3):
    url = queue(MaximumMessageSize=4096)
    client = Client(queue_url=url, table="unused", payload_bucket=bucket)
    handle = client.enqueue("size", "z" * 10_000, pad="p")
    (d,) = receive(url)
    job = decode_job(d.body)
    assert (job.id, job.args, job.kwargs) == (handle.id, [], {})
    ref = job.payload
    assert ref["bucket"] == bucket and ref["key"] == f"args/{job.id}/{ref['sha256']}"
    stored = s3.get_object(bucket, ref["key"])
    assert len(stored) == ref["size"] and codec.loads(stored) == {"args": ["z" * 10_000], "kwargs": {"pad": "p"}}
    assert len(d.body) < 1000  # what a pointer costs on the queue


def test_a_chains_first_step_and_a_chord_member_keep_their_follow_ups_when_offloaded(queue, bucket, s3):
    from kindling.producer.client import Call

    url = queue(MaximumMessageSize=4096)
    client = Client(queue_url=url, table="unused", payload_bucket=bucket)
    rest = [{"task": "size", "args": [], "kwargs": {}}]
    parent = {"id": "big-chord", "index": 0, "size": 1, "then": {"task": "size", "args": [], "kwargs": {}}}
    client.send(Call("size", ["z" * 10_000], chain=rest))
    client.send(Call("size", ["z" * 10_000], job_id="big-chord.0", parent=parent))
    jobs = sorted((decode_job(d.body) for d in receive(url)), key=lambda j: j.chain is None)
    assert [(j.payload is not None, j.chain, j.parent) for j in jobs] == [(True, rest, None), (True, None, parent)]


# -- the worker -----------------------------------------------------------------------------


def test_a_2_mib_argument_and_a_2_mib_result_round_trip(queue, bucket, s3, table, reg):
    url = queue(MaximumMessageSize=1_048_576)
    client = Client(queue_url=url, table=table, payload_bucket=bucket)
    blob = "".join(chr(0x20 + i % 0x5E) for i in range(BIG)) + "é☃"
    handles = [client.enqueue("echo", blob), client.enqueue("size", "small")]
    runner = Runner(reg, DynamoResultStore(table), log=None, metrics=False, payload_bucket=bucket, s3=s3)
    outcomes = runner.run(receive(url))
    assert [o.status for o in outcomes] == ["succeeded", "succeeded"]
    record = client.record(handles[0].id)
    assert "result" not in record
    ref = record["result_payload"]
    assert ref["bucket"] == bucket and ref["key"].startswith(f"results/{handles[0].id}/") and ref["size"] > BIG
    assert handles[0].result(timeout=5) == blob
    assert handles[1].result(timeout=5) == 5


def _run_one(reg, s3, d, **options):
    runner = Runner(reg, MemoryResultStore(), log=None, metrics=False, s3=s3, **options)
    return runner.run([d, Delivery("plain", encode_job(new_job("size", ["ok"])).decode(), 1)])


def test_a_missing_object_is_that_jobs_clear_failure(reg, s3, bucket):
    job, d = pointer_job(s3, bucket, "size", ["abc"])
    boto3.client("s3").delete_object(Bucket=bucket, Key=job.payload["key"])
    broken, plain = _run_one(reg, s3, d, payload_bucket=bucket)
    assert (broken.status, plain.status) == ("dead", "succeeded")  # no retry can bring it back
    error = broken.record["error"]
    assert error["type"] == "PayloadUnavailable"
    assert f"s3://{bucket}/{job.payload['key']}" in error["message"] and "NoSuchKey" in error["message"]


@pytest.mark.parametrize(("stored", "reason"), [
    (b'{"args":["abd"],"kwargs":{}}', "does not match the pointer's sha256"),
    (b'{"args": ["abc"]}', "bytes, the pointer says"),
])
def test_an_altered_object_is_refused(reg, s3, bucket, stored, reason):
    job, d = pointer_job(s3, bucket, "size", ["abc"])
    boto3.client("s3").put_object(Bucket=bucket, Key=job.payload["key"], Body=stored)
    broken, plain = _run_one(reg, s3, d, payload_bucket=bucket)
    assert (broken.status, plain.status) == ("dead", "succeeded")
    assert reason in broken.record["error"]["message"]


@pytest.mark.parametrize(("content", "reason"), [
    (b"not json", "not JSON"),
    (b'[1, 2]', 'not {"args"'),
    (b'{"args": [], "kwargs": {}}', "do not fit the task"),
])
def test_an_object_that_holds_no_fitting_arguments_is_refused(reg, s3, bucket, content, reason):
    job = new_job("size")
    ref = payloads.put(s3, bucket, "args", job.id, content)
    d = Delivery(job.id, encode_job(new_job("size", job_id=job.id, payload=ref)).decode(), 1)
    broken, plain = _run_one(reg, s3, d, payload_bucket=bucket)
    assert (broken.status, plain.status) == ("dead", "succeeded")
    assert reason in broken.record["error"]["message"]


def test_s3_out_of_reach_is_a_failure_to_retry(reg, s3, bucket, moto_endpoint):
    _, d = pointer_job(s3, bucket, "size", ["abc"])
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    unreachable = S3Client(endpoint=f"http://127.0.0.1:{closed}", max_attempts=1)
    broken, plain = _run_one(reg, unreachable, d, payload_bucket=bucket)
    assert (broken.status, plain.status) == ("failed", "succeeded")
    assert broken.record["error"]["type"] == "PayloadUnavailable" and broken.attempts == 1


def test_a_large_result_without_a_bucket_still_fails_as_too_large(reg, s3):
    (o,) = Runner(reg, MemoryResultStore(), log=None, metrics=False, payload_bucket="", s3=s3).run(
        [Delivery("m", encode_job(new_job("big", [MAX_RESULT_BYTES + 10])).decode(), 1)])
    assert o.status == "failed" and o.record["error"]["type"] == "ResultTooLarge"
    assert "KINDLING_PAYLOAD_BUCKET" in o.record["error"]["message"]


def test_a_redacted_tasks_large_result_never_reaches_s3(reg, s3, bucket):
    (o,) = Runner(reg, MemoryResultStore(), log=None, metrics=False, payload_bucket=bucket, s3=s3).run(
        [Delivery("m", encode_job(new_job("secret", [MAX_RESULT_BYTES + 10])).decode(), 1)])
    assert "result_payload" not in (o.record or {})
    assert boto3.client("s3").list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0


def test_a_result_just_under_the_limit_stays_inline(reg, s3, bucket):
    (o,) = Runner(reg, MemoryResultStore(), log=None, metrics=False, payload_bucket=bucket, s3=s3).run(
        [Delivery("m", encode_job(new_job("big", [MAX_RESULT_BYTES - 2])).decode(), 1)])
    assert o.status == "succeeded" and len(o.record["result"]) == MAX_RESULT_BYTES
    assert "result_payload" not in o.record


def test_a_result_that_cannot_be_stored_fails_the_job_only(reg, bucket):
    unreachable = S3Client(endpoint="http://127.0.0.1:9", max_attempts=1)
    d = Delivery("m", encode_job(new_job("big", [MAX_RESULT_BYTES + 1])).decode(), 1)
    big, plain = _run_one(reg, unreachable, d, payload_bucket=bucket)
    assert (big.status, plain.status) == ("failed", "succeeded")
    assert "could not be stored" in big.record["error"]["message"]


def test_fetch_holds_a_records_pointer_to_the_envelopes_rule(s3):
    with pytest.raises(PayloadUnavailable, match="payload.sha256") as info:
        payloads.fetch(s3, {"bucket": "abc", "key": "k", "size": 1, "sha256": "X" * 64})
    assert info.value.retryable is False


def test_fetch_tells_an_object_lost_for_good_from_one_it_cannot_have_now(s3, bucket, moto_endpoint):
    """``lost`` only where no retry brings the bytes back: a chord or chain waiting on a
    result gives up on that alone (kindling.engine.followups); the rest may be a blip or the
    reader's setup."""
    ref = payloads.put(s3, bucket, "results", "j1", b'"abc"')
    assert payloads.fetch(s3, ref) == b'"abc"'
    for lost, reason in [(dict(ref, key="results/j1/" + "0" * 64), "NoSuchKey"),
                         (dict(ref, size=4), "the pointer says 4"),
                         (dict(ref, sha256="0" * 64), "sha256"),
                         (dict(ref, bucket="x"), "payload.bucket")]:
        with pytest.raises(PayloadUnavailable, match=reason) as info:
            payloads.fetch(s3, lost)
        assert (info.value.lost, info.value.retryable) == (True, False)
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    for client, where, retryable in [(s3, dict(ref, bucket=f"gone-{bucket}"), False),  # NoSuchBucket
                                     (S3Client(endpoint=f"http://127.0.0.1:{closed}", max_attempts=1), ref, True)]:
        with pytest.raises(PayloadUnavailable) as info:
            payloads.fetch(client, where)
        assert (info.value.lost, info.value.retryable) == (False, retryable)


# -- reading a result kept in S3 -------------------------------------------------------------


def test_jobs_show_reads_a_result_kept_in_s3(table, bucket, s3, capsys, monkeypatch):
    from kindling.core.records import build_record
    from kindling.tools import cli

    monkeypatch.setenv("COLUMNS", "200")
    text = codec.dumps({"rows": ["x" * 50] * 3})
    ref = payloads.put(s3, bucket, "results", "show-1", text.encode())
    records = [build_record(key=key, task="report", status="succeeded", attempts=1, started_at=1, finished_at=2,
                            result_payload=dict(ref, key=ref["key"] if key == "show-1" else "results/gone/x"))
               for key in ("show-1", "show-2")]
    DynamoResultStore(table).write(records)

    assert cli.main(["jobs", "show", "show-1", "--table", table]) == 0
    fields = dict(line.split(None, 1) if " " in line else (line, "") for line in
                  capsys.readouterr().out.replace("result in", "result_in").splitlines())
    assert fields["result_in"] == f"s3://{bucket}/{ref['key']} ({len(text):,} bytes)"
    assert fields["result"] == text
    assert cli.main(["jobs", "show", "show-1", "--json", "--table", table]) == 0
    assert codec.loads(capsys.readouterr().out)["result"] == text

    assert cli.main(["jobs", "show", "show-2", "--table", table]) == 0  # the record still shows
    assert "result     unreadable: cannot read" in capsys.readouterr().out


def test_a_queue_that_cannot_be_asked_leaves_the_old_limit(moto_endpoint):
    client = Client(queue_url=moto_endpoint + "/000000000000/no-such-queue", table="unused", payload_bucket="")
    assert client.max_message_bytes == 262_144


@pytest.mark.parametrize(("task", "options"), [("size", {"threads": 4}), ("async_size", {}), ("size", {})])
def test_every_way_of_running_reads_the_arguments(reg, s3, bucket, task, options):
    deliveries = [pointer_job(s3, bucket, task, ["q" * (1000 + i)])[1] for i in range(3)]
    outcomes = Runner(reg, MemoryResultStore(), log=None, metrics=False, s3=s3, payload_bucket=bucket,
                      **options).run(deliveries)
    assert [(o.status, o.record.get("result")) for o in outcomes] == [("succeeded", str(1000 + i)) for i in range(3)]


# -- the worker's follow-ups: the producer's rule, in SendMessageBatch calls -----------------


def test_fit_leaves_a_job_that_fits_and_asks_for_no_client():
    job = new_job("size", ["x" * 100])

    def no_client():
        raise AssertionError("a job that fits needs no S3 client")

    assert payloads.fit(job, 1024, "", no_client) == (job, encode_job(job))
    with pytest.raises(PayloadTooLarge, match=r"the queue takes at most 100 .*KINDLING_PAYLOAD_BUCKET"):
        payloads.fit(job, 100, "", no_client)


def test_fit_keeps_the_id_chain_and_parent_and_refuses_a_chain_too_large_for_a_pointer(s3, bucket):
    chain = [{"task": "size", "args": [], "kwargs": {}}]
    job = new_job("size", ["x" * 5000], job_id="fit-1", chain=chain)
    moved, body = payloads.fit(job, 1024, bucket, lambda: s3)
    assert decode_job(body) == moved and (moved.id, moved.chain, moved.args) == ("fit-1", chain, [])
    assert payloads.decode_arguments(payloads.fetch(s3, moved.payload)) == (["x" * 5000], {})
    heavy = new_job("size", ["x" * 5000], chain=[{"task": "size", "args": ["y" * 5000], "kwargs": {}}])
    with pytest.raises(PayloadTooLarge, match="even with its arguments in S3"):
        payloads.fit(heavy, 1024, bucket, lambda: s3)


def test_sqs_batches_hold_ten_entries_and_the_queues_limit_in_all():
    small = [new_job("size", [n]) for n in range(23)]
    assert [len(b) for b in payloads.sqs_batches(small, 1 << 20, 0, "", None)] == [10, 10, 3]
    sizes = [len(encode_job(j)) for j in small[:4]]
    limit = sizes[0] + sizes[1] + 2 * 160  # two signed messages a batch
    batches = payloads.sqs_batches(small[:4], limit, 160, "", None)
    assert [len(b) for b in batches] == [2, 2] and sum(batches, []) == small[:4]
