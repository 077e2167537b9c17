"""Finding jobs: the results table's indexes, read shard by shard and merged.

Two global secondary indexes (template.yaml) sort records by ``finished_at``:

* ``by_status`` on ``status_shard`` (``<status>#<n>``, n below the deployment's
  ``KINDLING_STATUS_SHARDS``, 4 by default): every record but ``succeeded``
  ones (the index is sparse, so the common outcome costs one index write, not two). It
  projects the error, traceback included.
* ``by_task`` on ``task_shard`` (``<task>#<0-3>``): every record with a task name.

A listing queries every shard of one index value (``Query``, newest first, within a
time range, paging until it has ``limit`` records or the range is exhausted) and merges
them by ``finished_at``. A status and a task together read the smaller side: the status
index filtered by task (dead jobs are few), except for ``succeeded``, which only the task
index holds. Nothing here scans the table.

``by_task`` is optional (the template's ``TaskIndex``): a table deployed without it answers
a status (with or without a task), and a listing that needs it says so (:data:`NO_TASK_INDEX`).
"""

from __future__ import annotations

import re
import time

from kindling.core.records import index_shards, revive_key
from kindling.core.status import SUCCEEDED
from kindling.stores.dynamo import from_item
from kindling.tools.ops import OpsError, OpsUsageError, Stack

__all__ = ["list_jobs", "get_job", "fill_errors", "parse_since", "no_such_index", "NO_TASK_INDEX"]

NO_TASK_INDEX = ("listing {what} needs the results table's by_task index, which this table does not have: "
                 "deploy with TaskIndex=true (and run workers without KINDLING_TASK_INDEX=0; records written "
                 "while it was off are not in it). A status and a task together (--status dead --task NAME) "
                 "read the by_status index instead")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_since(text: str, now_ms: int | None = None) -> int:
    """``30s``, ``15m``, ``2h``, ``7d``, ``1w`` ago, or an ISO 8601 time, as epoch milliseconds."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if m:
        return now_ms - int(float(m.group(1)) * _UNITS[m.group(2)] * 1000)
    from datetime import UTC, datetime

    try:
        at = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise OpsUsageError(f"--since {text!r}: give a duration (30s, 15m, 2h, 7d, 1w) or an ISO 8601 time") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return int(at.timestamp() * 1000)


def list_jobs(stack: Stack, *, status: str | None = None, task: str | None = None, since_ms: int = 0,
              until_ms: int | None = None, limit: int = 50, page_size: int | None = None) -> list[dict]:
    """Records of jobs with ``status`` and/or ``task`` that finished in ``[since_ms, until_ms]``,
    newest first, at most ``limit`` (the index's projection: no result, and from
    ``by_task`` no error; :func:`fill_errors` adds those)."""
    if not status and not task:
        raise OpsUsageError("give --status or --task: listing every job would scan the table")
    if limit < 1:
        raise OpsUsageError("--limit must be at least 1")
    until_ms = int(time.time() * 1000) + 60_000 if until_ms is None else until_ms
    if status == SUCCEEDED or not status:
        index, attr, value = "by_task", "task_shard", task
        filters = {"status": status} if status else {}
    else:
        index, attr, value = "by_status", "status_shard", status
        filters = {"task": task} if task else {}
    if status == SUCCEEDED and not task:
        raise OpsError("succeeded jobs are listed per task (--task NAME): the by_status index leaves them out, "
                       "so that a succeeded job costs one index write")
    found: list[dict] = []
    for shard in range(index_shards(index)):
        try:
            found += _query(stack, index, attr, f"{value}#{shard}", since_ms, until_ms, limit, filters, page_size)
        except Exception as exc:
            if index == "by_task" and no_such_index(exc):
                what = f"{status} jobs of a task" if status else "jobs by task"
                raise OpsError(NO_TASK_INDEX.format(what=what)) from None
            raise
    found.sort(key=lambda r: (r.get("finished_at", 0), r.get("id", "")), reverse=True)
    return found[:limit]


def no_such_index(exc: Exception) -> bool:
    """DynamoDB's answer to a Query on an index the table lacks (a ValidationException;
    ResourceNotFoundException from moto)."""
    error = getattr(exc, "response", {}).get("Error", {})
    return error.get("Code") in ("ValidationException", "ResourceNotFoundException") and \
        "index" in str(error.get("Message", "")).lower()


def _query(stack: Stack, index: str, attr: str, key: str, since_ms: int, until_ms: int, limit: int,
           filters: dict[str, str], page_size: int | None) -> list[dict]:
    names = {"#k": attr, "#f": "finished_at"}
    values = {":k": {"S": key}, ":a": {"N": str(int(since_ms))}, ":b": {"N": str(int(until_ms))}}
    params = {"TableName": stack.table, "IndexName": index, "ScanIndexForward": False,
              "KeyConditionExpression": "#k = :k AND #f BETWEEN :a AND :b",
              "ExpressionAttributeNames": names, "ExpressionAttributeValues": values}
    if filters:
        clauses = []
        for n, (name, want) in enumerate(filters.items()):
            names[f"#q{n}"] = name
            values[f":q{n}"] = {"S": want}
            clauses.append(f"#q{n} = :q{n}")
        params["FilterExpression"] = " AND ".join(clauses)
    elif page_size is None:
        params["Limit"] = limit  # no filter: the first `limit` items of the range are the answer
    if page_size is not None:
        params["Limit"] = page_size
    out: list[dict] = []
    while True:
        response = stack.dynamodb.query(**params)
        out += [from_item(item) for item in response.get("Items", [])]
        last = response.get("LastEvaluatedKey")
        if not last or len(out) >= limit:
            return out[:limit]
        params["ExclusiveStartKey"] = last


def fill_errors(stack: Stack, records: list[dict]) -> list[dict]:
    """Add ``error`` to listed records that failed but came without it (``by_task`` does not
    project errors): one BatchGetItem per 100 records, of their errors only."""
    missing = [r["id"] for r in records if r.get("status") != SUCCEEDED and "error" not in r]
    errors: dict[str, dict] = {}
    for start in range(0, len(missing), 100):
        request = {stack.table: {"Keys": [{"id": {"S": i}} for i in missing[start:start + 100]],
                                 "ProjectionExpression": "#i, #e",
                                 "ExpressionAttributeNames": {"#i": "id", "#e": "error"}}}
        while request:
            response = stack.dynamodb.batch_get_item(RequestItems=request)
            for item in response.get("Responses", {}).get(stack.table, []):
                if "error" in item:
                    errors[item["id"]["S"]] = from_item(item)["error"]
            request = response.get("UnprocessedKeys") or {}
    return [dict(r, error=errors[r["id"]]) if r["id"] in errors else r for r in records]


def get_job(stack: Stack, job_id: str) -> dict | None:
    """The job's record (consistent read) with what its revives left: ``generation`` (1 for a
    job never revived) and ``previous`` (the earlier generations' outcomes, oldest first).
    ``None`` when there is no record and no revive."""
    keys = [{"id": {"S": job_id}}, {"id": {"S": revive_key(job_id)}}]
    items: dict[str, dict] = {}
    request = {stack.table: {"Keys": keys, "ConsistentRead": True}}
    while request:
        response = stack.dynamodb.batch_get_item(RequestItems=request)
        for item in response.get("Responses", {}).get(stack.table, []):
            items[item["id"]["S"]] = from_item(item)
        request = response.get("UnprocessedKeys") or {}
    record, ledger = items.get(job_id), items.get(revive_key(job_id))
    if record is None and ledger is None:
        return None
    record = dict(record or {"id": job_id, "status": None})
    record.setdefault("generation", ledger["generation"] if ledger else 1)
    record["previous"] = ledger.get("history", []) if ledger else []
    return record
