"""The paths a job can take, each behind one small interface, so one table of scenarios can
run over all of them (see conftest.py for the fixtures that build them).

Every adapter configures its path as it is deployed or started (the template's defaults for
the Lambda function, ``kindling worker``'s for the local workers) and drives it one round at a
time, never sleeping through a real visibility timeout: after each round it records the
delay the worker *asked* for each message it handed back, then makes that message
deliverable at once (a job waiting for its own ``not_before`` is left waiting).

The JSON codec is process-wide (``kindling.core.codec.use_orjson``), but the paths do not share
a process in production: producers and long-lived workers use orjson, a Lambda function
the standard codec. Each phase runs under the codec its process would have.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid

from conformance import scenario_tasks as tasks
from kindling.core import codec

NOT_APPLICABLE = "not applicable"
SIGNING_SECRET = "conformance-signing"
SIGNING_KEYS = json.dumps({"current": "k1", "keys": {"k1": "azFrMWsxazFrMWsxazFrMWsxazFrMWsxazFrMWsxazE="}})
RETRY_DELAY_S = 5  # template.yaml's RetryDelay default
MAX_ATTEMPTS = 3  # template.yaml's MaxAttempts default, kindling worker's default
MAX_RECEIVES = 5  # the test queues' maxReceiveCount (template minimum 2, default 100)
QUEUE_VISIBILITY_S = 30  # SQS's default visibility timeout
STREAM_VISIBILITY_MS = 30_000  # kindling worker --valkey's default (KINDLING_VALKEY_VISIBILITY_MS)


def deploy(monkeypatch, env: dict[str, str]) -> None:
    """Set a worker's environment before it is built (what its deployment would set)."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)


class NotApplicable(Exception):
    """What a scenario asked of a path that has no such thing (eager mode has no message body)."""


@contextlib.contextmanager
def codec_of(orjson: bool):
    """Run a phase under the JSON codec its process would have, then put back the test's."""
    saved = codec.loads, codec.dumps, codec._orjson
    if orjson:
        codec.use_orjson()
    else:
        codec.loads, codec.dumps, codec._orjson = codec._loads, codec._dumps, None
    try:
        yield
    finally:
        codec.loads, codec.dumps, codec._orjson = saved


def keyring():
    from kindling.shared.signed import Keyring

    return Keyring(SIGNING_SECRET, fetch=lambda ref, deadline: SIGNING_KEYS)


def verifier():
    from kindling.shared.signed import Verifier

    return Verifier(keyring())


def job_of(body) -> dict:
    """The envelope's fields, or ``{}`` for a body that is not one."""
    try:
        value = json.loads(body)
    except (ValueError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}


def waiting(body) -> bool:
    """Whether the message's job is waiting for its own ``not_before`` (not a retry), or for
    its task's rate limit window (the scenarios' rate-limited task allows one run an hour)."""
    job = job_of(body)
    not_before = job.get("not_before")
    if isinstance(not_before, int) and not_before > time.time() * 1000:
        return True
    task = tasks.registry.find(job.get("task") or "")
    return task is not None and task.rate_limit is not None


def decode_result(text):
    """A record's JSON result as written (NaN allowed, so a path that wrote one shows it)."""
    return None if text is None else json.loads(text)


class Path:
    """One path: send jobs, drive its worker until nothing is left to do now, observe."""

    name = ""
    crashes_to_exhaust = 0  # deliveries without an outcome before the next one is the last allowed
    budget_ms = 30_000  # a Lambda invocation's time (the paths through LambdaWorker)

    def __init__(self) -> None:
        self.delays: dict[str, list[int]] = {}

    # -- sending ---------------------------------------------------------------------------

    def producer(self):
        """What ``kindling.producer.dispatch`` sends task handles and canvases through."""
        raise NotImplementedError

    def send(self, calls: list) -> list[str]:
        with codec_of(True):  # producers are long-lived processes: orjson
            return [h.id for h in self.producer().enqueue_many(calls)]

    def enqueue(self, task, *args, **options) -> str:
        from kindling.producer.client import Call

        kwargs = options.pop("kwargs", None)
        return self.send([Call(task, list(args), kwargs, **options)])[0]

    def enqueue_raw(self, body: bytes, signature: str | None = "sign") -> None:
        """Put a message with this exact body on the path; ``signature="sign"`` signs it
        when signing is on, a string is sent as the signature, ``None`` sends none."""
        raise NotApplicable(f"{self.name}: no message body to send")

    def crash(self, times: int) -> None:
        """Deliver every queued message ``times`` times to a worker that dies before recording."""
        raise NotApplicable(f"{self.name}: no delivery to crash")

    def revoke(self, job_id: str, task: str | None = None) -> None:
        from kindling.core.records import revoked_record

        assert not self.store().write([revoked_record(job_id, task)])

    # -- driving -----------------------------------------------------------------------------

    def run_until_settled(self, max_rounds: int = 10) -> int:
        """Rounds until one finds nothing to do; returns how many ran."""
        for n in range(max_rounds):
            if not self.round():
                return n
        raise AssertionError(f"{self.name}: still busy after {max_rounds} rounds")

    def round(self) -> bool:
        raise NotImplementedError

    def asked(self, job_id: str | None, seconds: float) -> None:
        if job_id:
            self.delays.setdefault(job_id, []).append(round(seconds))

    # -- observing -----------------------------------------------------------------------------

    def store(self):
        raise NotImplementedError

    def record(self, key: str) -> dict | None:
        raise NotImplementedError

    def records(self) -> list[dict]:
        raise NotImplementedError

    def dead_letters(self) -> list[str]:
        """The job ids whose messages were moved to the path's dead letters."""
        return []

    def result_of(self, record: dict):
        if "result_payload" in record:
            import boto3

            pointer = record["result_payload"]
            body = boto3.client("s3").get_object(Bucket=pointer["bucket"], Key=pointer["key"])["Body"].read()
            return decode_result(body)
        return decode_result(record.get("result"))

    def observe(self, job_id: str) -> dict:
        """The normalized outcome of one job: the same keys on every path."""
        record = self.record(job_id) or {}
        error = record.get("error") or {}
        return {
            "status": record.get("status"),
            "attempts": record.get("attempts", 0),
            "error": error.get("type"),
            "result": self.result_of(record) if record.get("status") == "succeeded" else None,
            "delays": self.delays.get(job_id, []),
            "dead_letter": job_id in self.dead_letters(),
            "due_at": record.get("due_at"),  # a scheduled record's due time (epoch ms)
        }

    def close(self) -> None:
        pass


# -- SQS --------------------------------------------------------------------------------------


class _Sqs(Path):
    crashes_to_exhaust = MAX_RECEIVES - 1

    def __init__(self, table: str, bucket: str, signing: bool):
        super().__init__()
        import boto3
        from kindling.producer.client import Client

        self.table, self.bucket, self.signing = table, bucket, signing
        self.sqs = boto3.client("sqs")
        name = f"conf-{uuid.uuid4().hex[:8]}"
        self.dlq_url = self.sqs.create_queue(QueueName=f"{name}-dead")["QueueUrl"]
        dlq_arn = self.sqs.get_queue_attributes(QueueUrl=self.dlq_url, AttributeNames=["QueueArn"])
        redrive = json.dumps({"deadLetterTargetArn": dlq_arn["Attributes"]["QueueArn"],
                              "maxReceiveCount": str(MAX_RECEIVES)})
        self.queue_url = self.sqs.create_queue(QueueName=name, Attributes={
            "VisibilityTimeout": str(QUEUE_VISIBILITY_S), "RedrivePolicy": redrive})["QueueUrl"]
        self.queue_arn = self.sqs.get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        with codec_of(True):
            self.client = Client(self.queue_url, table, payload_bucket=bucket, signing=keyring() if signing else "")
        self._dead: list[str] | None = None

    def producer(self):
        return self.client

    def enqueue_raw(self, body: bytes, signature: str | None = "sign") -> None:
        from kindling.core import jobsig

        params = {"QueueUrl": self.queue_url, "MessageBody": body.decode()}
        if signature == "sign":
            signature = keyring().sign(jobsig.sqs_destination(self.queue_url), body) if self.signing else None
        if signature is not None:
            params["MessageAttributes"] = {jobsig.ATTRIBUTE: {"DataType": "String", "StringValue": signature}}
        self.sqs.send_message(**params)

    def receive(self) -> list[dict]:
        return self.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
            MessageSystemAttributeNames=["ApproximateReceiveCount", "MessageGroupId", "AWSTraceHeader"],
            MessageAttributeNames=["All"]).get("Messages", [])

    def crash(self, times: int) -> None:
        for _ in range(times):
            for m in self.receive():
                self.sqs.change_message_visibility(QueueUrl=self.queue_url, ReceiptHandle=m["ReceiptHandle"],
                                                   VisibilityTimeout=0)

    def settle_round(self, messages: list[dict], kept: set[str], changed: dict[str, int]) -> None:
        """Messages ``kept`` on the queue: record the delay they are kept back for (a
        visibility change SQS accepted, else the queue's visibility timeout), then make them
        visible now unless they wait for their ``not_before``."""
        for m in messages:
            if m["MessageId"] not in kept:
                continue
            self.asked(job_of(m["Body"]).get("id"), changed.get(m["MessageId"], QUEUE_VISIBILITY_S))
            if not waiting(m["Body"]):
                with contextlib.suppress(Exception):  # moved to the DLQ meanwhile
                    self.sqs.change_message_visibility(QueueUrl=self.queue_url, ReceiptHandle=m["ReceiptHandle"],
                                                       VisibilityTimeout=0)

    def store(self):
        from kindling.stores.results import DynamoResultStore

        return DynamoResultStore(self.table)

    def record(self, key: str) -> dict | None:
        return self.client.record(key)

    def records(self) -> list[dict]:
        import boto3
        from kindling.stores.results import from_item

        items = boto3.client("dynamodb").scan(TableName=self.table, ConsistentRead=True)["Items"]
        return [from_item(i) for i in items]

    def dead_letters(self) -> list[str]:
        if self._dead is None:
            self._dead = []
            while True:
                got = self.sqs.receive_message(QueueUrl=self.dlq_url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                               MessageAttributeNames=["All"]).get("Messages", [])
                if not got:
                    break
                for m in got:
                    attribute = m.get("MessageAttributes", {}).get("kindling_job_id")
                    self._dead.append(attribute["StringValue"] if attribute else job_of(m["Body"]).get("id"))
        return self._dead

    def round(self) -> bool:
        self._dead = None
        return self._round()

    def _round(self) -> bool:
        raise NotImplementedError


def accepted(changed: dict[str, int], params: dict, response: dict) -> None:
    """Note the visibility changes SQS accepted: the delay a message is really kept back for
    (a refused one leaves the message to the queue's visibility timeout)."""
    failed = {f["Id"] for f in response.get("Failed", [])}
    for entry in params["Entries"]:
        if entry["Id"] not in failed:
            changed[entry["Id"]] = entry["VisibilityTimeout"]


class SqsHandler(_Sqs):
    """The Lambda function: kindling.triggers.sqs.handler.LambdaWorker on SQS events made of received
    messages, settled as Lambda's event source mapping settles them (delete what is not in
    batchItemFailures); the worker's own ChangeMessageVisibility and DLQ moves go to moto."""

    name = "sqs_handler"

    def __init__(self, table: str, bucket: str, signing: bool, monkeypatch, settings: dict | None = None):
        super().__init__(table, bucket, signing)
        from kindling.triggers.sqs.handler import LambdaWorker

        deploy(monkeypatch, {"KINDLING_TABLE": table, "KINDLING_QUEUE_URL": self.queue_url,
                             "KINDLING_DLQ_URL": self.dlq_url, "KINDLING_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
                             "KINDLING_MAX_RECEIVES": str(MAX_RECEIVES), "KINDLING_RETRY_DELAY": str(RETRY_DELAY_S),
                             "KINDLING_PAYLOAD_BUCKET": bucket} | (settings or {}))
        options = {"verifier": verifier()} if signing else {}
        self.worker = LambdaWorker(tasks.registry, log=None, metrics=False, **options)
        self.changed: dict[str, int] = {}
        from kindling.drivers.aws.client import JsonClient

        original = JsonClient.call

        def call(client, action, params, *args, **kwargs):
            response = original(client, action, params, *args, **kwargs)  # a refused batch records nothing
            if action == "ChangeMessageVisibilityBatch":
                accepted(self.changed, params, response)
            return response

        monkeypatch.setattr(JsonClient, "call", call)

    def _round(self) -> bool:
        messages = self.receive()
        if not messages:
            return False
        event = {"Records": [{
            "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
            "attributes": m.get("Attributes", {}), "eventSource": "aws:sqs", "eventSourceARN": self.queue_arn,
            "awsRegion": "us-east-1",
            "messageAttributes": {k: {"stringValue": a.get("StringValue"), "dataType": a.get("DataType")}
                                  for k, a in m.get("MessageAttributes", {}).items()}} for m in messages]}
        self.changed = {}
        with codec_of(False):  # a Lambda function keeps the standard codec
            response = self.worker(event, Context(self.budget_ms))
        kept = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        for m in messages:
            if m["MessageId"] not in kept:  # what the event source mapping deletes
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=m["ReceiptHandle"])
        self.settle_round(messages, kept, self.changed)
        return True


class SqsLoop(_Sqs):
    """``kindling worker --queue-url``: kindling.triggers.sqs.loop.SqsWorker as the CLI builds it, one
    ReceiveMessage and run_batch per round."""

    name = "sqs_loop"

    def __init__(self, table: str, bucket: str, signing: bool, monkeypatch, settings: dict | None = None):
        super().__init__(table, bucket, signing)
        import boto3
        from kindling.triggers.sqs.loop import SqsWorker

        deploy(monkeypatch, {"KINDLING_PAYLOAD_BUCKET": bucket, "KINDLING_MAX_ATTEMPTS": str(MAX_ATTEMPTS)}
               | (settings or {}))
        with codec_of(True):
            self.worker = SqsWorker(self.queue_url, table, tasks.registry, wait=0, session=boto3.Session(),
                                    signing=keyring() if signing else "", concurrency=16, threads=16, log=None,
                                    metrics=False)
        self.changed: dict[str, int] = {}
        self.deleted: set[str] = set()
        client = self.worker.sqs
        change, delete = client.change_message_visibility_batch, client.delete_message_batch
        receipts: dict[str, str] = {}
        self.receipts = receipts

        def change_batch(**params):
            response = change(**params)  # a refused batch records nothing
            accepted(self.changed, params, response)
            return response

        def delete_batch(**params):
            by_receipt = {r: i for i, r in receipts.items()}
            self.deleted.update(by_receipt[e["ReceiptHandle"]] for e in params["Entries"])
            return delete(**params)

        client.change_message_visibility_batch = change_batch
        client.delete_message_batch = delete_batch

    def _round(self) -> bool:
        messages = self.receive()
        if not messages:
            return False
        self.changed, self.deleted = {}, set()
        self.receipts.clear()
        self.receipts.update({m["MessageId"]: m["ReceiptHandle"] for m in messages})
        with codec_of(True):  # SqsWorker switches its process to orjson
            self.worker.run_batch(messages)
        kept = {m["MessageId"] for m in messages} - self.deleted
        self.settle_round(messages, kept, self.changed)
        return True

    def close(self) -> None:
        pool = self.worker.runner.thread_pool  # no default: a renamed attribute fails here
        if pool is not None:
            pool.close()


class Context:
    """A Lambda context with a generous time budget."""

    aws_request_id = "conformance"
    function_name = "conformance"

    def __init__(self, ms: int = 30_000):
        self.deadline = time.monotonic() + ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


# -- Valkey ------------------------------------------------------------------------------------


class _Stream(Path):
    crashes_to_exhaust = MAX_ATTEMPTS
    consumer = ""

    def __init__(self, url: str, table: str, bucket: str, signing: bool, results=None):
        super().__init__()
        from kindling.shared.valkey.scheduled import scheduled_key
        from kindling.stores.results import DynamoResultStore
        from kindling.valkey import StreamProducer, connect

        self.url, self.table, self.bucket, self.signing = url, table, bucket, signing
        self.stream = f"conf:{uuid.uuid4().hex[:8]}"
        self.group = "kindling"
        self.scheduled = scheduled_key(self.stream)
        self.valkey = connect(url)
        self.results = results if results is not None else DynamoResultStore(table)
        with codec_of(True):
            # A stream producer reads outcomes where the workers record them (docs/sending.md: its
            # reader is the deployment's, or reader=): its handles read this path's store.
            self._producer = StreamProducer(url, stream=self.stream, signing=keyring() if signing else "",
                                            reader=self.results)
        self._dynamo = _Sqs.__new__(_Sqs)  # the table readers only
        self._dynamo.table, self._dynamo.client = table, None

    def producer(self):
        return self._producer

    def enqueue_raw(self, body: bytes, signature: str | None = "sign") -> None:
        from kindling.shared.valkey.connection import FIELD, SIG_FIELD

        fields = {FIELD: body}
        if signature == "sign":
            from kindling.core import jobsig

            signature = keyring().sign(jobsig.stream_destination(self.stream), body) if self.signing else None
        if signature is not None:
            fields[SIG_FIELD] = signature
        self.valkey.xadd(self.stream, fields)

    def _ensure_group(self) -> None:
        with contextlib.suppress(Exception):
            self.valkey.xgroup_create(self.stream, self.group, id="0", mkstream=True)

    def crash(self, times: int) -> None:
        """A worker that read the entries and died, ``times`` deliveries in all."""
        self._ensure_group()
        self.valkey.xreadgroup(self.group, "died", {self.stream: ">"}, count=1000)
        ids = [p["message_id"] for p in self.pending()]
        for _ in range(times - 1):
            self.valkey.xclaim(self.stream, self.group, "died", 0, ids)
        self.valkey.xclaim(self.stream, self.group, "died", 0, ids, idle=STREAM_VISIBILITY_MS, justid=True)

    def pending(self) -> list[dict]:
        try:
            return self.valkey.xpending_range(self.stream, self.group, min="-", max="+", count=1000)
        except Exception:  # noqa: BLE001 - no group yet
            return []

    def settle(self) -> None:
        """Record the delay asked for each entry left (a pending entry's reclaim time, a
        scheduled one's due time: its score, now + the retry delay the runner asked for),
        then make it due now unless it waits for its not_before."""
        from kindling.shared.valkey.connection import FIELD

        now = time.time() * 1000
        for p in self.pending():
            entry = self.valkey.xrange(self.stream, p["message_id"], p["message_id"])
            body = entry[0][1].get(FIELD, b"") if entry else b""
            self.asked(job_of(body).get("id"), (STREAM_VISIBILITY_MS - p["time_since_delivered"]) / 1000)
            if not waiting(body):
                self.valkey.xclaim(self.stream, self.group, p["consumer"], 0, [p["message_id"]],
                                   idle=STREAM_VISIBILITY_MS, justid=True)
        for member, score in self.valkey.zrangebyscore(self.scheduled, "-inf", "+inf", withscores=True):
            body = member.rpartition(b"\n")[2] if isinstance(member, bytes) else member.rpartition("\n")[2]
            self.asked(job_of(body).get("id"), (score - now) / 1000)
            if not waiting(body):
                self.valkey.zadd(self.scheduled, {member: int(now)})

    def store(self):
        return self.results

    def record(self, key: str) -> dict | None:
        return self.results.record(key)

    def records(self) -> list[dict]:
        return _Sqs.records(self._dynamo)

    def dead_letters(self) -> list[str]:
        from kindling.core.valkey.keys import dead_key

        entries = self.valkey.xrange(dead_key(self.stream))
        return [(f.get(b"job_id") or b"").decode() for _, f in entries]


class StreamWorkerPath(_Stream):
    """``kindling worker --valkey``: kindling.triggers.valkey.worker.StreamWorker as the CLI builds it
    (DynamoDB results), one fetch and process per round."""

    name = "stream_worker"
    consumer = "worker-1"

    def __init__(self, url: str, table: str, bucket: str, signing: bool, monkeypatch, settings: dict | None = None,
                 results=None):
        super().__init__(url, table, bucket, signing, results)
        from kindling.valkey import StreamWorker

        deploy(monkeypatch, {"KINDLING_PAYLOAD_BUCKET": bucket, "KINDLING_MAX_ATTEMPTS": str(MAX_ATTEMPTS)}
               | (settings or {}))
        self.worker = StreamWorker(url, table, tasks.registry, store=results, stream=self.stream,
                                   consumer=self.consumer, batch=100, block_ms=1000, visibility_ms=STREAM_VISIBILITY_MS,
                                   concurrency=16, threads=16, log=False, metrics=False,
                                   verifier=verifier() if signing else None)

    def round(self) -> bool:
        with codec_of(True):  # the worker switches to orjson at its first idle round
            deliveries = self.worker.fetch(None)
            if not deliveries:
                return False
            self.worker.process(deliveries)
        self.settle()
        return True

    def close(self) -> None:
        pool = self.worker.runner.thread_pool  # no default: a renamed attribute fails here
        if pool is not None:
            pool.close()


class StreamValkeyStore(StreamWorkerPath):
    """``KINDLING_RESULTS=valkey kindling worker --valkey``: the stream worker recording to a
    kindling.valkey.ValkeyResultStore on the same server, as the Valkey users choose. Its
    key prefix is this path's own (the CLI's is ``kindling``), so one server serves every test."""

    name = "stream_valkey_store"

    def __init__(self, url: str, table: str, bucket: str, signing: bool, monkeypatch, settings: dict | None = None):
        from kindling.valkey import ValkeyResultStore

        monkeypatch.setenv("KINDLING_RESULTS", "valkey")
        self.prefix = f"conf-{uuid.uuid4().hex[:8]}"
        super().__init__(url, "", bucket, signing, monkeypatch, settings, ValkeyResultStore(url, prefix=self.prefix))

    def records(self) -> list[dict]:
        keys = self.valkey.execute_command("KEYS", f"{self.prefix}:result:*")  # this path's keys only
        return [self.results.record(k.decode().partition(":result:")[2]) for k in keys]


class StreamDrain(_Stream):
    """The Lambda drain, driven as deployed: the worker function (LambdaWorker) with the
    template's environment, the Valkey URL and the stream in ``KINDLING_VALKEY_*``, invoked
    with the DrainSchedule's event ``{"kindling": "drain", "stream": ...}`` (the event only
    selects; kindling.triggers.valkey.drain_event). Each round is one invocation. Two settings are the
    adapter's, neither changing an outcome: no horizon (``KINDLING_DRAIN_HORIZON_MS=0``), so a
    drain returns instead of waiting in-process for a retry it scheduled (the next kick would
    run it), and a 1 ms blocking read."""

    name = "stream_drain"
    consumer = "drain-1"

    def __init__(self, url: str, table: str, bucket: str, signing: bool, monkeypatch, settings: dict | None = None):
        super().__init__(url, table, bucket, signing)
        from kindling.triggers.sqs.handler import LambdaWorker

        deploy(monkeypatch, {"KINDLING_TABLE": table, "KINDLING_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
                             "KINDLING_MAX_RECEIVES": str(100), "KINDLING_RETRY_DELAY": str(RETRY_DELAY_S),
                             "KINDLING_PAYLOAD_BUCKET": bucket, "KINDLING_VALKEY_URL": url,
                             "KINDLING_VALKEY_STREAMS": self.stream, "KINDLING_VALKEY_GROUP": self.group,
                             "KINDLING_DRAIN_VISIBILITY_MS": str(STREAM_VISIBILITY_MS),
                             "KINDLING_DRAIN_HORIZON_MS": "0", "KINDLING_DRAIN_BLOCK_MS": "1",
                             "AWS_LAMBDA_LOG_STREAM_NAME": self.consumer} | (settings or {}))
        monkeypatch.delenv("KINDLING_VALKEY_URL_SECRET", raising=False)
        options = {"verifier": verifier()} if signing else {}
        self.worker = LambdaWorker(tasks.registry, log=None, metrics=False, **options)

    def round(self) -> bool:
        event = {"kindling": "drain", "stream": self.stream}  # the DrainSchedule's event
        with codec_of(False):  # a Lambda function keeps the standard codec
            summary = self.worker(event, Context(self.budget_ms))
        assert summary.get("kindling") == "drained", summary
        if not summary["batches"]:
            return False
        self.settle()
        return True


# -- eager --------------------------------------------------------------------------------------


class Eager(Path):
    """kindling.tools.testing.eager: the eager producer, installed as dispatch's producer, runs
    every job inline when it is sent (every attempt, whatever it enqueues), outcomes in a
    memory store. It runs in the test's process, under the test's codec."""

    name = "eager"

    def __init__(self, monkeypatch=None, settings: dict | None = None) -> None:
        super().__init__()
        from kindling.tools.testing import eager

        if monkeypatch is not None:
            deploy(monkeypatch, settings or {})  # its runner reads the environment as a worker's does
        self._context = eager()
        self.session = self._context.__enter__()

    def producer(self):
        return self.session

    def send(self, calls: list) -> list[str]:
        # A call by name runs with the workers' registry (the session's own would be the
        # default registry, which the conformance tasks are not in).
        return [(self.session.run(c, tasks.registry) if isinstance(c.task, str) else self.session.send(c)).id
                for c in calls]

    def round(self) -> bool:
        return False

    def store(self):
        return self.session.store

    def record(self, key: str) -> dict | None:
        return self.session.records.get(key)

    def records(self) -> list[dict]:
        return list(self.session.records.values())

    def close(self) -> None:
        self._context.__exit__(None, None, None)
