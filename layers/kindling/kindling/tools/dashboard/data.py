"""What the dashboard's job and chord pages show, read by key (``BatchGetItem``, never a Scan).

* :func:`job` - a job's record and earlier generations (:func:`kindling.tools.ops.query.get_job`),
  its arguments' preview (``args_preview``, kept in the record), and where it stands in a
  chain or a chord, with its neighbours' statuses.
* :func:`chord` - a chord by its handle's id (``GroupHandle.id``): its record, members and
  callback.
* :func:`lookup` - what the page's search box finds for an id: a job, else a chord.

Ids are derived (:mod:`kindling.core.envelope`): a chord's member ``i`` is ``<chord>.<i>`` and its
callback ``<chord>.then``; a chain's next step is ``next_id`` of the step before, its first
step the stem of every later step's id. So a chain is read forward from its first step, at
most :data:`MAX_CHAIN` steps, in one ``BatchGetItem``.
"""

from __future__ import annotations

from kindling.core.envelope import callback_id, chain_first, member_id, next_id
from kindling.core.records import CHORD_PREFIX, chord_key
from kindling.stores.dynamo import from_item
from kindling.tools.ops import Stack
from kindling.tools.ops.query import get_job

__all__ = ["job", "chord", "lookup", "MAX_CHAIN", "MAX_MEMBERS"]

MAX_CHAIN = 25
MAX_MEMBERS = 300


def _brief(stack: Stack, ids: list[str]) -> dict[str, dict]:
    """``{id: {id, status, task, finished_at}}`` for the ids that have a record."""
    found: dict[str, dict] = {}
    names = {"#i": "id", "#s": "status", "#t": "task", "#f": "finished_at"}
    for start in range(0, len(ids), 100):
        request = {stack.table: {"Keys": [{"id": {"S": i}} for i in dict.fromkeys(ids[start:start + 100])],
                                 "ProjectionExpression": "#i, #s, #t, #f", "ExpressionAttributeNames": names}}
        while request:
            response = stack.dynamodb.batch_get_item(RequestItems=request)
            for item in response.get("Responses", {}).get(stack.table, []):
                found[item["id"]["S"]] = from_item(item)
            request = response.get("UnprocessedKeys") or {}
    return found


def job(stack: Stack, job_id: str) -> dict | None:
    """The job's record with ``generation``/``previous`` (its revives), ``chain`` (the steps,
    when it is one of several) and ``chord`` (its chord's summary, when it is a member or the
    callback). ``None`` when there is no record."""
    record = get_job(stack, job_id)
    if record is None:
        return None
    ids = [chain_first(job_id)]
    for _ in range(MAX_CHAIN - 1):
        ids.append(next_id(ids[-1]))
    found = _brief(stack, ids)
    steps = []
    for i in ids:
        if i not in found:
            break
        steps.append(found[i])
    if len(steps) > 1 and any(s["id"] == job_id for s in steps):
        record["chain"] = steps
    head, _, tail = job_id.rpartition(".")
    if head and (tail.isdigit() or tail == "then"):
        c = _chord_record(stack, head)
        if c is not None:
            record["chord"] = {"id": head, "status": c.get("status"), "size": c.get("size"),
                               "index": int(tail) if tail.isdigit() else None, "callback": tail == "then"}
    return record


def _chord_record(stack: Stack, chord_id: str) -> dict | None:
    response = stack.dynamodb.get_item(TableName=stack.table, Key={"id": {"S": chord_key(chord_id)}},
                                       ConsistentRead=True)
    item = response.get("Item")
    return from_item(item) if item else None


def chord(stack: Stack, chord_id: str) -> dict | None:
    """A chord by its id (its handle's ``id``; ``chord#<id>`` is taken too): ``{"id",
    "status", "size", "done", "dead", "error", "updated_at", "completed_at", "sent_at",
    "members": [{index, id, status, task, finished_at}], "callback": {...} or None}``."""
    if chord_id.startswith(CHORD_PREFIX):
        chord_id = chord_id[len(CHORD_PREFIX):]
    c = _chord_record(stack, chord_id)
    if c is None:
        return None
    size = int(c.get("size") or 0)
    shown = min(size, MAX_MEMBERS)
    cb = c.get("callback") or callback_id(chord_id)
    found = _brief(stack, [member_id(chord_id, i) for i in range(shown)] + [cb])
    dead = {int(i) for i in c.get("dead") or []}
    done = {int(i) for i in c.get("done") or []}
    members = [dict(found.get(member_id(chord_id, i)) or {"id": member_id(chord_id, i), "status": None},
                    index=i, counted=i in done, failed_chord=i in dead) for i in range(shown)]
    return {"id": chord_id, "key": chord_key(chord_id), "status": c.get("status"), "size": size,
            "done": len(done), "dead": sorted(dead), "error": c.get("error"), "updated_at": c.get("updated_at"),
            "completed_at": c.get("completed_at"), "sent_at": c.get("sent_at"), "members": members,
            "members_shown": shown, "callback": found.get(cb) or ({"id": cb, "status": None} if c.get("callback")
                                                                  else None)}


def lookup(stack: Stack, text: str) -> dict | None:
    """``{"kind": "job"|"chord", "id"}`` for what the search box was given, or ``None``."""
    text = text.strip()
    if not text.startswith(CHORD_PREFIX) and get_job(stack, text) is not None:
        return {"kind": "job", "id": text}
    if _chord_record(stack, text[len(CHORD_PREFIX):] if text.startswith(CHORD_PREFIX) else text) is not None:
        return {"kind": "chord", "id": text.removeprefix(CHORD_PREFIX)}
    return None
