"""The worker outside Lambda: long-poll SQS and run batches with the same runner.

This is how kindling runs on a container, a VM or a laptop (``kindling worker``)::

    from kindling.loop import SqsWorker
    SqsWorker(queue_url, table).run()

Each round receives up to 10 messages (waiting up to 20 s), runs them, deletes the settled
ones in one DeleteMessageBatch, and leaves failed ones to the queue's visibility timeout,
so retries and the dead-letter queue work exactly as under Lambda. SIGTERM and SIGINT
finish the batch in hand, then stop.
"""

from __future__ import annotations

import signal
import time

from kindling import codec
from kindling.registry import default_registry
from kindling.results import DynamoResultStore
from kindling.runner import DEFERRED, SETTLED, Delivery, Runner


class SqsWorker:
    """A long-polling SQS consumer feeding :class:`kindling.runner.Runner`.

    Args:
        queue_url: the jobs queue.
        table: the results table.
        registry: the tasks (default: everything registered with ``@task``).
        wait: long-poll seconds per ReceiveMessage (at most 20).
        session: a ``boto3.Session`` (default: a new one).
        **runner_options: passed to the runner (``concurrency``, ``default_timeout``, ...).
    """

    def __init__(self, queue_url: str, table: str, registry=None, *, wait: int = 20, session=None,
                 store=None, **runner_options):
        import boto3

        codec.use_orjson()  # a long-lived process: orjson's import pays for itself
        self.queue_url = queue_url
        self.wait = wait
        self.sqs = (session or boto3.Session()).client("sqs")
        cap = self._max_receive_count()
        options = {"max_attempts": cap or 3, "attempts_cap": cap, "worker": {"function": "kindling-worker"}}
        options.update(runner_options)
        self.runner = Runner(registry or default_registry, store or DynamoResultStore(table), **options)
        self.counts: dict[str, int] = {}
        self.busy_s = 0.0  # time spent on rounds that returned messages
        self._stopping = False

    def _max_receive_count(self) -> int | None:
        attrs = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["RedrivePolicy"])
        policy = attrs.get("Attributes", {}).get("RedrivePolicy")
        return int(codec.loads(policy)["maxReceiveCount"]) if policy else None

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
                    MessageSystemAttributeNames=["ApproximateReceiveCount"],
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
        deliveries = [
            Delivery(m["MessageId"], m["Body"], int(m.get("Attributes", {}).get("ApproximateReceiveCount", 1)))
            for m in messages
        ]
        outcomes = self.runner.run(deliveries)
        receipts = {m["MessageId"]: m["ReceiptHandle"] for m in messages}
        done = [o for o in outcomes if o.status in SETTLED]
        if done:
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": receipts[o.ref]} for i, o in enumerate(done)],
            )
        deferred = [o for o in outcomes if o.status == DEFERRED]
        if deferred:  # not started: make them visible again soon rather than after the timeout
            self.sqs.change_message_visibility_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": receipts[o.ref], "VisibilityTimeout": 1}
                         for i, o in enumerate(deferred)],
            )
        for o in outcomes:
            self.counts[o.status] = self.counts.get(o.status, 0) + 1

    def _drained(self) -> bool:
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                 "ApproximateNumberOfMessagesDelayed"]
        attrs = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=names)["Attributes"]
        return all(int(attrs.get(n, 0)) == 0 for n in names)
