"""The SQS trigger's I/O, one port for the Lambda handler and the local loop.

:class:`SqsPort` is the only place the worker calls SQS about its own messages and jobs. It
keeps the trigger's contract (:class:`kindling.core.port.TriggerPort`), as the stream's
consumer does:

- :meth:`SqsPort.fetch` receives a batch from the queue the port serves (the local loop's;
  Lambda's event source mapping receives the handler's, which come in its event);
- :meth:`SqsPort.settle` settles a batch: what becomes of each message is decided without
  I/O by :func:`kindling.triggers.sqs.events.settlement`, and :meth:`SqsPort.apply` carries
  that :class:`~kindling.triggers.sqs.events.Settlement` out (the handler calls it
  directly, after seeing there is anything to do): dead jobs' messages to their dead-letter
  queues, the done messages deleted (a trigger that receives its own messages: the local
  loop; Lambda's event source mapping deletes them itself), the reported ones brought back
  when they are due;
- :meth:`SqsPort.send` enqueues the worker's own jobs (a chain's next step, a chord's
  callback) on their queues: fitted to each queue's MaximumMessageSize (read once per queue,
  :func:`kindling.shared.sqs_send.queue_max_bytes`; arguments over it go to S3 as a producer's
  would), signed when signing is on, one FIFO group each.

The two triggers differ only in the client they hand it: the handler kindling's own SQS
client (:class:`AwsSqs`, no SDK, every call held to the invocation's deadline), the loop its
boto3 client. Not on the cold path: a batch whose jobs all succeeded, with no follow-up,
never loads this module.
"""

from __future__ import annotations

import time

from kindling.core.errors import KindlingError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from kindling.core.batch import Delivery, Outcome
    from kindling.core.envelope import Job
    from kindling.engine.runner import Runner
    from kindling.triggers.sqs.events import Settlement

MAX_BATCH = 10  # SQS's entries per *Batch call
MAX_WAIT_S = 20  # SQS's longest long poll


class AwsSqs:
    """kindling's own SQS client (:func:`kindling.drivers.aws.sqs`) under boto3's method names, every
    call held to one deadline: what the Lambda handler settles and sends with."""

    def __init__(self, deadline: float | None = None):
        from kindling.drivers import aws

        self._client = aws.sqs()
        self._deadline = deadline

    @property
    def endpoint(self) -> str:
        return self._client.endpoint

    def _call(self, operation: str, params: dict) -> dict:
        return self._client.call(operation, params, deadline=self._deadline)

    def get_queue_attributes(self, **params) -> dict:
        return self._call("GetQueueAttributes", params)

    def send_message_batch(self, **params) -> dict:
        return self._call("SendMessageBatch", params)

    def change_message_visibility_batch(self, **params) -> dict:
        return self._call("ChangeMessageVisibilityBatch", params)

    def delete_message_batch(self, **params) -> dict:
        return self._call("DeleteMessageBatch", params)


class SqsPort:
    """Settles a batch's messages and sends the worker's own jobs, for one trigger.

    Args:
        runner: the trigger's runner: its verifier signs sends, its log hears what SQS
            refused, its payload bucket takes arguments too large for a queue.
        client: the SQS client for a call bounded by a deadline (``None``: unbounded),
            with boto3's method names.
        route: the URL of the queue a follow-up job goes to.
        queue_url: a source queue's URL from its ARN.
        errors: what a failed call raises; a dead-letter move or visibility change that
            fails is logged and the rest of the batch settled all the same.
        deletes: delete the done messages (a trigger that receives them itself).
        source: the URL and ARN of the queue :meth:`fetch` receives from (a trigger that
            receives its messages itself); ``None`` in Lambda, whose event carries them.
        dead_letters: where a batch's dead jobs go, from its outcomes: keyword arguments of
            :func:`kindling.triggers.sqs.events.settlement` (``dlq_urls``, ``dlq_url``).
    """

    def __init__(self, runner: Runner, client: Callable[[float | None], object], *, route: Callable[[Job], str],
                 queue_url: Callable[[str], str], errors: tuple[type[BaseException], ...] = (Exception,),
                 deletes: bool = False, source: tuple[str, str] | None = None,
                 dead_letters: Callable[[Sequence[Outcome]], dict] | None = None):
        self.runner = runner
        self.client = client
        self.route = route
        self.queue_url = queue_url
        self.errors = errors
        self.deletes = deletes
        self.source = source
        self.dead_letters = dead_letters
        self._max_bytes: dict[str, int] = {}
        self._received_at: float | None = None  # when the last batch was received (monotonic)

    def fetch(self, wait_ms: int | None) -> list[Delivery]:
        """Receive up to 10 messages from the queue the port serves, long-polling up to
        ``wait_ms`` (SQS waits whole seconds, at most 20). Only a port with a ``source`` has
        one: in Lambda the event source mapping receives them (:meth:`LambdaWorker
        <kindling.triggers.sqs.handler.LambdaWorker>` reads the event with :func:`events.deliveries
        <kindling.triggers.sqs.events.deliveries>`)."""
        if self.source is None:
            raise KindlingError("SqsPort: no queue to receive from (in Lambda, the event carries the messages)")
        from kindling.core.envelope import SIGNATURE_ATTRIBUTE

        wait = min(MAX_WAIT_S, -(-wait_ms // 1000)) if wait_ms else 0
        messages = self.client(None).receive_message(
            QueueUrl=self.source[0], MaxNumberOfMessages=MAX_BATCH, WaitTimeSeconds=wait,
            # A FIFO message's group: the runner keeps each group in order, and a dead job's
            # message needs it to be sent to the FIFO dead-letter queue. The trace header: the
            # record keeps the producer's trace, as in Lambda.
            MessageSystemAttributeNames=["ApproximateReceiveCount", "MessageGroupId", "AWSTraceHeader"],
            MessageAttributeNames=[SIGNATURE_ATTRIBUTE],
        ).get("Messages", [])
        return self.received(messages)

    def received(self, messages: list[dict]) -> list[Delivery]:
        """The deliveries of messages just received from the port's ``source`` (ReceiveMessage's
        shape), read as the Lambda event's records are; SQS counts their hiding from now."""
        from kindling.triggers.sqs import events

        self._received_at = time.monotonic()
        arn = self.source[1] if self.source else ""
        event = {"Records": [
            {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
             "attributes": m.get("Attributes", {}), "eventSource": "aws:sqs", "eventSourceARN": arn,
             "messageAttributes": {name: {"stringValue": a.get("StringValue"), "dataType": a.get("DataType")}
                                   for name, a in m.get("MessageAttributes", {}).items()}}
            for m in messages
        ]}
        return events.deliveries(event, signed=self.runner.verifier is not None)

    def settle(self, outcomes: Sequence[Outcome], deliveries: Sequence[Delivery], *, deadline: float | None = None,
               in_flight_s: float | None = None) -> dict:
        """Settle a batch: what becomes of each message is decided by
        :func:`kindling.triggers.sqs.events.settlement` and carried out by :meth:`apply`; the
        partial batch response. ``in_flight_s``: how long the messages have been in flight
        (default: since :meth:`received`)."""
        from kindling.triggers.sqs import events

        if in_flight_s is None:
            in_flight_s = 0.0 if self._received_at is None else time.monotonic() - self._received_at
        dead = self.dead_letters(outcomes) if self.dead_letters is not None else {}
        return self.apply(events.settlement(deliveries, outcomes, **dead, in_flight_s=in_flight_s), deadline)

    def _log(self, entry: dict) -> None:
        if self.runner.log:
            self.runner.log(entry)

    def apply(self, settlement: Settlement, deadline: float | None = None) -> dict:
        """Carry out ``settlement``; return the partial batch response, with the messages whose
        move to a dead-letter queue did not go through reported too."""
        client = self.client(deadline)
        for ref, arn in settlement.unrouted:
            self._log({"kindling": "dlq_unknown", "queue": arn, "message": ref})
        if settlement.dlq_moves or settlement.resends:
            moves = dict(settlement.dlq_moves)
            for arn, entries in settlement.resends.items():
                url = self.queue_url(arn)
                moves[url] = [*moves.get(url, []), *entries]
            moved = self._move(client, moves)
            settlement = settlement.unmoved([ref for ref in settlement.moving if ref not in moved])
        if self.deletes:
            for arn, entries in settlement.deletes.items():
                url = self.queue_url(arn)
                for start in range(0, len(entries), MAX_BATCH):
                    client.delete_message_batch(QueueUrl=url, Entries=entries[start : start + MAX_BATCH])
        # Best effort: a message whose change SQS refuses still returns after the queue's
        # visibility timeout, so nothing is lost either way.
        for arn, entries in settlement.visibility.items():
            url = self.queue_url(arn)
            for start in range(0, len(entries), MAX_BATCH):
                try:
                    client.change_message_visibility_batch(QueueUrl=url, Entries=entries[start : start + MAX_BATCH])
                except self.errors as exc:
                    self._log({"kindling": "visibility_not_changed", "queue": arn, "error": str(exc)[:500]})
        return settlement.response

    def _move(self, client, moves: dict[str, list[dict]]) -> set[str]:
        """Send the dead jobs' messages to their dead-letter queues; the message ids sent.

        One SQS refuses, or a call that fails, is left reported: it comes back, is seen to be
        dead already, and is moved on its next delivery (or by its own queue's redrive policy)."""
        moved: set[str] = set()
        for url, entries in moves.items():
            for start in range(0, len(entries), MAX_BATCH):
                chunk = entries[start : start + MAX_BATCH]
                try:
                    response = client.send_message_batch(QueueUrl=url, Entries=chunk)
                except self.errors as exc:
                    self._log({"kindling": "dlq_send_failed", "error": f"{type(exc).__name__}: {exc}"[:500],
                               "messages": len(chunk)})
                    continue
                moved.update(entry["Id"] for entry in response.get("Successful", []))
        return moved

    def send(self, jobs: list[Job], deadline: float | None = None) -> None:
        """Enqueue follow-up jobs (a chain's next step, a chord's callback), each on the queue
        :attr:`route` names; raises unless SQS took every one."""
        from kindling.shared import payloads  # batches with chains or chords only

        by_url: dict[str, list[Job]] = {}
        for job in jobs:
            by_url.setdefault(self.route(job), []).append(job)
        runner = self.runner
        client = self.client(deadline)
        # The signature attribute counts toward the queue's limit too.
        overhead = 0 if runner.verifier is None else payloads.SIGNATURE_BYTES
        for url, queued in by_url.items():
            limit = self.max_bytes(url, client)
            sign = self.signer(url)
            for chunk in payloads.sqs_batches(queued, limit, overhead, runner.payload_bucket,
                                              runner.payload_io().client, deadline=deadline):
                _, refused = self.send_jobs(client, url, chunk, sign)
                if refused:
                    raise KindlingError(f"SQS refused {len(refused)} job(s): {next(iter(refused.values()))}"[:500])

    def max_bytes(self, url: str, client) -> int:
        """A queue's MaximumMessageSize, read once per port at its first send."""
        limit = self._max_bytes.get(url)
        if limit is None:
            from kindling.shared.sqs_send import queue_max_bytes

            limit = self._max_bytes[url] = queue_max_bytes(client, url)
        return limit

    def signer(self, queue_url: str) -> Callable[[dict], dict]:
        """What the worker's own sends (scheduled fires, chain steps, chord callbacks) to
        ``queue_url`` go through: signed, for that queue, when signing is on."""
        verifier = self.runner.verifier
        if verifier is None:
            return lambda entry: entry
        from kindling.core import jobsig

        destination = jobsig.sqs_destination(queue_url)

        def sign(entry: dict) -> dict:
            value = verifier.keyring.sign(destination, entry["MessageBody"])
            entry["MessageAttributes"] = {jobsig.ATTRIBUTE: {"DataType": "String", "StringValue": value}}
            return entry

        return sign

    @staticmethod
    def send_jobs(client, queue_url: str, jobs: list[Job], sign: Callable[[dict], dict]
                  ) -> tuple[list[str], dict[str, str]]:
        """One ``SendMessageBatch`` of up to 10 jobs: the ids sent, and ``{id: reason}`` refused.

        On a FIFO queue each job is its own message group, deduplicated by its id
        (:func:`kindling.triggers.sqs.events.fifo_follow_up`)."""
        from kindling.core.envelope import encode_job
        from kindling.triggers.sqs.events import fifo_follow_up

        fifo = queue_url.endswith(".fifo")
        entries = []
        for n, job in enumerate(jobs):
            entry = {"Id": str(n), "MessageBody": encode_job(job).decode()}
            if fifo:
                entry.update(fifo_follow_up(job))
            entries.append(sign(entry))
        response = client.send_message_batch(QueueUrl=queue_url, Entries=entries)
        sent = [jobs[int(e["Id"])].id for e in response.get("Successful", [])]
        refused = {jobs[int(e["Id"])].id: f"{e.get('Code')}: {e.get('Message', '')}"
                   for e in response.get("Failed", [])}
        return sent, refused
