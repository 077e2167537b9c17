"""Retrying a job under its own id, and reviving a ``dead`` one.

A ``dead`` record is final: a worker that receives the job again sees it and moves the
message straight back to the dead-letter queue without running it (``already dead``). So
retrying a dead job is an explicit revive, a new *generation* of its record:

1. find the job's message in the dead-letter queue (the worker moved it there, to the DLQ
   of the queue it came from; results records do not hold arguments) and keep it out of
   sight while working;
2. in one transaction (``TransactWriteItems``), replace the ``dead`` record that was read,
   and only that one (its status and ``finished_at`` are the condition), with a ``queued``
   record of the next generation (attempts 0, built by :func:`kindling.core.records.build_record`),
   and count the generation in the job's revive ledger, the item ``revive#<job id>`` (a
   key no job id can take), which keeps the earlier generations' outcomes: the worker's
   next record replaces the whole item and would drop them;
3. if the job is a chord's member that failed its chord, reopen the chord
   (:func:`reopen_chord`), so that the member's success can still complete it;
4. send the job again to the queue it came from (the one whose DLQ held it): its whole
   envelope as it was (same id, arguments or their S3 pointer, options, chain and chord
   membership), with a new ``enqueued_at``, since this is a new enqueue;
5. delete its message from the dead-letter queue.

The worker reads ``queued`` as no record at all (:mod:`kindling.core.status`): the job's next
run is attempt 1 of its full allowance, and its outcome, which carries the generation it
read, replaces the ``queued`` record under the usual forward-only rule. The record is
written before the message is sent, so no worker can see the new message beside the old
``dead`` record. If the process stops between steps, running ``retry`` again finishes
the job: a ``queued`` record whose message is still in the DLQ is sent without a new
generation.

A delivery of the *old* generation still running when the revive lands (SQS delivered
it twice, or it was in flight when another delivery recorded ``dead``) cannot undo it:
the worker writes a ``failed`` or ``dead`` only over a record of the generation its batch
read (:data:`kindling.core.status.GENERATION_CHECKED`), so that outcome is refused, dropped
with a ``stale_generation`` log line and its message acknowledged; the new message runs
the job. A ``succeeded`` of the old generation does replace the ``queued`` record (the
all-succeeded batch's one unconditional BatchWriteItem; the job did succeed), and the new
message is then skipped as a duplicate.

Named queues (:mod:`kindling.core.routing`) each have their own DLQ, and the worker moves a
dead job to the one of the queue it came from; no record or message attribute names the
queue, but the DLQ does. So ``retry`` looks through the DLQ of the queue it is given, else
through every DLQ of the deployment (the jobs queue's first, then ``KINDLING_QUEUES``
order), and sends the job to the queue whose DLQ held it: a job of a rate-limited queue
must never run on the default one.

Other statuses: a ``rejected`` job (a valid envelope whose task or arguments this worker
refused) is sent again from the body its record kept, to the queue named (its record does
not say which; with no named queues, the jobs queue); any outcome replaces a
``rejected``, so no revive is needed. A job with no record whose message is in the DLQ
(the results table was unreachable on its last delivery) is sent again as it is. A
``failed`` job is refused (its message is back on the queue and runs again by itself), so
is a ``succeeded`` one (a new run would be skipped as a duplicate: send it under a new id).
"""

from __future__ import annotations

import contextlib
import time

from kindling.core import codec
from kindling.core.envelope import JOB_ID_ATTRIBUTE, decode_job
from kindling.core.errors import InvalidJob
from kindling.core.records import build_record, revive_key
from kindling.core.status import DEAD, FAILED, QUEUED, REJECTED, REVIVABLE, SCHEDULED, SUCCEEDED, WAITING
from kindling.stores.dynamo import to_item
from kindling.tools.ops import OpsError, Stack
from kindling.tools.ops.query import get_job

__all__ = ["retry_job", "revive", "reopen_chord", "chord_member", "refuse_settled", "find_in_dlq", "RetryRefused",
           "HISTORY", "message_problem", "trusted_job_id"]

HISTORY = 20  # earlier generations kept in the revive ledger
DEFAULT_TTL_S = 14 * 86_400  # the queues' retention: a revived record outlives its message


class RetryRefused(OpsError):
    """The job cannot be retried as asked (its status, or no message to send)."""


def retry_job(stack: Stack, job_id: str, *, search: int = 1000, queue: str | None = None) -> dict:
    """Send job ``job_id`` again under its own id; revive it first if it is ``dead``.

    A job goes back to the queue it came from: its message is looked for in the dead-letter
    queue of ``queue`` (a name, as routed: ``default`` or one of ``stack.queues``), else in
    each of the deployment's in turn (:meth:`Stack.every_queue`), and sent to the queue whose
    DLQ held it. A ``rejected`` job is sent from its record, which does not say where it came
    from: to ``queue``, to the jobs queue when there are no named queues, else refused.

    Returns what was done: ``{"id", "previous_status", "generation", "message_id", "source",
    "queue"}`` (``source``: ``dlq`` or ``record``; ``queue``: the name it was sent to). Raises
    :class:`RetryRefused` with the reason when the job cannot be retried. ``search`` bounds how
    many messages are looked at in each DLQ.
    """
    record = get_job(stack, job_id)
    status = record.get("status") if record else None
    refuse_settled(job_id, record)
    if status == REJECTED and str((record.get("error") or {}).get("message", "")).startswith("signature:"):
        raise RetryRefused(f"job {job_id} was rejected for its signature ({record['error']['message']}): kindling "
                           "does not send again a body it cannot verify; its producer must send it, signed")
    if status == REJECTED and record.get("raw") is not None:
        body = record["raw"]
        if "raw" in record.get("truncated", {}):
            raise RetryRefused(f"job {job_id}: its recorded body was cut to fit the record; it cannot be resent")
        if queue is None and stack.queues:
            names = ", ".join(["default", *stack.queues])
            raise RetryRefused(f"job {job_id} was rejected and its record does not say which queue it came from: "
                               f"pass --queue NAME ({names})")
        target = stack.on_queue(queue or "default")
        if target.need_queue().endswith(".fifo"):
            raise RetryRefused(f"job {job_id} was rejected and its record does not keep its FIFO message group: "
                               "send it again with its group (Call(..., group=...))")
        message = _resend_message(target, job_id, body)
        reopen_chord(stack, body)
        message_id = _send(target, job_id, message)
        return {"id": job_id, "previous_status": status, "generation": record.get("generation", 1),
                "message_id": message_id, "source": "record", "queue": target.queue_name}
    if status == REJECTED:
        raise RetryRefused(f"job {job_id} was rejected and its record holds no body to send again")

    views = [stack.on_queue(queue)] if queue else stack.every_queue() or [stack]  # [stack]: need_queue says why
    looked: list[tuple[Stack, list[dict]]] = []
    found: list[dict] = []
    home = views[0]
    try:
        for home in views:
            found, others = find_in_dlq(home, job_id, search=search)
            looked.append((home, others))
            if found:
                break
        if not found:
            seen = sum(len(others) for _, others in looked)
            where = "the dead-letter queue" + ("s" if len(views) > 1 else "") + " of " + ", ".join(
                repr(v.queue_name) for v in views)
            if status == DEAD:
                raise RetryRefused(f"job {job_id} is dead but its message is not in {where} (looked at {seen} "
                                   "messages): it was moved or deleted, or is past the queue's retention")
            if status == QUEUED:
                raise RetryRefused(f"job {job_id} was already sent again (generation {record['generation']}) and "
                                   "waits for a worker")
            raise RetryRefused(f"job {job_id}: no record and no message in {where} (looked at {seen}): it is "
                               "queued or running, or unknown")
        # Nothing in a message is acted on before its signature is checked: its id, its
        # chord, the job sent again. Refused ones stay in the DLQ (released below).
        problems = {m["MessageId"]: message_problem(home, m) or (
            None if trusted_job_id(m) == job_id else f"its message {m['MessageId']} names job {trusted_job_id(m)}")
            for m in found}
        trusted = [m for m in found if problems[m["MessageId"]] is None]
        looked.append((home, [m for m in found if problems[m["MessageId"]] is not None]))
        found = trusted
        if not found:
            raise RetryRefused(f"job {job_id}: " + "; ".join(dict.fromkeys(p for p in problems.values() if p)))
        group = found[0].get("Attributes", {}).get("MessageGroupId")  # a FIFO queue's message
        # Built (and signed) before anything changes: a job that cannot be sent is not revived.
        message = _resend_message(home, job_id, found[0]["Body"], group=group)
        # The worker records an outcome before it moves the message, so the record read
        # before the search may predate a death the search then found: act on it as it is now.
        record = get_job(stack, job_id)
        status = record.get("status") if record else None
        refuse_settled(job_id, record)
        generation = record["generation"] if record else 1
        if status in REVIVABLE:
            generation = revive(stack, record)
        reopen_chord(stack, found[0]["Body"])  # before the send: its count must find the chord open
        message_id = _send(home, job_id, message)  # the DLQ message is deleted only once SQS has this one
        _delete(home, found)
        found = []
    finally:
        _release(home, found)
        for view, others in looked:
            _release(view, others)
    return {"id": job_id, "previous_status": status, "generation": generation, "message_id": message_id,
            "source": "dlq", "queue": home.queue_name}


def refuse_settled(job_id: str, record: dict | None) -> None:
    """Refuse a job whose record says a retry would not run it: succeeded, or failed or
    scheduled and back on its queue."""
    status = record.get("status") if record else None
    if status == SUCCEEDED:
        raise RetryRefused(f"job {job_id} already succeeded; a new run would be skipped as a duplicate "
                           "(enqueue it under a new id to run it again)")
    if status == FAILED:
        raise RetryRefused(f"job {job_id} failed attempt {record.get('attempts')} and is back on the queue: "
                           "it runs again by itself")
    if status == SCHEDULED:
        from kindling.tools.ops.fmt import when

        raise RetryRefused(f"job {job_id} is scheduled: due {when(record.get('due_at'))} (UTC); it runs by itself "
                           "then (revoke it to cancel it)")


def revive(stack: Stack, record: dict, *, now_ms: int | None = None) -> int:
    """Replace ``record`` (as read: a ``dead`` job) with a ``queued`` one of the next
    generation, and count it in the job's revive ledger, in one transaction. Returns the
    new generation; raises :class:`RetryRefused` if the stored record is no longer the
    one read (a worker or another operator got there first)."""
    job_id = record["id"]
    if record.get("status") not in REVIVABLE:
        raise RetryRefused(f"job {job_id} is {record.get('status')}, not dead: nothing to revive")
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    generation = int(record.get("generation") or 1)
    ttl_s = DEFAULT_TTL_S
    if record.get("expires_at") and record.get("finished_at"):
        ttl_s = max(DEFAULT_TTL_S, int(record["expires_at"]) - int(record["finished_at"]) // 1000)
    queued = build_record(key=job_id, task=record.get("task"), status=QUEUED, attempts=0, started_at=now_ms,
                          finished_at=now_ms, ttl_s=ttl_s, trace_id=record.get("trace_id"),
                          generation=generation + 1)
    error = record.get("error") or {}
    summary = {"generation": generation, "status": record["status"], "attempts": record.get("attempts", 0),
               "finished_at": record.get("finished_at", 0),
               "error": {"type": error.get("type", ""), "message": str(error.get("message", ""))[:1000]},
               "revived_at": now_ms}
    history = (list(record.get("previous") or []) + [summary])[-HISTORY:]
    ledger = {"id": revive_key(job_id), "job_id": job_id, "generation": generation + 1, "revived_at": now_ms,
              "history": history, "expires_at": queued.get("expires_at", now_ms // 1000 + ttl_s)}
    ledger_condition = "attribute_not_exists(#i) OR #g = :g" if generation > 1 else "attribute_not_exists(#i)"
    ledger_values = {":g": {"N": str(generation)}} if generation > 1 else {}
    try:
        stack.dynamodb.transact_write_items(TransactItems=[
            {"Put": {"TableName": stack.table, "Item": to_item(queued),
                     "ConditionExpression": "#s = :dead AND #f = :f",
                     "ExpressionAttributeNames": {"#s": "status", "#f": "finished_at"},
                     "ExpressionAttributeValues": {":dead": {"S": DEAD},
                                                   ":f": {"N": str(record.get("finished_at", 0))}}}},
            {"Put": {"TableName": stack.table, "Item": to_item(ledger), "ConditionExpression": ledger_condition,
                     "ExpressionAttributeNames": {"#i": "id", **({"#g": "generation"} if ledger_values else {})},
                     **({"ExpressionAttributeValues": ledger_values} if ledger_values else {})}},
        ])
    except stack.dynamodb.exceptions.TransactionCanceledException as exc:
        now = get_job(stack, job_id)
        raise RetryRefused(f"job {job_id} changed while it was being revived (now {now and now.get('status')}, "
                           f"generation {now and now.get('generation')}): look again before retrying") from exc
    return generation + 1


def chord_member(body: str | bytes) -> tuple[str, str] | None:
    """``(the chord record's key, the member's index)`` of a job sent again, if it is a
    chord's member (its envelope's ``parent``); else ``None``."""
    from kindling.core.records import chord_key

    try:
        parent = decode_job(body).parent
    except InvalidJob:
        return None
    return (chord_key(parent["id"]), str(parent["index"])) if parent else None


def reopen_chord(stack: Stack, body: str | bytes) -> bool:
    """Take a chord member that is sent again off its chord's ``dead`` members; once none
    is left the chord is ``waiting`` again (its ``error`` removed), so the member's next
    count can complete it and send the callback. Returns whether the chord is open again.

    Called before the member is sent: a count that ran first would still find the chord
    dead. Two conditional updates, each harmless to repeat, so a retry that stops between
    them is finished by running it again; a member that dies again fails the chord again.
    Celery's chord stays failed; kindling's revive is an operator's explicit decision to
    run the member again, so its chord follows it.
    """
    member = chord_member(body)
    if member is None or not stack.table:
        return False
    key, index = member
    failed = stack.dynamodb.exceptions.ConditionalCheckFailedException
    with contextlib.suppress(failed):  # not one of the chord's dead members (or no chord record)
        stack.dynamodb.update_item(
            TableName=stack.table, Key={"id": {"S": key}}, UpdateExpression="DELETE #dead :i",
            ConditionExpression="contains(#dead, :index)", ExpressionAttributeNames={"#dead": "dead"},
            ExpressionAttributeValues={":i": {"SS": [index]}, ":index": {"S": index}})
    try:
        stack.dynamodb.update_item(
            TableName=stack.table, Key={"id": {"S": key}}, UpdateExpression="SET #st = :waiting REMOVE #err",
            ConditionExpression="attribute_not_exists(#dead) AND #st = :dead",
            ExpressionAttributeNames={"#dead": "dead", "#st": "status", "#err": "error"},
            ExpressionAttributeValues={":waiting": {"S": WAITING}, ":dead": {"S": DEAD}})
    except failed:  # another member still fails it, or it was not dead
        return False
    return True


def find_in_dlq(stack: Stack, job_id: str, *, search: int = 1000, hide_s: int = 60) -> tuple[list[dict], list[dict]]:
    """Messages of ``job_id`` in the dead-letter queue, and the others received meanwhile.

    SQS cannot look a message up, so this receives (hiding what it received for ``hide_s``)
    until it finds the job, has seen ``search`` messages, or the queue has nothing more to
    give. The caller releases the others (:func:`_release`)."""
    found: list[dict] = []
    others: list[dict] = []
    seen: set[str] = set()
    while not found and len(seen) < search:
        messages = stack.sqs.receive_message(
            QueueUrl=stack.dlq_url, MaxNumberOfMessages=10, WaitTimeSeconds=stack.receive_wait_s,
            VisibilityTimeout=hide_s, MessageAttributeNames=["All"], AttributeNames=["All"]).get("Messages", [])
        fresh = [m for m in messages if m["MessageId"] not in seen]
        if not fresh:
            break
        for m in fresh:
            seen.add(m["MessageId"])
            (found if message_job_id(m) == job_id else others).append(m)
    return found, others


def message_job_id(message: dict) -> str | None:
    """The job id of a DLQ message: the worker's ``kindling_job_id`` attribute, else the body's."""
    attribute = (message.get("MessageAttributes") or {}).get(JOB_ID_ATTRIBUTE)
    if attribute and attribute.get("StringValue"):
        return attribute["StringValue"]
    try:
        data = codec.loads(message.get("Body") or "")
    except ValueError:
        return None
    return data.get("id") if isinstance(data, dict) and isinstance(data.get("id"), str) else None


def message_problem(stack: Stack, message: dict) -> str | None:
    """Why an operator tool must not act on ``message``, received from the dead-letter queue
    of ``stack``'s queue (read its job id, chain or chord from the body, revive its job, send
    it again), or ``None`` if it may.

    With the signing keys (``KINDLING_SIGNING_SECRET``), its signature must pass the check the
    worker of that queue makes. Without them, a message carrying a signature is refused: it
    can be neither checked nor signed again, and an unsigned copy would be rejected by the
    worker, leaving the job ``queued`` for ever. An unsigned message without the keys is a
    deployment that does not sign."""
    from kindling.core import jobsig

    attribute = (message.get("MessageAttributes") or {}).get(jobsig.ATTRIBUTE) or {}
    signature = attribute.get("StringValue")
    if stack.signing is None:
        if signature:
            return ("its message is signed, and this operator cannot sign a job or check a signature: set "
                    "KINDLING_SIGNING_SECRET to the deployment's signing secret (secretsmanager:GetSecretValue "
                    "on it); the message stays in the dead-letter queue")
        return None
    problem = stack.signature_problem(stack.need_queue(), message.get("Body") or "", signature)
    if problem:
        return f"its message {message.get('MessageId')} in the dead-letter queue fails the signature check " \
               f"({problem}); it stays there"
    return None


def trusted_job_id(message: dict) -> str | None:
    """The job id of a DLQ message :func:`message_problem` accepted: its (checked) body's,
    never the ``kindling_job_id`` attribute, which nothing signs."""
    try:
        data = codec.loads(message.get("Body") or "")
    except ValueError:
        return None
    return data.get("id") if isinstance(data, dict) and isinstance(data.get("id"), str) else None


def _resend_message(stack: Stack, job_id: str, body: str, *, group: str | None = None) -> tuple[str, dict]:
    """The message that sends the job in ``body`` again: the whole envelope as it was (id,
    arguments or their S3 pointer, options, chain, chord membership) with a new
    ``enqueued_at``, in its FIFO message ``group`` if it had one, signed when the deployment
    signs. Raises :class:`RetryRefused` (or :class:`OpsError`: the keys unreadable) first."""
    from kindling.core.envelope import encode_job, now_ms, replace
    from kindling.producer.client import _fifo_options

    try:
        job = decode_job(body)
        again = replace(job, enqueued_at=now_ms())
    except InvalidJob as exc:
        raise RetryRefused(f"job {job_id}: its message is not a job this kindling can send ({exc.reason})") from None
    if job.id != job_id:
        raise RetryRefused(f"job {job_id}: its message names job {job.id}")
    body = encode_job(again).decode()
    options = {**(_fifo_options(again, group) if group else {}), **stack.signature_attributes(stack.need_queue(), body)}
    return body, options


def _send(stack: Stack, job_id: str, message: tuple[str, dict]) -> str:
    """Send ``message`` (:func:`_resend_message`) with the caller's X-Ray trace, through the
    producer's pipeline (:mod:`kindling.shared.sqs_send`); the new message's id."""
    from kindling.shared import sqs_send

    body, options = message
    accepted, failed = sqs_send.send(stack.sqs, stack.need_queue(), [(job_id, body, options)],
                                     max_bytes=len(body.encode()), concurrency=1)
    if job_id not in accepted:
        raise RetryRefused(f"job {job_id}: queue {stack.queue_name!r} did not accept it ({failed.get(job_id)}); its "
                           "message stays in the dead-letter queue: run the retry again")
    return accepted[job_id]


def _delete(stack: Stack, messages: list[dict]) -> None:
    for start in range(0, len(messages), 10):
        chunk = messages[start:start + 10]
        stack.sqs.delete_message_batch(QueueUrl=stack.dlq_url, Entries=[
            {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(chunk)])


def _release(stack: Stack, messages: list[dict]) -> None:
    """Make received messages visible again at once (best effort: else after ``hide_s``)."""
    for start in range(0, len(messages), 10):
        chunk = messages[start:start + 10]
        with contextlib.suppress(Exception):  # else they come back after their visibility timeout
            stack.sqs.change_message_visibility_batch(QueueUrl=stack.dlq_url, Entries=[
                {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                for n, m in enumerate(chunk)])
