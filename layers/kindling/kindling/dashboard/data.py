"""What the dashboard shows, read from the results table's indexes (never a Scan).

A summary covers the jobs that *finished* in a time window, as their records stand now (a
job that failed and then succeeded counts once, as succeeded):

* ``by_status`` gives every record but ``succeeded`` ones: 4 statuses x 4 shards queries;
* ``by_task`` gives each named task's records, ``succeeded`` included: 4 queries per task.
  The index cannot list its task names without a scan, so succeeded jobs are charted for
  the tasks the dashboard is given (``--tasks`` / ``--task``) and for every task seen failing.

Each query reads at most ``cap`` records (newest first); a summary that hit a cap says so.
"""

from __future__ import annotations

import contextlib
import time

from kindling.ops import Stack
from kindling.ops.query import get_job, list_jobs
from kindling.status import BY_STATUS, DEAD, FAILED, QUEUED, REJECTED, SUCCEEDED

__all__ = ["summary", "failures", "job", "percentile"]

INDEXED = tuple(sorted(BY_STATUS))
RAN = (SUCCEEDED, FAILED, DEAD)  # outcomes of a run: they have a duration and a queue wait


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` percentile (0-100) by nearest rank; ``None`` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def summary(stack: Stack, tasks: list[str], *, window_s: int = 3600, buckets: int = 30, cap: int = 5000,
            now_ms: int | None = None) -> dict:
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    since = now_ms - window_s * 1000
    records: dict[str, dict] = {}
    capped = False
    for status in INDEXED:
        found = list_jobs(stack, status=status, since_ms=since, until_ms=now_ms, limit=cap)
        capped |= len(found) >= cap
        for r in found:
            records[r["id"]] = r
    names = sorted(set(tasks) | {r.get("task") for r in records.values() if r.get("task")})
    for name in names:
        found = list_jobs(stack, task=name, since_ms=since, until_ms=now_ms, limit=cap)
        capped |= len(found) >= cap
        for r in found:
            records.setdefault(r["id"], r)
    step = max(1, window_s * 1000 // buckets)
    starts = [since + i * step for i in range(buckets)]
    by_status: dict[str, list[int]] = {s: [0] * buckets for s in (SUCCEEDED, *INDEXED)}
    by_task: dict[str, list[int]] = {n: [0] * buckets for n in names}
    durations, waits = [], []
    for r in records.values():
        i = min(buckets - 1, max(0, (int(r.get("finished_at", since)) - since) // step))
        status = r.get("status")
        if status in by_status:
            by_status[status][i] += 1
        if r.get("task") in by_task and status != QUEUED:
            by_task[r["task"]][i] += 1
        if status in RAN:
            if r.get("duration_ms") is not None:
                durations.append(float(r["duration_ms"]))
            if r.get("enqueued_at") and r.get("started_at"):
                waits.append(max(0, int(r["started_at"]) - int(r["enqueued_at"])))
    finished = [sum(by_status[s][i] for s in (SUCCEEDED, FAILED, DEAD, REJECTED)) for i in range(buckets)]
    per_min = 60_000 / step
    backlog = {}
    if stack.queue_url:
        backlog["queue"] = stack.depth(stack.queue_url)
        with contextlib.suppress(Exception):  # no redrive policy: no DLQ to show
            backlog["dlq"] = stack.depth(stack.dlq_url)
    return {
        "now": now_ms, "since": since, "window_s": window_s, "step_ms": step, "buckets": starts,
        "by_status": by_status, "by_task": by_task, "tasks": names,
        "throughput": [round(n * per_min, 2) for n in finished],
        "jobs": len(records), "per_minute": round(sum(finished) * 60_000 / (window_s * 1000), 2),
        "duration_ms": {"p50": percentile(durations, 50), "p99": percentile(durations, 99), "n": len(durations)},
        "queue_wait_ms": {"p50": percentile(waits, 50), "p99": percentile(waits, 99), "n": len(waits)},
        "backlog": backlog, "capped": capped,
    }


def failures(stack: Stack, *, limit: int = 20, since_ms: int = 0) -> list[dict]:
    """The latest dead, failed and rejected jobs, newest first, errors and tracebacks included."""
    found: list[dict] = []
    for status in (DEAD, FAILED, REJECTED):
        found += list_jobs(stack, status=status, since_ms=since_ms, limit=limit)
    found.sort(key=lambda r: (r.get("finished_at", 0), r["id"]), reverse=True)
    return found[:limit]


def job(stack: Stack, job_id: str) -> dict | None:
    return get_job(stack, job_id)
