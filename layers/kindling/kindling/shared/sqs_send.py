"""Sending messages to one SQS queue: the producer side's one send pipeline.

Every path that puts jobs on an SQS queue from outside the worker sends through
:func:`send`: :meth:`kindling.producer.client.Client.enqueue_many` (and so a canvas group's or
chord's members), ``kindling jobs retry`` and the dashboard's retry button
(:mod:`kindling.tools.ops.revive`), and ``kindling dlq redrive``'s move by hand
(:mod:`kindling.tools.ops.dlq`).

Order. A FIFO queue keeps each message group in the order its messages were *accepted*,
and SendMessageBatch accepts its entries in their order. So :func:`plan` puts each group's
messages in batches in call order, and a group's batches form one *lane*, sent one after
the other, each once the one before was accepted; only different lanes go at once (up to
``concurrency``). Groups small enough for one batch share batches, each its own lane, so
many one-job groups (a chord's members on a FIFO queue) still go ten at a time. A standard
queue keeps no order: each of its batches is a lane.

Failures. Entries SQS refuses with a server-side error, and whole calls that fail
(throttling, the network), are sent again with backoff, up to ``max_attempts``; a FIFO
queue drops a copy of an entry it had accepted already by its deduplication id. A group
that still has a message not accepted stops there: its later messages are not sent (each
reported with the message that held it back), so the caller can send the rest again, in
order. One case no producer can undo: SQS accepting a later entry of a group in the same
call as an earlier one it refused; the refused one, sent again, then lands after it.

Imported by producers and operator tools, and by the worker's SQS port
(:mod:`kindling.triggers.sqs.port`) for :func:`queue_max_bytes`; never by the worker's cold path.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    Message = tuple[str, str, dict]  # (the caller's reference, body, SendMessage parameters)

MAX_BATCH = 10  # SQS's entries per SendMessageBatch


def is_fifo(url: str) -> bool:
    return url.endswith(".fifo")


def message_bytes(message: Message) -> int:
    """What one message counts toward a batch's size: its body and its attributes."""
    _, body, options = message
    attributes = options.get("MessageAttributes") or {}
    return len(body.encode()) + sum(len(name) + len(a.get("DataType", "")) + len(a.get("StringValue", ""))
                                    for name, a in attributes.items())


def _batches(messages: Sequence[Message], max_bytes: int) -> list[list[Message]]:
    """``messages`` in order, in batches of at most 10 entries and ``max_bytes`` in all."""
    batches: list[list[Message]] = []
    size = 0
    for m in messages:
        n = message_bytes(m)
        if not batches or len(batches[-1]) == MAX_BATCH or size + n > max_bytes:
            batches.append([])
            size = 0
        batches[-1].append(m)
        size += n
    return batches


def plan(messages: Sequence[Message], *, fifo: bool, max_bytes: int) -> list[list[list[Message]]]:
    """The lanes to send ``messages`` in: each a list of batches to send in turn; lanes are
    independent. On a FIFO queue every message group lies in one lane, in call order."""
    if not fifo:
        return [[batch] for batch in _batches(messages, max_bytes)]
    groups: dict[str, list[Message]] = {}
    for m in messages:
        groups.setdefault(m[2].get("MessageGroupId", ""), []).append(m)
    lanes: list[list[list[Message]]] = []
    small: list[list[Message]] = []  # groups that fit one batch: packed whole, never split
    for members in groups.values():
        own = _batches(members, max_bytes)
        if len(own) == 1:
            small.append(members)
        else:
            lanes.append(own)
    shared: list[list[Message]] = []
    size = 0
    for members in small:
        n = sum(message_bytes(m) for m in members)
        if not shared or len(shared[-1]) + len(members) > MAX_BATCH or size + n > max_bytes:
            shared.append([])
            size = 0
        shared[-1].extend(members)
        size += n
    return lanes + [[batch] for batch in shared]


def send(sqs, url: str, messages: Sequence[Message], *, max_bytes: int, max_attempts: int = 5,
         concurrency: int = 8, sleep: Callable[[int], None] | None = None,
         trace: bool = True) -> tuple[dict[str, str], dict[str, str]]:
    """Send ``messages`` to queue ``url`` with SendMessageBatch, each FIFO group in order
    (see the module's docstring).

    Returns ``(accepted, failed)``: the SQS message id of each message accepted, and why
    each other one was not, both by the caller's reference. ``trace`` adds the caller's
    X-Ray trace (:func:`trace_attribute`) to every message."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    extra = trace_attribute() if trace else {}
    lanes = plan(messages, fifo=is_fifo(url), max_bytes=max_bytes)
    sleep = sleep or backoff_sleep

    def run(lane: list[list[Message]]) -> tuple[dict[str, str], dict[str, str]]:
        accepted: dict[str, str] = {}
        failed: dict[str, str] = {}
        stopped: dict[str, str] = {}  # a FIFO group held back: the reference of its first message not accepted
        for batch in lane:
            held = [m for m in batch if m[2].get("MessageGroupId", "") in stopped]
            for ref, _, options in held:
                first = stopped[options.get("MessageGroupId", "")]
                failed[ref] = f"not sent: an earlier message of its FIFO group ({first}) was not accepted"
            ok, bad = _send_batch(sqs, url, [m for m in batch if m not in held], extra, max_attempts, sleep)
            accepted.update(ok)
            failed.update(bad)
            for ref, _, options in batch:
                if ref in bad and "MessageGroupId" in options:
                    stopped.setdefault(options["MessageGroupId"], ref)
        return accepted, failed

    if concurrency > 1 and len(lanes) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(concurrency, len(lanes)), thread_name_prefix="kindling-send") as pool:
            results = list(pool.map(run, lanes))
    else:
        results = [run(lane) for lane in lanes]
    accepted: dict[str, str] = {}
    failed: dict[str, str] = {}
    for ok, bad in results:
        accepted.update(ok)
        failed.update(bad)
    return accepted, failed


def _send_batch(sqs, url: str, batch: list[Message], extra: dict, max_attempts: int,
                sleep: Callable[[int], None]) -> tuple[dict[str, str], dict[str, str]]:
    """One batch, its server-side refusals sent again; ``(accepted, failed)`` by reference."""
    pending = {str(i): m for i, m in enumerate(batch)}
    accepted: dict[str, str] = {}
    failed: dict[str, str] = {}
    for attempt in range(max_attempts):
        if not pending:
            break
        # In the batch's order: SQS accepts a FIFO group's entries in the order given.
        entries = [{"Id": key, "MessageBody": body, **options, **extra} for key, (_, body, options) in pending.items()]
        try:
            response = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        except Exception as exc:  # noqa: BLE001 - transport/throttling: retry the whole batch
            if attempt == max_attempts - 1:
                failed.update({ref: f"{type(exc).__name__}: {exc}" for ref, _, _ in pending.values()})
                return accepted, failed
            sleep(attempt)
            continue
        for entry in response.get("Successful", []):
            ref = pending.pop(entry["Id"])[0]
            accepted[ref] = entry.get("MessageId", "")
            failed.pop(ref, None)
        retry = {}
        for entry in response.get("Failed", []):
            ref = pending[entry["Id"]][0]
            failed[ref] = f"{entry.get('Code')}: {entry.get('Message', '')}"
            if not entry.get("SenderFault"):
                retry[entry["Id"]] = pending[entry["Id"]]
        pending = retry
        if pending and attempt < max_attempts - 1:
            sleep(attempt)
    return accepted, failed


def queue_max_bytes(sqs, url: str) -> int:
    """A queue's MaximumMessageSize (GetQueueAttributes): the most one message, and one
    SendMessageBatch in all, may hold.

    If the queue cannot be asked (no such queue, no permission, throttled), SQS's old
    256 KiB limit stands in: larger arguments then go to S3 a little sooner than they must,
    and the send itself reports what is wrong."""
    from kindling.shared.payloads import SQS_DEFAULT_MAX_BYTES

    try:
        response = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MaximumMessageSize"])
        value = str(response.get("Attributes", {}).get("MaximumMessageSize", ""))
    except Exception:  # noqa: BLE001 - boto3's errors and transport failures alike
        value = ""
    return int(value) if value.isdigit() else SQS_DEFAULT_MAX_BYTES


def trace_attribute() -> dict:
    """The caller's X-Ray trace (``_X_AMZN_TRACE_ID``, set by Lambda and X-Ray's SDKs) as SQS's
    ``AWSTraceHeader`` system attribute, so the worker's lines and records carry it."""
    header = os.environ.get("_X_AMZN_TRACE_ID")
    if not header:
        return {}
    return {"MessageSystemAttributes": {"AWSTraceHeader": {"DataType": "String", "StringValue": header}}}


def backoff_sleep(attempt: int) -> None:
    """The pause after failed send number ``attempt + 1``: full jitter from 50 ms doubling to 2 s
    (a :class:`kindling.core.policy.Retry`, imported only once a send has failed)."""
    from kindling.core.policy import Retry

    Retry(None, base=0.05, cap=2.0).wait(attempt + 1, None, time.sleep)
