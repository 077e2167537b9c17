"""The worker outside Lambda: long-poll SQS and run batches with the same runner.

This is how kindling runs on a container, a VM or a laptop (``kindling worker``)::

    from kindling.triggers.sqs.loop import SqsWorker
    SqsWorker(queue_url, table).run()

Each round receives up to 10 messages (waiting up to 20 s), runs them, and settles them
exactly as the Lambda handler does (:func:`kindling.triggers.sqs.events.settlement` decides for both, and
:class:`kindling.triggers.sqs.port.SqsPort` carries it out for both): settled ones are deleted in
DeleteMessageBatch calls, dead ones moved to the queue's dead-letter queue and
deleted, handed-back ones made visible again when the runner says (``retry_in``), the
rest left to the visibility timeout. SIGTERM and SIGINT finish the batch in hand, then stop.
"""

from __future__ import annotations

import signal
import time

from kindling.core import codec
from kindling.core.registry import default_registry
from kindling.engine.runner import Runner
from kindling.stores.results import DynamoResultStore
from kindling.triggers.sqs import events as sqs
from kindling.triggers.sqs.port import SqsPort


class SqsWorker:
    """A long-polling SQS consumer feeding :class:`kindling.engine.runner.Runner`.

    Args:
        queue_url: the jobs queue.
        table: the results table.
        registry: the tasks (default: everything registered with ``@task``).
        wait: long-poll seconds per ReceiveMessage (at most 20).
        session: a ``boto3.Session`` (default: a new one).
        signing: signed jobs: the signing secret's ARN (default ``KINDLING_SIGNING_SECRET``,
            read with ``session``) or a :class:`kindling.shared.signed.Keyring`; empty: off.
        **runner_options: passed to the runner (``concurrency``, ``default_timeout``, ...).
    """

    def __init__(self, queue_url: str, table: str, registry=None, *, wait: int = 20, session=None,
                 store=None, signing=None, **runner_options):
        import os

        import boto3

        codec.use_orjson()  # a long-lived process: orjson's import pays for itself
        self.queue_url = queue_url
        self.wait = wait
        session = session or boto3.Session()
        self.sqs = session.client("sqs")
        attrs = self.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=[
            "QueueArn", "RedrivePolicy", "MessageRetentionPeriod"])
        self.queue_arn = attrs["Attributes"]["QueueArn"]
        policy = attrs["Attributes"].get("RedrivePolicy")
        redrive = codec.loads(policy) if policy else {}
        receives = int(redrive["maxReceiveCount"]) if redrive else None
        self.dlq_url = self._url_of(redrive["deadLetterTargetArn"]) if redrive else None
        retention = attrs["Attributes"].get("MessageRetentionPeriod")
        # A job due later than the queue keeps its message is refused (kindling.core.policy.due_refusal).
        options = {"attempts_cap": receives - 1 if receives else None, "max_deliveries": receives,
                   "retention_s": int(retention) if retention else None, "worker": {"function": "kindling-worker"}}
        if signing is None:
            signing = os.environ.get("KINDLING_SIGNING_SECRET", "")
        if signing:
            from kindling.shared.signed import Keyring, Verifier, boto3_fetch

            keyring = Keyring(signing, fetch=boto3_fetch(session)) if isinstance(signing, str) else signing
            options["verifier"] = Verifier(keyring)
        options.update(runner_options)
        self.runner = Runner(registry or default_registry, store or DynamoResultStore(table), **options)
        # Settlement and follow-ups go through the same port as the Lambda handler's, on this
        # worker's boto3 client (looked up at each call, so a swapped client is used); a
        # follow-up goes to this queue, the one queue this worker serves.
        self.port = SqsPort(self.runner, lambda _deadline: self.sqs, route=lambda _job: self.queue_url,
                            queue_url=self._url_of, deletes=True, source=(queue_url, self.queue_arn),
                            dead_letters=lambda _outcomes: {"dlq_url": self.dlq_url})
        self.counts: dict[str, int] = {}
        self.busy_s = 0.0  # time spent on rounds that returned messages
        self._stopping = False

    def _url_of(self, arn: str) -> str:
        if arn == self.queue_arn:
            return self.queue_url
        return sqs.queue_url(self.sqs.meta.endpoint_url, arn)

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
                deliveries = self.port.fetch(wait * 1000)
                if deliveries:
                    self._run(deliveries)
                    self.busy_s += time.perf_counter() - t0
                    last_work = time.monotonic()
                elif burst and (self._drained() or time.monotonic() - last_work > idle_timeout):
                    break
        finally:
            for s, handler in zip((signal.SIGTERM, signal.SIGINT), previous, strict=True):
                signal.signal(s, handler)
        return self.counts

    def run_batch(self, messages: list[dict]) -> None:
        """Run and settle messages received from the queue (ReceiveMessage's shape)."""
        self._run(self.port.received(messages))

    def _run(self, batch: list) -> None:
        outcomes = self.runner.run(batch, send=self.send)
        self.port.settle(outcomes, batch)
        for o in outcomes:
            self.counts[o.status] = self.counts.get(o.status, 0) + 1

    def send(self, jobs: list) -> None:
        """Enqueue follow-ups (a chain's next step, a chord's callback) on this queue; one over
        the queue's MaximumMessageSize has its arguments put in S3, as a producer's would."""
        self.port.send(jobs)

    def _drained(self) -> bool:
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                 "ApproximateNumberOfMessagesDelayed"]
        attrs = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=names)["Attributes"]
        return all(int(attrs.get(n, 0)) == 0 for n in names)
