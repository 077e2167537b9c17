"""The SQS trigger: a Lambda SQS event in, a partial batch response out.

Lambda's event source mapping delivers up to ``BatchSize`` messages per invocation. With
``FunctionResponseTypes: [ReportBatchItemFailures]`` the function answers with the ids of
the messages to redeliver; every other message is deleted from the queue::

    {"batchItemFailures": [{"itemIdentifier": "<messageId>"}, ...]}

Failed and deferred jobs are reported. A dead job's message is sent to the dead-letter
queue by the worker (:func:`dead_letters`) and then acknowledged; if that send fails it
is reported too, and moved on a later delivery or by the queue's redrive policy.

Reported messages would come back after the queue's visibility timeout (six times the
function timeout). :func:`visibility_changes` sets each one's return from the runner's
``Outcome.retry_in``: a failed job after its retry backoff, a job not due yet when it is
due, a batch handed back for a store outage after a growing backoff, one cut off by the
invocation's end (or a dead one not moved) at once.
"""

from __future__ import annotations

from kindling.batch import Delivery
from kindling.envelope import JOB_ID_ATTRIBUTE, REASON_ATTRIBUTE, SIGNATURE_ATTRIBUTE
from kindling.policy import MAX_DELAY_S
from kindling.status import DEAD, HANDED_BACK

MAX_VISIBILITY_S = MAX_DELAY_S
"""The longest SQS hides a delivery, counted from its receive: it refuses a change past what
is left (:func:`visibility_changes` keeps within it)."""

LAMBDA_HOLD_S = 311
"""How long before the handler is called Lambda may have received its messages: the poller's
batching window (``MaximumBatchingWindowInSeconds``, at most 300 s), a cold start's init
(at most 10 s) and a second for the poll. Held longer (invocations throttled), a change past
what is left is refused and the message is back after the queue's visibility timeout, as
it was before."""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Iterable

    from kindling.batch import Outcome
    from kindling.envelope import Job


def is_sqs_event(event: object) -> bool:
    records = event.get("Records") if isinstance(event, dict) else None
    return bool(records) and records[0].get("eventSource") == "aws:sqs"


def deliveries(event: dict, *, signed: bool = False) -> list[Delivery]:
    """One :class:`Delivery` per SQS record; attempts from ``ApproximateReceiveCount``, the
    producer's trace from ``AWSTraceHeader``, a FIFO queue's ``MessageGroupId``; with
    ``signed``, the signature attribute and the queue it came from (:mod:`kindling.jobsig`)."""
    out = []
    for record in event["Records"]:
        attrs = record.get("attributes") or {}
        try:
            attempts = int(attrs.get("ApproximateReceiveCount", 1))
        except (TypeError, ValueError):
            attempts = 1
        d = Delivery(record["messageId"], record.get("body") or "", attempts, attrs.get("AWSTraceHeader"),
                     attrs.get("MessageGroupId"))
        if signed:
            _signature(d, record)
        out.append(d)
    return out


def _signature(d: Delivery, record: dict) -> None:
    from kindling import jobsig

    attribute = (record.get("messageAttributes") or {}).get(SIGNATURE_ATTRIBUTE) or {}
    d.signature = attribute.get("stringValue") if isinstance(attribute, dict) else None
    try:
        d.source = jobsig.sqs_destination(record.get("eventSourceARN") or "")
    except ValueError:
        d.source = None


def batch_response(outcomes: Iterable[Outcome], moved: Collection[str] = ()) -> dict:
    """The partial batch response naming every message SQS should deliver again."""
    return {
        "batchItemFailures": [
            {"itemIdentifier": o.ref} for o in outcomes if o.status in HANDED_BACK and o.ref not in moved
        ]
    }


def dead_letters(event: dict, outcomes: Iterable[Outcome]) -> list[dict]:
    """SendMessageBatch entries (``Id`` = message id) for the messages of dead jobs."""
    records = {r["messageId"]: r for r in event["Records"]}
    entries = []
    for o in outcomes:
        if o.status != DEAD:
            continue
        attributes = {REASON_ATTRIBUTE: {"DataType": "String", "StringValue": (o.reason or "dead")[:1000]}}
        if o.job_id:
            attributes[JOB_ID_ATTRIBUTE] = {"DataType": "String", "StringValue": o.job_id}
        signature = (records[o.ref].get("messageAttributes") or {}).get(SIGNATURE_ATTRIBUTE)
        if isinstance(signature, dict) and signature.get("stringValue"):  # so a redrive to its queue verifies
            attributes[SIGNATURE_ATTRIBUTE] = {"DataType": "String", "StringValue": signature["stringValue"]}
        entry = {"Id": o.ref, "MessageBody": records[o.ref].get("body") or "", "MessageAttributes": attributes}
        # A FIFO queue's dead-letter queue is FIFO too.
        entry.update(fifo_move(o.ref, (records[o.ref].get("attributes") or {}).get("MessageGroupId")))
        entries.append(entry)
    return entries


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


def visibility_changes(event: dict, outcomes: Iterable[Outcome], moved: Collection[str] = (),
                       in_flight_s: float = 0.0) -> dict[str, list[dict]]:
    """ChangeMessageVisibilityBatch entries for the handed-back messages, per queue ARN.

    Messages whose outcome has no ``retry_in`` (a failure without a retry delay) are left
    to the queue's visibility timeout. ``in_flight_s``: how long the messages may have been
    in flight already, as the trigger knows it. SQS hides a delivery at most
    :data:`MAX_VISIBILITY_S` from its receive and refuses a change past that, which would
    leave the message to the queue's visibility timeout, back in seconds instead of hours:
    a longer delay is cut to what the delivery has left (less a second between SQS's clock
    and ours).
    """
    records = {r["messageId"]: r for r in event["Records"]}
    changes: dict[str, list[dict]] = {}
    left = MAX_VISIBILITY_S - int(-(-in_flight_s // 1)) - 1  # the ceiling, without math on the cold path
    for o in outcomes:
        if o.status not in HANDED_BACK or o.ref in moved:
            continue
        seconds = 0 if o.status == DEAD else o.retry_in
        if seconds is None:
            continue
        record = records[o.ref]
        changes.setdefault(record.get("eventSourceARN", ""), []).append(
            {"Id": o.ref, "ReceiptHandle": record["receiptHandle"],
             "VisibilityTimeout": max(0, min(int(seconds), left))}
        )
    return changes


def queue_url(endpoint: str, queue_arn: str) -> str:
    """The queue's URL on ``endpoint``, from its ARN (``arn:aws:sqs:region:account:name``)."""
    _, _, _, _, account, name = queue_arn.split(":", 5)
    return f"{endpoint.rstrip('/')}/{account}/{name}"
