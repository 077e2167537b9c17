"""The worker outside Lambda: long-poll SQS and run batches with the same runner.

This is how kindling runs on a container, a VM or a laptop (``kindling worker``)::

    from kindling.loop import SqsWorker
    SqsWorker(queue_url, table).run()

Each round receives up to 10 messages (waiting up to 20 s), runs them, and settles them
exactly as the Lambda handler does (:mod:`kindling.sqs` maps both): settled ones are
deleted in one DeleteMessageBatch, dead ones moved to the queue's dead-letter queue and
deleted, handed-back ones made visible again when the runner says (``retry_in``), the
rest left to the visibility timeout. SIGTERM and SIGINT finish the batch in hand, then stop.
"""

from __future__ import annotations

import signal
import time

from kindling import codec, sqs
from kindling.envelope import SIGNATURE_ATTRIBUTE, encode_job
from kindling.registry import default_registry
from kindling.results import DynamoResultStore
from kindling.runner import Runner
from kindling.status import SETTLED


class SqsWorker:
    """A long-polling SQS consumer feeding :class:`kindling.runner.Runner`.

    Args:
        queue_url: the jobs queue.
        table: the results table.
        registry: the tasks (default: everything registered with ``@task``).
        wait: long-poll seconds per ReceiveMessage (at most 20).
        session: a ``boto3.Session`` (default: a new one).
        signing: signed jobs: the signing secret's ARN (default ``KINDLING_SIGNING_SECRET``,
            read with ``session``) or a :class:`kindling.signed.Keyring`; empty: off.
        **runner_options: passed to the runner (``concurrency``, ``default_timeout``, ...).
    """

    def __init__(self, queue_url: str, table: str, registry=None, *, wait: int = 20, session=None,
                 store=None, signing=None, **runner_options):
        import os

        import boto3

        from kindling.payloads import SQS_DEFAULT_MAX_BYTES

        codec.use_orjson()  # a long-lived process: orjson's import pays for itself
        self.queue_url = queue_url
        self.wait = wait
        session = session or boto3.Session()
        self.sqs = session.client("sqs")
        attrs = self.sqs.get_queue_attributes(QueueUrl=queue_url,
                                              AttributeNames=["QueueArn", "RedrivePolicy", "MaximumMessageSize"])
        self.queue_arn = attrs["Attributes"]["QueueArn"]
        size = str(attrs["Attributes"].get("MaximumMessageSize", ""))
        self.max_message_bytes = int(size) if size.isdigit() else SQS_DEFAULT_MAX_BYTES
        policy = attrs["Attributes"].get("RedrivePolicy")
        redrive = codec.loads(policy) if policy else {}
        receives = int(redrive["maxReceiveCount"]) if redrive else None
        self.dlq_url = self._url_of(redrive["deadLetterTargetArn"]) if redrive else None
        options = {"max_attempts": 3, "attempts_cap": receives - 1 if receives else None,
                   "max_deliveries": receives, "worker": {"function": "kindling-worker"}}
        if signing is None:
            signing = os.environ.get("KINDLING_SIGNING_SECRET", "")
        if signing:
            from kindling.signed import Keyring, Verifier, boto3_fetch

            keyring = Keyring(signing, fetch=boto3_fetch(session)) if isinstance(signing, str) else signing
            options["verifier"] = Verifier(keyring)
        options.update(runner_options)
        self.runner = Runner(registry or default_registry, store or DynamoResultStore(table), **options)
        self.counts: dict[str, int] = {}
        self.busy_s = 0.0  # time spent on rounds that returned messages
        self._stopping = False

    def _url_of(self, arn: str) -> str:
        _, _, _, _, account, name = arn.split(":", 5)
        return self.sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"]

    def stop(self, *_args) -> None:
        self._stopping = True

    def run(self, *, burst: bool = False, idle_timeout: float = 60.0) -> dict[str, int]:
        """Work until stopped; with ``burst``, until the queue is drained (nothing visible,
        in flight or delayed), or nothing has changed for ``idle_timeout`` seconds."""
        previous = [signal.signal(s, self.stop) for s in (signal.SIGTERM, signal.SIGINT)]
        try:
            last_work = time.monotonic()
            while not self._stopping:
                wait = 1 if burst else self.wait
                t0 = time.perf_counter()
                messages = self.sqs.receive_message(
                    QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=wait,
                    # A FIFO message's group: the runner keeps each group in order, and a dead
                    # job's message needs it to be sent to the FIFO dead-letter queue. The trace
                    # header: the record keeps the producer's trace, as in Lambda.
                    MessageSystemAttributeNames=["ApproximateReceiveCount", "MessageGroupId", "AWSTraceHeader"],
                    MessageAttributeNames=[SIGNATURE_ATTRIBUTE],
                ).get("Messages", [])
                if messages:
                    self.run_batch(messages)
                    self.busy_s += time.perf_counter() - t0
                    last_work = time.monotonic()
                elif burst and (self._drained() or time.monotonic() - last_work > idle_timeout):
                    break
        finally:
            for s, handler in zip((signal.SIGTERM, signal.SIGINT), previous, strict=True):
                signal.signal(s, handler)
        return self.counts

    def run_batch(self, messages: list[dict]) -> None:
        received = time.monotonic()  # just received: SQS counts their 12 hours of hiding from then
        # The same record shape a Lambda SQS event carries, so one mapping serves both.
        event = {"Records": [
            {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
             "attributes": m.get("Attributes", {}), "eventSource": "aws:sqs", "eventSourceARN": self.queue_arn,
             "messageAttributes": {name: {"stringValue": a.get("StringValue"), "dataType": a.get("DataType")}
                                   for name, a in m.get("MessageAttributes", {}).items()}}
            for m in messages
        ]}
        outcomes = self.runner.run(sqs.deliveries(event, signed=self.runner.verifier is not None), send=self.send)
        receipts = {m["MessageId"]: m["ReceiptHandle"] for m in messages}
        moved = self._move_dead(event, outcomes)
        done = [o.ref for o in outcomes if o.status in SETTLED or o.ref in moved]
        if done:
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": receipts[ref]} for i, ref in enumerate(done)],
            )
        for entries in sqs.visibility_changes(event, outcomes, moved, time.monotonic() - received).values():
            self.sqs.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=entries)
        for o in outcomes:
            self.counts[o.status] = self.counts.get(o.status, 0) + 1

    def send(self, jobs: list) -> None:
        """Enqueue follow-ups (a chain's next step, a chord's callback) on this queue; one over
        the queue's MaximumMessageSize has its arguments put in S3, as a producer's would."""
        from kindling import payloads

        runner = self.runner
        overhead = 0 if runner.verifier is None else payloads.SIGNATURE_BYTES
        fifo = self.queue_url.endswith(".fifo")
        for chunk in payloads.sqs_batches(jobs, self.max_message_bytes, overhead, runner.payload_bucket,
                                          runner.payload_io().client):
            entries = [self._signed({"Id": str(n), "MessageBody": encode_job(job).decode(),
                                     **(sqs.fifo_follow_up(job) if fifo else {})})
                       for n, job in enumerate(chunk)]
            failed = self.sqs.send_message_batch(QueueUrl=self.queue_url, Entries=entries).get("Failed")
            if failed:
                raise RuntimeError(f"SQS refused {len(failed)} job(s): {failed[0].get('Message', '')}"[:500])

    def _signed(self, entry: dict) -> dict:
        """The entry with its signature, bound to this queue, when signing is on."""
        verifier = self.runner.verifier
        if verifier is not None:
            from kindling import jobsig

            value = verifier.keyring.sign(jobsig.sqs_destination(self.queue_arn), entry["MessageBody"])
            entry["MessageAttributes"] = {jobsig.ATTRIBUTE: {"DataType": "String", "StringValue": value}}
        return entry

    def _move_dead(self, event: dict, outcomes) -> set[str]:
        dead = sqs.dead_letters(event, outcomes)
        if not dead or not self.dlq_url:
            return set()
        try:
            response = self.sqs.send_message_batch(QueueUrl=self.dlq_url, Entries=dead)
        except Exception as exc:  # noqa: BLE001 - as the Lambda handler: the rest of the batch is settled
            # The dead messages stay on the queue (their records say dead): they come back, are
            # moved on a later delivery or by the queue's own redrive. Stopping here would leave
            # the whole batch unsettled and the worker down.
            if self.runner.log:
                self.runner.log({"kindling": "dlq_send_failed", "error": f"{type(exc).__name__}: {exc}"[:500],
                                 "messages": len(dead)})
            return set()
        return {entry["Id"] for entry in response.get("Successful", [])}

    def _drained(self) -> bool:
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                 "ApproximateNumberOfMessagesDelayed"]
        attrs = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=names)["Attributes"]
        return all(int(attrs.get(n, 0)) == 0 for n in names)
