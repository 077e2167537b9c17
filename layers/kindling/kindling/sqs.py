"""The SQS trigger: a Lambda SQS event in, a partial batch response out.

Lambda's event source mapping delivers up to ``BatchSize`` messages per invocation. With
``FunctionResponseTypes: [ReportBatchItemFailures]`` the function answers with the ids of
the messages to redeliver; every other message is deleted from the queue::

    {"batchItemFailures": [{"itemIdentifier": "<messageId>"}, ...]}

Failed, dead and deferred jobs are reported; a dead job is reported too, so that the
queue's redrive policy moves its message to the dead-letter queue.

Reported messages would come back after the queue's visibility timeout (six times the
function timeout). :func:`visibility_changes` shortens that: a failed job returns after
an exponential backoff (``retry_delay * 2**(attempt-1)`` seconds, at most 12 hours); a
deferred one (never started) and a dead one (on its way to the DLQ) at once.
"""

from __future__ import annotations

from kindling.runner import DEAD, DEFERRED, FAILED, Delivery

MAX_VISIBILITY_S = 43_200

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from kindling.runner import Outcome

HANDED_BACK = frozenset({FAILED, DEAD, DEFERRED})


def is_sqs_event(event: object) -> bool:
    records = event.get("Records") if isinstance(event, dict) else None
    return bool(records) and records[0].get("eventSource") == "aws:sqs"


def deliveries(event: dict) -> list[Delivery]:
    """One :class:`Delivery` per SQS record; attempts from ``ApproximateReceiveCount``."""
    out = []
    for record in event["Records"]:
        attrs = record.get("attributes") or {}
        try:
            attempts = int(attrs.get("ApproximateReceiveCount", 1))
        except (TypeError, ValueError):
            attempts = 1
        out.append(Delivery(record["messageId"], record.get("body") or "", attempts))
    return out


def batch_response(outcomes: Iterable[Outcome]) -> dict:
    """The partial batch response naming every message SQS should deliver again."""
    return {
        "batchItemFailures": [{"itemIdentifier": o.ref} for o in outcomes if o.status in HANDED_BACK]
    }


def visibility_changes(event: dict, outcomes: Iterable[Outcome], retry_delay: float) -> dict[str, list[dict]]:
    """ChangeMessageVisibilityBatch entries for the handed-back messages, per queue ARN."""
    records = {r["messageId"]: r for r in event["Records"]}
    changes: dict[str, list[dict]] = {}
    for o in outcomes:
        if o.status not in HANDED_BACK:
            continue
        # failed: back after an exponential delay; deferred and dead: at once
        seconds = min(int(retry_delay * 2 ** max(o.attempts - 1, 0)), MAX_VISIBILITY_S) if o.status == FAILED else 0
        record = records[o.ref]
        changes.setdefault(record.get("eventSourceARN", ""), []).append(
            {"Id": o.ref, "ReceiptHandle": record["receiptHandle"], "VisibilityTimeout": seconds}
        )
    return changes


def queue_url(endpoint: str, queue_arn: str) -> str:
    """The queue's URL on ``endpoint``, from its ARN (``arn:aws:sqs:region:account:name``)."""
    _, _, _, _, account, name = queue_arn.split(":", 5)
    return f"{endpoint.rstrip('/')}/{account}/{name}"
