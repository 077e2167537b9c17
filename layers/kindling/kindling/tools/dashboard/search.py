"""Finding jobs for the dashboard: by task, status, time range and error text, a page at a time.

A search reads index *streams*: one index value of one shard (``by_status`` for a status
other than ``succeeded``, ``by_task`` for a task, ``chord#<n>`` of ``by_status`` for chord
records), each a DynamoDB ``Query`` newest first within the time range. A page merges the
streams newest first, keeping each stream's own order, and takes ``page_size`` records; the
token of the next page holds, per stream, the key to start after (DynamoDB's
``ExclusiveStartKey``: the last record taken, or where its reading stopped) or that it is
done. So a page costs at most ``page_size`` matches per stream, and each stream's reading
is bounded (:data:`MAX_READ`) when a filter skips most of what it reads.

Filters: a task with a status is the status's index filtered by task (``succeeded``: the
task's index filtered by status); error text is ``contains`` on the error's type and message
(case-sensitive, as DynamoDB compares), so it reads the statuses that have an error.
"""

from __future__ import annotations

import base64
import binascii

from kindling.core import codec
from kindling.core.records import CHORD_INDEX, index_shards
from kindling.core.status import BY_STATUS, RECORDED, SUCCEEDED
from kindling.stores.dynamo import from_item
from kindling.tools.ops import OpsError, Stack

__all__ = ["search", "STATUSES", "CHORD", "MAX_READ"]

CHORD = "chord"
"""The page's word for chord records (their own index value; their statuses are status.CHORD_STATUSES)."""
STATUSES = (*sorted(RECORDED), CHORD)
"""Every status the page filters by: the recorded ones (status.py) and chords."""
MAX_READ = 2000
"""Records one stream reads for one page when a filter skips them; its token resumes there."""
_DONE = 0


class _Stream:
    __slots__ = ("key", "index", "attr", "value", "filters", "contains")

    def __init__(self, index: str, attr: str, value: str, filters: dict[str, str], contains: str | None):
        self.key = f"{index}|{value}"
        self.index, self.attr, self.value, self.filters, self.contains = index, attr, value, filters, contains


def plan(*, task: str | None, status: str | None, error: str | None, tasks: list[str]) -> list[_Stream]:
    """The index streams a search reads."""
    if status and status not in STATUSES:
        raise OpsError(f"unknown status {status!r}: one of {', '.join(STATUSES)}")
    streams: list[_Stream] = []

    def add(index: str, value: str, filters: dict[str, str]) -> None:
        attr = "task_shard" if index == "by_task" else "status_shard"
        for shard in range(index_shards(index)):
            streams.append(_Stream(index, attr, f"{value}#{shard}", filters, error))

    if status == CHORD:
        add("by_status", CHORD_INDEX, {})
    elif status == SUCCEEDED or (task and not status and not error):
        if error and status == SUCCEEDED:
            return []  # a succeeded job has no error
        names = [task] if task else list(tasks)
        for name in names:
            add("by_task", name, {"status": status} if status else {})
    elif status:
        add("by_status", status, {"task": task} if task else {})
    else:  # every status with an error; and, without error text, succeeded ones per known task
        for s in sorted(BY_STATUS):
            add("by_status", s, {"task": task} if task else {})
        if not error:
            add("by_status", CHORD_INDEX, {})
            for name in ([task] if task else tasks):
                add("by_task", name, {"status": SUCCEEDED})
    return streams


def search(stack: Stack, *, task: str | None = None, status: str | None = None, error: str | None = None,
           since_ms: int = 0, until_ms: int, page_size: int = 50, token: str | None = None,
           tasks: list[str] = (), pool=None) -> dict:
    """One page: ``{"items": [records, newest first], "next": token or None, "streams": n}``.
    ``pool`` (an executor) reads the streams in parallel."""
    if not 1 <= page_size <= 500:
        raise OpsError("page size: 1-500")
    streams = plan(task=task, status=status, error=error, tasks=list(tasks))
    cursors = _decode(token)
    heads: dict[str, list[dict]] = {}
    after: dict[str, object] = {}  # where a stream's reading stopped: a start key, or _DONE
    for s in streams:  # a start key is the stream's own: its index key, finish time and id
        start = cursors.get(s.key)
        if start not in (None, _DONE) and not (
                isinstance(start, dict) and set(start) == {"id", s.attr, "finished_at"}
                and start[s.attr] == {"S": s.value} and set(start["id"]) == {"S"}
                and set(start["finished_at"]) == {"N"}):
            raise OpsError("a page token this search did not give")
    todo = [s for s in streams if cursors.get(s.key) != _DONE]
    mapper = pool.map if pool is not None else map
    for s, (items, stop) in zip(todo, mapper(lambda s: _read(stack, s, cursors.get(s.key), since_ms, until_ms,
                                                              page_size), todo), strict=True):
        heads[s.key], after[s.key] = items, stop
    # k-way merge, newest first, each stream in its own order
    taken: list[tuple[dict, _Stream]] = []
    pos = dict.fromkeys(heads, 0)
    by_key = {s.key: s for s in streams}
    while len(taken) < page_size:
        best = None
        for k, items in heads.items():
            if pos[k] < len(items):
                r = items[pos[k]]
                if best is None or (r.get("finished_at", 0), r["id"]) > (best[0].get("finished_at", 0), best[0]["id"]):
                    best = (r, k)
        if best is None:
            break
        taken.append((best[0], by_key[best[1]]))
        pos[best[1]] += 1
    nxt = dict(cursors)
    more = False
    for k, items in heads.items():
        s = by_key[k]
        if pos[k] < len(items):  # records read but not shown: start after the last one shown
            if pos[k]:
                nxt[k] = _start_key(s, items[pos[k] - 1])
            more = True
        else:
            nxt[k] = after[k]
            more |= after[k] != _DONE
    return {"items": [r for r, _ in taken], "next": _encode(nxt) if more else None, "streams": len(streams)}


def _read(stack: Stack, s: _Stream, start, since_ms: int, until_ms: int, want: int) -> tuple[list[dict], object]:
    names = {"#k": s.attr, "#f": "finished_at"}
    values: dict = {":k": {"S": s.value}, ":a": {"N": str(int(since_ms))}, ":b": {"N": str(int(until_ms))}}
    params: dict = {"TableName": stack.table, "IndexName": s.index, "ScanIndexForward": False,
                    "KeyConditionExpression": "#k = :k AND #f BETWEEN :a AND :b",
                    "ExpressionAttributeNames": names, "ExpressionAttributeValues": values}
    clauses = []
    for n, (name, want_value) in enumerate(s.filters.items()):
        names[f"#q{n}"], values[f":q{n}"] = name, {"S": want_value}
        clauses.append(f"#q{n} = :q{n}")
    if s.contains:
        names.update({"#e": "error", "#m": "message", "#t": "type"})
        values[":t"] = {"S": s.contains}
        clauses.append("(contains(#e.#m, :t) OR contains(#e.#t, :t))")
    if clauses:
        params["FilterExpression"] = " AND ".join(clauses)
    params["Limit"] = min(MAX_READ, max(want, 100)) if clauses else want
    if start:
        params["ExclusiveStartKey"] = start
    out: list[dict] = []
    read = 0
    while True:
        response = stack.dynamodb.query(**params)
        out += [from_item(item) for item in response.get("Items", [])]
        read += response.get("ScannedCount", 0)
        last = response.get("LastEvaluatedKey")
        if not last:
            return out, _DONE
        if len(out) >= want or read >= MAX_READ:
            return out, last
        params["ExclusiveStartKey"] = last


def _start_key(s: _Stream, record: dict) -> dict:
    return {"id": {"S": record["id"]}, s.attr: {"S": s.value}, "finished_at": {"N": str(int(record["finished_at"]))}}


def _encode(cursors: dict) -> str:
    return base64.urlsafe_b64encode(codec.dumps(cursors).encode()).decode().rstrip("=")


def _decode(token: str | None) -> dict:
    if not token:
        return {}
    try:
        value = codec.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, binascii.Error):
        raise OpsError("a page token this search did not give") from None
    if not isinstance(value, dict):
        raise OpsError("a page token this search did not give")
    return value

