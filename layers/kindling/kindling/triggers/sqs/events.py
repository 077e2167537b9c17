"""The SQS trigger: a Lambda SQS event in, a partial batch response out.

Lambda's event source mapping delivers up to ``BatchSize`` messages per invocation. With
``FunctionResponseTypes: [ReportBatchItemFailures]`` the function answers with the ids of
the messages to redeliver; every other message is deleted from the queue::

    {"batchItemFailures": [{"itemIdentifier": "<messageId>"}, ...]}

The event is read once, by :func:`deliveries`: each :class:`Delivery` carries what its
settlement needs (receipt handle, source queue, FIFO group, signature). :func:`settlement`
then decides, from the outcomes alone and without I/O, what becomes of every message;
:class:`kindling.triggers.sqs.port.SqsPort` carries that out, for the Lambda handler and the local
loop alike.

Failed and deferred jobs are reported. A dead job's message is sent to the dead-letter
queue by the worker and then acknowledged; if that send fails it is reported too, and
moved on a later delivery or by the queue's redrive policy.

Reported messages would come back after the queue's visibility timeout (six times the
function timeout). The settlement sets each one's return from the runner's
``Outcome.retry_in``: a failed job after its retry backoff, a job not due yet when it is
due, a batch handed back for a store outage after a growing backoff, one cut off by the
invocation's end (or a dead one not moved) at once.
"""

from __future__ import annotations

from kindling.core.batch import Delivery
from kindling.core.envelope import JOB_ID_ATTRIBUTE, REASON_ATTRIBUTE, SIGNATURE_ATTRIBUTE
from kindling.core.policy import MAX_DELAY_S
from kindling.core.status import DEAD, HANDED_BACK

MAX_SEND_DELAY_S = 900
"""The longest delay SQS gives a message as it is sent (DelaySeconds)."""

MAX_VISIBILITY_S = MAX_DELAY_S
"""The longest SQS hides a delivery, counted from its receive: it refuses a change past what
is left (:func:`settlement` keeps within it)."""

LAMBDA_HOLD_S = 311
"""How long before the handler is called Lambda may have received its messages: the poller's
batching window (``MaximumBatchingWindowInSeconds``, at most 300 s), a cold start's init
(at most 10 s) and a second for the poll. Held longer (invocations throttled), a change past
what is left is refused and the message is back after the queue's visibility timeout, as
it was before."""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping

    from kindling.core.batch import Outcome
    from kindling.core.envelope import Job


def is_sqs_event(event: object) -> bool:
    records = event.get("Records") if isinstance(event, dict) else None
    return bool(records) and records[0].get("eventSource") == "aws:sqs"


def deliveries(event: dict, *, signed: bool = False) -> list[Delivery]:
    """One :class:`Delivery` per SQS record, carrying all its settlement needs: attempts from
    ``ApproximateReceiveCount``, the producer's trace from ``AWSTraceHeader``, a FIFO queue's
    ``MessageGroupId``, the receipt handle, the source queue's ARN and the signature
    attribute; with ``signed``, the queue as a signature binds it (:mod:`kindling.core.jobsig`)."""
    out = []
    for record in event["Records"]:
        attrs = record.get("attributes") or {}
        try:
            attempts = int(attrs.get("ApproximateReceiveCount", 1))
        except (TypeError, ValueError):
            attempts = 1
        attribute = (record.get("messageAttributes") or {}).get(SIGNATURE_ATTRIBUTE) or {}
        d = Delivery(record["messageId"], record.get("body") or "", attempts, attrs.get("AWSTraceHeader"),
                     attrs.get("MessageGroupId"),
                     signature=attribute.get("stringValue") if isinstance(attribute, dict) else None,
                     receipt=record.get("receiptHandle"), queue_arn=record.get("eventSourceARN", ""))
        if signed:
            _source(d)
        out.append(d)
    return out


def _source(d: Delivery) -> None:
    from kindling.core import jobsig  # signing on only

    try:
        d.source = jobsig.sqs_destination(d.queue_arn or "")
    except ValueError:
        d.source = None


class Settlement:
    """What becomes of each message of one batch, decided by :func:`settlement`.

    Attributes:
        failures: the message ids SQS should deliver again (the partial batch response).
        dlq_moves: SendMessageBatch entries (``Id`` = message id) by dead-letter queue URL:
            the messages of dead jobs, each with why it died and its job id.
        resends: SendMessageBatch entries (``Id`` = message id) by source queue ARN: jobs
            handed back unrecorded on their last delivery (``Outcome.resend``), sent to their
            queue again as new messages (a delivery count that starts over), then deleted.
        visibility: ChangeMessageVisibilityBatch entries by source queue ARN: when each
            reported message comes back.
        deletes: DeleteMessageBatch entries by source queue ARN: the messages that are done,
            the moved ones included. Lambda's event source mapping deletes them itself; a
            trigger that receives its own messages (the local loop) deletes these.
        unrouted: ``(message id, queue ARN)`` of dead jobs whose queue has no dead-letter
            queue configured: reported, for their queue's redrive policy.
    """

    __slots__ = ("failures", "dlq_moves", "resends", "visibility", "deletes", "unrouted", "_moving")

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.dlq_moves: dict[str, list[dict]] = {}
        self.resends: dict[str, list[dict]] = {}
        self.visibility: dict[str, list[dict]] = {}
        self.deletes: dict[str, list[dict]] = {}
        self.unrouted: list[tuple[str, str]] = []
        self._moving: dict[str, tuple[str, str]] = {}  # message id -> (queue ARN, receipt) of each move

    @property
    def response(self) -> dict:
        """The partial batch response naming every message SQS should deliver again."""
        return {"batchItemFailures": [{"itemIdentifier": ref} for ref in self.failures]}

    @property
    def moving(self) -> list[str]:
        """The message ids :attr:`dlq_moves` sends."""
        return list(self._moving)

    def unmoved(self, refs: Collection[str]) -> Settlement:
        """This settlement once the moves are done, those of ``refs`` not having gone through
        (SQS refused them, or the call failed): each such message is reported, due back at
        once and not deleted. Its record says dead: its next delivery moves it, or its queue's
        redrive policy does."""
        after = Settlement()
        after.failures = list(self.failures)
        after.visibility = {arn: list(entries) for arn, entries in self.visibility.items()}
        after.unrouted = list(self.unrouted)
        after.resends = {arn: list(entries) for arn, entries in self.resends.items()}
        failed = set(refs) & set(self._moving)
        for arn, entries in self.deletes.items():
            kept = [e for e in entries if e["Id"] not in failed]
            if kept:
                after.deletes[arn] = kept
        for ref, (arn, receipt) in self._moving.items():
            if ref in failed:
                after.failures.append(ref)
                after.visibility.setdefault(arn, []).append(_visibility(ref, receipt, 0))
        return after


def settlement(deliveries: Iterable[Delivery], outcomes: Iterable[Outcome], *,
               dlq_urls: Mapping[str, str] | None = None, dlq_url: str | None = None,
               in_flight_s: float = 0.0) -> Settlement:
    """What becomes of each message of a batch, from its outcomes alone (no I/O).

    A settled job's message is deleted. A dead job's message goes to the dead-letter queue
    of the queue it came from (:func:`kindling.core.routing.dead_letter_url`: ``dlq_urls`` maps a
    source queue ARN to its DLQ URL, else the single ``dlq_url``) and, once there, is deleted;
    with no DLQ for its queue it is reported, due back at once. Every other handed-back
    message is reported and comes back after its ``retry_in``; one without a ``retry_in`` is
    left to the queue's visibility timeout.

    ``in_flight_s``: how long the messages may have been in flight already, as the trigger
    knows it. SQS hides a delivery at most :data:`MAX_VISIBILITY_S` from its receive and
    refuses a change past that, which would leave the message to the queue's visibility
    timeout, back in seconds instead of hours: a longer delay is cut to what the delivery
    has left (less a second between SQS's clock and ours)."""
    by_ref = {d.ref: d for d in deliveries}
    left = MAX_VISIBILITY_S - int(-(-in_flight_s // 1)) - 1  # the ceiling, without math on the cold path
    moving = bool(dlq_urls or dlq_url)
    s = Settlement()
    for o in outcomes:
        d = by_ref[o.ref]
        arn = d.queue_arn or ""
        if o.status not in HANDED_BACK:
            s.deletes.setdefault(arn, []).append({"Id": o.ref, "ReceiptHandle": d.receipt})
            continue
        if o.resend:  # handed back unrecorded on its last delivery: a new message, its count anew
            s.resends.setdefault(arn, []).append(_resent(d, o))
            s.deletes.setdefault(arn, []).append({"Id": o.ref, "ReceiptHandle": d.receipt})
            s._moving[o.ref] = (arn, d.receipt)
            continue
        if o.status == DEAD and moving:
            from kindling.core.routing import dead_letter_url  # a batch with a dead job only

            url = dead_letter_url(arn, dict(dlq_urls or {}), dlq_url or "")
            if url is not None:
                s.dlq_moves.setdefault(url, []).append(_dead_letter(d, o))
                s.deletes.setdefault(arn, []).append({"Id": o.ref, "ReceiptHandle": d.receipt})
                s._moving[o.ref] = (arn, d.receipt)
                continue
            s.unrouted.append((o.ref, arn))
        s.failures.append(o.ref)
        seconds = 0 if o.status == DEAD else o.retry_in
        if seconds is not None:
            s.visibility.setdefault(arn, []).append(_visibility(o.ref, d.receipt, min(seconds, left)))
    return s


def _resent(d: Delivery, o: Outcome) -> dict:
    """The SendMessageBatch entry sending a handed-back message again: its body and signature,
    due after its hand-back's delay (at most SQS's 15 minutes; a FIFO queue takes none, and
    the message keeps its group)."""
    body = d.body if isinstance(d.body, str) else d.body.decode()
    entry: dict = {"Id": o.ref, "MessageBody": body}
    if isinstance(d.signature, str) and d.signature:
        entry["MessageAttributes"] = {SIGNATURE_ATTRIBUTE: {"DataType": "String", "StringValue": d.signature}}
    if d.group:
        entry.update(fifo_move(o.ref, d.group))
    elif o.retry_in:
        entry["DelaySeconds"] = min(int(o.retry_in), MAX_SEND_DELAY_S)
    return entry


def _visibility(ref: str, receipt: str | None, seconds: float) -> dict:
    return {"Id": ref, "ReceiptHandle": receipt, "VisibilityTimeout": max(0, min(int(seconds), MAX_VISIBILITY_S))}


def _dead_letter(d: Delivery, o: Outcome) -> dict:
    """The SendMessageBatch entry moving a dead job's message: its body, why it died, its
    job id, and its signature, so that a redrive to its queue verifies."""
    attributes = {REASON_ATTRIBUTE: {"DataType": "String", "StringValue": (o.reason or "dead")[:1000]}}
    if o.job_id:
        attributes[JOB_ID_ATTRIBUTE] = {"DataType": "String", "StringValue": o.job_id}
    if isinstance(d.signature, str) and d.signature:
        attributes[SIGNATURE_ATTRIBUTE] = {"DataType": "String", "StringValue": d.signature}
    body = d.body if isinstance(d.body, str) else d.body.decode()
    entry = {"Id": o.ref, "MessageBody": body, "MessageAttributes": attributes}
    # A FIFO queue's dead-letter queue is FIFO too.
    entry.update(fifo_move(o.ref, d.group))
    return entry


def fifo_move(message_id: str, group: str | None) -> dict:
    """The send parameters that keep message ``message_id`` of FIFO group ``group`` in its
    group when it is moved to another FIFO queue (a dead job to the DLQ, a DLQ message back
    to its queue); none for a message with no group (a standard queue's)."""
    if not group:
        return {}
    # Deduplicated as this move, by the moved message's id: a move retried after its delete
    # failed is dropped as a copy, the job's next move (a new message) is not, and neither
    # takes the id its producer sent the same body under, which SQS would drop for 5 minutes.
    return {"MessageGroupId": group, "MessageDeduplicationId": message_id}


def fifo_follow_up(job: Job) -> dict:
    """The send parameters of a follow-up ``job`` (a chain's next step, a chord's callback)
    on a FIFO queue: its own message group (a chain orders its steps itself), deduplicated
    by its id, which is known before it is sent: one enqueued twice within 5 minutes runs once."""
    return {"MessageGroupId": job.id, "MessageDeduplicationId": job.id[:128]}


def queue_url(endpoint: str, queue_arn: str) -> str:
    """The queue's URL on ``endpoint``, from its ARN (``arn:aws:sqs:region:account:name``):
    the one way kindling derives a queue's URL from its ARN."""
    _, _, _, _, account, name = queue_arn.split(":", 5)
    return f"{endpoint.rstrip('/')}/{account}/{name}"
