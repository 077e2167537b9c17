"""The SQS trigger: a Lambda SQS event in, a partial batch response out.

Lambda's event source mapping delivers up to ``BatchSize`` messages per invocation. With
``FunctionResponseTypes: [ReportBatchItemFailures]`` the function answers with the ids of
the messages to redeliver; every other message is deleted from the queue::

    {"batchItemFailures": [{"itemIdentifier": "<messageId>"}, ...]}

Failed, dead and deferred jobs are reported; a dead job is reported too, so that the
queue's redrive policy moves its message to the dead-letter queue.
"""

from __future__ import annotations

from kindling.runner import DEAD, DEFERRED, FAILED, Delivery

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
