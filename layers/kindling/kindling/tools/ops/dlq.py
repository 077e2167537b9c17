"""The dead-letter queue: look at it, and move it back to the queue it serves.

``peek`` receives messages and makes them visible again at once (SQS has no true peek;
each look counts as a receive on the DLQ, which has no redrive policy of its own), and
reads the current record of each job, so an operator sees which ones were revived or
succeeded since.

``redrive`` with its revive pass (the default) works in chunks of at most ``chunk`` (100)
messages: it receives a chunk, revives the jobs recorded ``dead`` among them (a new
generation each, as ``kindling jobs retry`` does, reopening the chord of a member that
failed one; see :mod:`kindling.tools.ops.revive`), sends the chunk to the jobs queue and deletes
it from the DLQ, prints a progress line, and only then receives more. So it never holds
the whole DLQ invisible, and an interrupted redrive leaves every message either moved or
still in the DLQ. Without the revive the worker would see the ``dead`` records and move the
jobs straight back.

``revive=False`` (``--no-revive``) moves the messages as they are, for the worker to decide
(a job with no final record runs; a job that succeeded since is acknowledged as a
duplicate; a ``dead`` one returns to the DLQ), with SQS's message move task
(``StartMessageMoveTask``, progress from ``ListMessageMoveTasks``), which moves them server
side and starts their receive count again at 0. The jobs queue is named as the
destination: the worker moves dead jobs to the DLQ itself (``SendMessage``), and SQS
redrives such messages "to their source" only when its redrive policy moved them.

``plan`` (``--dry-run``) says what a redrive would do and changes no record and moves no
message; reading them is a receive all the same (see ``peek``).

Each named queue has its own DLQ (:mod:`kindling.core.routing`); ``stack.on_queue(name)``
(``--queue NAME``) peeks at that one and redrives it back to its own queue, never to the
jobs queue.

Where the move task is not available (older emulators), messages are moved by hand:
receive ten, send them to the jobs queue, delete the ones sent; the report says so.
"""

from __future__ import annotations

import time

from kindling.core.envelope import REASON_ATTRIBUTE
from kindling.core.records import revive_key
from kindling.core.status import REVIVABLE
from kindling.stores.dynamo import from_item
from kindling.tools.ops import OpsError, Stack
from kindling.tools.ops.revive import (
    RetryRefused,
    message_job_id,
    message_problem,
    reopen_chord,
    revive,
    trusted_job_id,
)
from kindling.triggers.sqs.events import fifo_move

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["peek", "plan", "redrive", "MOVE_TASK_UNSUPPORTED", "PEEK_VISIBILITY_S", "CHUNK"]

# A look at the DLQ is an SQS receive: each message's receive count goes up and it is hidden
# for this long, unless released sooner (peek releases them as soon as it has read them).
PEEK_VISIBILITY_S = 1
CHUNK = 100  # messages a redrive holds at once: received, revived, moved, deleted, then the next
_CHUNK_VISIBILITY_S = 120  # long enough to revive and move one chunk

MOVE_TASK_UNSUPPORTED = {"UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation", "InvalidAction",
                         "NotImplemented", "NotImplementedError", "501"}


def peek(stack: Stack, *, limit: int = 10, hide_s: int = PEEK_VISIBILITY_S) -> dict:
    """Up to ``limit`` DLQ messages (job id, task, reason, sent time, receives, the job's
    current record status), the queue's depth and the oldest sent time seen. Looking is
    receiving: the report's ``visibility_s`` says how long they were hidden at most."""
    messages = _receive_all(stack, limit, hide_s)
    try:
        ids = [i for i in (message_job_id(m) for m in messages) if i]
        records = _records(stack, ids) if stack.table else {}
        rows = []
        for m in messages:
            job_id = message_job_id(m)
            attrs = m.get("MessageAttributes") or {}
            task = None
            try:
                from kindling.core import codec

                body = codec.loads(m.get("Body") or "")
                task = body.get("task") if isinstance(body, dict) else None
            except ValueError:
                pass
            record = records.get(job_id or "", {})
            rows.append({"message_id": m["MessageId"], "job_id": job_id, "task": task,
                         "sent_at": int(m.get("Attributes", {}).get("SentTimestamp", 0)),
                         "receives": int(m.get("Attributes", {}).get("ApproximateReceiveCount", 0)),
                         "reason": (attrs.get(REASON_ATTRIBUTE) or {}).get("StringValue"),
                         "status": record.get("status"), "generation": record.get("generation")})
    finally:
        _release(stack, messages)
    rows.sort(key=lambda r: r["sent_at"])
    return {"queue": stack.dlq_url, "depth": stack.depth(stack.dlq_url), "messages": rows,
            "oldest_sent_at": rows[0]["sent_at"] if rows else None, "visibility_s": hide_s}


def redrive(stack: Stack, *, revive_dead: bool = True, max_per_second: int | None = None,
            progress: Callable[[str], None] = print, poll_s: float = 1.0, move_task: bool = True,
            timeout_s: float = 3600.0, chunk: int = CHUNK) -> dict:
    """Move the DLQ's messages back to the jobs queue, reviving dead jobs chunk by chunk
    (``revive_dead``), else with the move task; report ``{"revived", "revive_refused",
    "moved", "method", "status"}`` (and ``"left"`` where messages stayed)."""
    report = {"revived": 0, "revive_refused": 0, "moved": 0, "method": None, "status": None}
    if revive_dead:
        report.update(_move_by_hand(stack, progress, revive_dead=True, chunk=chunk))
        return report
    if move_task:
        try:
            report.update(_move_task(stack, max_per_second, progress, poll_s, timeout_s))
            return report
        except _Unsupported as exc:
            progress(f"StartMessageMoveTask is not available here ({exc}); moving messages by hand instead "
                     "(ReceiveMessage, SendMessageBatch, DeleteMessageBatch)")
    report.update(_move_by_hand(stack, progress, revive_dead=False, chunk=chunk))
    return report


def plan(stack: Stack, *, revive_dead: bool = True, limit: int = 1000) -> dict:
    """What :func:`redrive` would do, changing no record and moving no message: per message
    its job, its record's status and the action (``revive and move``, ``move``, ``leave``:
    fails the signature check, ``refuse``: signed, and the keys are not set). Up to ``limit``
    messages are looked at (``depth`` says how many the DLQ holds); SQS has no peek, so each
    is received once (its receive count goes up) and released as soon as all are read."""
    messages = _receive_all(stack, limit, _CHUNK_VISIBILITY_S)
    rows: list[dict] = []
    try:
        ids = [i for i in (trusted_job_id(m) for m in messages) if i]
        records = _records(stack, ids) if revive_dead and stack.table else {}
        for m in messages:
            problem = message_problem(stack, m)
            job_id = message_job_id(m)
            status = (records.get(job_id or "") or {}).get("status")
            if problem and revive_dead:
                action = "leave" if stack.signing is not None else "refuse"
            elif revive_dead and status in REVIVABLE:
                action = "revive and move"
            else:
                action = "move"
            rows.append({"message_id": m["MessageId"], "job_id": job_id, "status": status, "action": action,
                         "problem": problem})
    finally:
        _release(stack, messages)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["action"]] = counts.get(r["action"], 0) + 1
    return {"queue": stack.dlq_url, "depth": stack.depth(stack.dlq_url), "looked_at": len(rows),
            "actions": counts, "messages": rows}


class _Unsupported(Exception):
    pass


def _move_task(stack: Stack, max_per_second: int | None, progress, poll_s: float, timeout_s: float) -> dict:
    from botocore.exceptions import ClientError

    source, destination = stack.arn(stack.dlq_url), stack.arn(stack.need_queue())
    params = {"SourceArn": source, "DestinationArn": destination}
    if max_per_second:
        params["MaxNumberOfMessagesPerSecond"] = max_per_second
    try:
        handle = stack.sqs.start_message_move_task(**params)["TaskHandle"]
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        status = str(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
        # An emulator without the call answers 501, or 500 with no AWS error code at all.
        if code in MOVE_TASK_UNSUPPORTED or status == "501" or (status == "500" and code in ("", "500")):
            raise _Unsupported(f"{code or status}: {str(exc)[:120]}") from exc
        raise
    except AttributeError as exc:  # a boto3 too old to know the call
        raise _Unsupported("boto3 has no start_message_move_task") from exc
    progress(f"message move task started: {source.rsplit(':', 1)[1]} -> {destination.rsplit(':', 1)[1]}")
    deadline = time.monotonic() + timeout_s
    last = None
    while True:
        tasks = stack.sqs.list_message_move_tasks(SourceArn=source, MaxResults=10).get("Results", [])
        task = next((t for t in tasks if t.get("TaskHandle") in (None, handle)), tasks[0] if tasks else {})
        moved, total = task.get("ApproximateNumberOfMessagesMoved", 0), task.get("ApproximateNumberOfMessagesToMove")
        status = task.get("Status", "RUNNING")
        line = f"{status.lower()}: moved {moved}" + (f" of {total}" if total is not None else "")
        if line != last:
            progress(line)
            last = line
        if status != "RUNNING":
            if status == "FAILED":
                progress(f"the move task failed: {task.get('FailureReason', 'no reason given')}")
            return {"moved": moved, "method": "StartMessageMoveTask", "status": status}
        if time.monotonic() > deadline:
            progress("still running; follow it with ListMessageMoveTasks (aws sqs list-message-move-tasks)")
            return {"moved": moved, "method": "StartMessageMoveTask", "status": status}
        time.sleep(poll_s)


def _move_by_hand(stack: Stack, progress, *, revive_dead: bool, chunk: int = CHUNK) -> dict:
    """Receive at most ``chunk`` messages, revive their dead jobs (``revive_dead``), send them
    to the queue, delete what it accepted, print a line; then the next chunk. Messages are
    moved as they are (bodies and signatures). One that fails the signature check stays in
    the DLQ (hidden until the end, then released), reported; without the signing keys a
    signed message stops the revive (the worker checks signatures itself: ``--no-revive``)."""
    from kindling.shared import sqs_send

    moved = revived = refused = 0
    chunks = 0
    status = "COMPLETED"
    queue = stack.need_queue()
    max_bytes = sqs_send.queue_max_bytes(stack.sqs, queue)
    check = revive_dead or stack.signing is not None
    left: dict[str, dict] = {}
    # A job this redrive moved back can die again while the redrive still runs: its new
    # message is not this redrive's to move (moving it would revive it round after round).
    sent_jobs: set[str] = set()
    again: dict[str, dict] = {}
    try:
        while True:
            fresh: list[dict] = []
            while len(fresh) < chunk:
                messages = stack.sqs.receive_message(
                    QueueUrl=stack.dlq_url, MaxNumberOfMessages=min(10, chunk - len(fresh)),
                    VisibilityTimeout=_CHUNK_VISIBILITY_S, WaitTimeSeconds=stack.receive_wait_s,
                    AttributeNames=["All"], MessageSystemAttributeNames=["MessageGroupId"],
                    MessageAttributeNames=["All"]).get("Messages", [])
                for m in messages:
                    if m["MessageId"] not in left and m["MessageId"] not in again and message_job_id(m) in sent_jobs:
                        again[m["MessageId"]] = m
                        progress(f"left in the DLQ: job {message_job_id(m)} died again during this redrive")
                new = [m for m in messages if m["MessageId"] not in left and m["MessageId"] not in again]
                for m in messages:
                    for held in (left, again):
                        if m["MessageId"] in held:
                            held[m["MessageId"]] = m  # its newest receipt handle, to release it with
                if not new:
                    break
                fresh += new
            if not fresh:
                break
            chunks += 1
            outgoing, bodies = [], {}
            for m in fresh:
                problem = message_problem(stack, m) if check else None
                if problem and revive_dead and stack.signing is None:
                    signed = sum(1 for x in fresh if message_problem(stack, x))
                    _release(stack, fresh)
                    raise OpsError(f"{signed} message(s) in the dead-letter queue are signed: a redrive that revives "
                                   "their jobs must check their signatures first. Set KINDLING_SIGNING_SECRET to the "
                                   "deployment's signing secret, or pass --no-revive to move them as they are (the "
                                   "worker checks them itself). "
                                   + (f"Stopped after moving {moved} message(s) and reviving {revived} job(s); the "
                                      "rest are in the DLQ" if moved else "Nothing was revived or moved"))
                if problem:
                    left[m["MessageId"]] = m
                    refused += 1 if revive_dead else 0
                    progress(f"not {'revived or ' if revive_dead else ''}moved: job {message_job_id(m)}: {problem}")
                    continue
                job_id = trusted_job_id(m) if revive_dead else None
                if job_id:
                    bodies.setdefault(job_id, m["Body"])
                # A FIFO DLQ's message goes back to its queue in its own group, body and
                # attributes (its signature among them) as they are.
                options = fifo_move(m["MessageId"], m.get("Attributes", {}).get("MessageGroupId"))
                if m.get("MessageAttributes"):
                    options["MessageAttributes"] = m["MessageAttributes"]
                outgoing.append((m["MessageId"], m["Body"], options))
            if bodies:
                got, not_revived = _revive_dead(stack, bodies, progress)
                revived += got
                refused += not_revived
            accepted, _ = sqs_send.send(stack.sqs, queue, outgoing, max_bytes=max_bytes, trace=False)
            done = [m for m in fresh if m["MessageId"] in accepted]
            sent_jobs.update(j for j in (message_job_id(m) for m in done) if j)
            for start in range(0, len(done), 10):
                stack.sqs.delete_message_batch(QueueUrl=stack.dlq_url, Entries=[
                    {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(done[start:start + 10])])
            moved += len(done)
            progress(f"chunk {chunks}: received {len(fresh)}, moved {len(done)}"
                     + (f"; so far moved {moved}, revived {revived}" if revive_dead else f"; so far moved {moved}"))
            if len(done) < len(outgoing):
                _release(stack, [m for m in fresh if m["MessageId"] not in accepted and m["MessageId"] not in left])
                progress(f"{len(outgoing) - len(done)} message(s) were not accepted by the jobs queue; they stay in "
                         "the DLQ")
                status = "INCOMPLETE"
                break
    finally:
        _release(stack, list(left.values()) + list(again.values()))
    if left:
        status = "INCOMPLETE"
    return {"moved": moved, "revived": revived, "revive_refused": refused, "left": len(left),
            "died_again": len(again), "method": "receive/send/delete", "status": status}


def _revive_dead(stack: Stack, bodies: dict[str, str], progress) -> tuple[int, int]:
    """Revive the jobs among ``bodies`` (job id: body) whose record is ``dead``, before their
    messages go back: else the worker would see the ``dead`` record and move them straight
    back. Returns ``(revived, not revived)``."""
    revived = refused = 0
    records = _records(stack, list(bodies))
    for job_id, body in bodies.items():
        record = records.get(job_id)
        if record is None or record.get("status") not in REVIVABLE:
            continue
        try:
            revive(stack, record)
            revived += 1
            reopen_chord(stack, body)
        except RetryRefused as exc:
            refused += 1
            progress(f"not revived: {exc}")
    return revived, refused


def _receive_all(stack: Stack, limit: int, hide_s: int) -> list[dict]:
    messages: list[dict] = []
    seen: set[str] = set()
    dlq = stack.dlq_url  # before the client: a missing --queue-url is said before any AWS call
    while len(messages) < limit:
        got = stack.sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=min(10, limit - len(messages)),
                                        WaitTimeSeconds=stack.receive_wait_s, VisibilityTimeout=hide_s,
                                        AttributeNames=["All"], MessageAttributeNames=["All"]).get("Messages", [])
        fresh = [m for m in got if m["MessageId"] not in seen]
        if not fresh:
            break
        seen.update(m["MessageId"] for m in fresh)
        messages += fresh
    return messages


def _records(stack: Stack, ids: list[str]) -> dict[str, dict]:
    """Current records of ``ids`` with their generation (from the revive ledgers)."""
    keys = list(dict.fromkeys(ids))
    keys += [revive_key(i) for i in keys]
    items: dict[str, dict] = {}
    for start in range(0, len(keys), 100):
        request = {stack.table: {"Keys": [{"id": {"S": k}} for k in keys[start:start + 100]], "ConsistentRead": True}}
        while request:
            response = stack.dynamodb.batch_get_item(RequestItems=request)
            for item in response.get("Responses", {}).get(stack.table, []):
                items[item["id"]["S"]] = from_item(item)
            request = response.get("UnprocessedKeys") or {}
    out = {}
    for i in ids:
        if i in items:
            ledger = items.get(revive_key(i))
            record = dict(items[i])
            record.setdefault("generation", ledger["generation"] if ledger else 1)
            record["previous"] = ledger.get("history", []) if ledger else []
            out[i] = record
    return out


def _release(stack: Stack, messages: list[dict]) -> None:
    from kindling.tools.ops.revive import _release as release

    release(stack, messages)
