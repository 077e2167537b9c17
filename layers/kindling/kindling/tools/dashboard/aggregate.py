"""The dashboard's charts, kept up to date incrementally from the results table's indexes.

An :class:`Aggregator` holds, for one time window, one small row per job that finished in
it (finish time, status, task, duration, queue wait): what ``by_status`` gives for every
status but ``succeeded``, and ``by_task`` (filtered to ``succeeded``) for each task known
(named at start, or seen in ``by_status``). Its first refresh reads the window; each later
one reads only the records that finished since the last, less :data:`OVERLAP_MS` (a batch
writes its records when it ends, so a record can land a little after its ``finished_at``),
and every :data:`REBUILD_S` it reads the whole window again (a record written later than
that, or one deleted, is right again after at most that long). The queries run in parallel,
one per index value and shard. A record replaced (a ``failed`` job that then succeeded, a
revived ``dead`` one) is one row by its id: the newest wins.

Per bucket of the window the summary gives counts by status and by task, throughput, and
per task the p50/p95/p99 of duration and queue wait; a bucket's figures are computed again
only when a row in it changed. Nothing here scans the table.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import chain

from kindling.core.records import index_shards
from kindling.core.status import BY_STATUS, QUEUED, RAN, RECORDED, SCHEDULED, SUCCEEDED
from kindling.tools.ops import Stack

__all__ = ["Aggregator", "summary", "percentile", "OVERLAP_MS", "REBUILD_S", "QUANTILES"]

OVERLAP_MS = 120_000
REBUILD_S = 300
QUANTILES = (50, 95, 99)
NO_TASK_INDEX_NOTE = ("Succeeded jobs are not charted: the results table has no by_task index. Deploy with "
                      "TaskIndex=true (and workers without KINDLING_TASK_INDEX=0) to chart them.")
CAP = 200_000  # rows read per index value and shard in one refresh: beyond, the counts are a lower bound
_PROJECTION = "#i, #s, #t, #f, #d, #e, #st"
_NAMES = {"#i": "id", "#s": "status", "#t": "task", "#f": "finished_at", "#d": "duration_ms", "#e": "enqueued_at",
          "#st": "started_at"}


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` percentile (0-100) by nearest rank; ``None`` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def _quantiles(ordered: list[float]) -> dict:
    """p50/p95/p99 by nearest rank of values already sorted."""
    if not ordered:
        return {f"p{q}": None for q in QUANTILES} | {"n": 0}
    n = len(ordered)
    return {f"p{q}": ordered[max(1, -(-n * q // 100)) - 1] for q in QUANTILES} | {"n": n}


class Aggregator:
    """The rows of one window, refreshed incrementally; :meth:`summary` reads them."""

    def __init__(self, stack: Stack, *, window_s: int = 3600, buckets: int = 30, tasks: list[str] = (),
                 workers: int = 8, clock=time.time):
        self.stack, self.window_s, self.buckets = stack, window_s, buckets
        self.step = max(1, window_s * 1000 // buckets)
        self.tasks: set[str] = set(tasks)
        self.rows: dict[str, tuple] = {}  # id -> (finished_at, status, task, duration_ms, wait_ms)
        self.by_bucket: dict[int, set[str]] = {}
        self.cache: dict[int, dict] = {}  # bucket start -> its figures
        self.seen_until = 0
        self.built_at = 0.0
        self.capped = False
        self.queries = 0
        self.clock = clock
        self._lock = threading.Lock()
        self.first_lock = threading.Lock()  # the server's first read of this window, once
        self.as_of = 0
        self.task_index = True  # until a Query finds the table has no by_task index (TaskIndex=false)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kindling-dashboard")

    # -- reading ---------------------------------------------------------------------------
    def refresh(self, now_ms: int | None = None) -> None:
        """Bring the rows up to ``now_ms``. The reads run outside the lock: :meth:`summary`
        answers from the rows as they stand meanwhile (one refresh at a time: the caller's)."""
        now_ms = int(self.clock() * 1000) if now_ms is None else now_ms
        since = now_ms - self.window_s * 1000
        full = not self.seen_until or self.clock() - self.built_at >= REBUILD_S
        start = since if full else max(since, self.seen_until - OVERLAP_MS)
        self.queries, capped_before = 0, self.capped and not full
        self.capped = False
        found = self._read([("by_status", "status_shard", s, None) for s in sorted(BY_STATUS)], start, now_ms)
        tasks = set(self.tasks)
        named = {r[3] for r in found if r[3]} - tasks
        found += self._successes(tasks, start, now_ms)
        if named:  # a task first seen now: its whole window
            found += self._successes(named, since, now_ms)
        with self._lock:
            if full:
                self.rows.clear()
                self.by_bucket.clear()
                self.cache.clear()
                self.built_at = self.clock()
            self.capped |= capped_before
            self.tasks |= named
            for row in found:
                self._put(row)
            self._expire(since)
            self.seen_until = self.as_of = now_ms

    def _successes(self, tasks: set[str], since: int, until: int) -> list[tuple]:
        """The tasks' succeeded jobs, from ``by_task``: none from a table without that index
        (the summary's ``note`` says so), which is asked once."""
        if not self.task_index or not tasks:
            return []
        from kindling.tools.ops.query import no_such_index

        try:
            return self._read([("by_task", "task_shard", t, SUCCEEDED) for t in sorted(tasks)], since, until)
        except Exception as exc:
            if not no_such_index(exc):
                raise
            self.task_index = False
            return []

    def _read(self, values: list[tuple], since: int, until: int) -> list[tuple]:
        jobs = [(index, attr, f"{value}#{shard}", status) for index, attr, value, status in values
                for shard in range(index_shards(index))]
        out: list[tuple] = []
        for part in self._pool.map(lambda j: self._query(*j, since, until), jobs):
            out += part
        return out

    def _query(self, index: str, attr: str, key: str, status: str | None, since: int, until: int) -> list[tuple]:
        names = dict(_NAMES, **{"#k": attr})
        values = {":k": {"S": key}, ":a": {"N": str(since)}, ":b": {"N": str(until)}}
        params = {"TableName": self.stack.table, "IndexName": index, "ProjectionExpression": _PROJECTION,
                  "KeyConditionExpression": "#k = :k AND #f BETWEEN :a AND :b",
                  "ExpressionAttributeNames": names, "ExpressionAttributeValues": values}
        if status:
            values[":want"] = {"S": status}
            params["FilterExpression"] = "#s = :want"
        rows: list[tuple] = []
        while True:
            self.queries += 1
            response = self.stack.dynamodb.query(**params)
            for item in response.get("Items", []):
                rows.append(_row(item))
            last = response.get("LastEvaluatedKey")
            if not last:
                return rows
            if len(rows) >= CAP:
                self.capped = True
                return rows
            params["ExclusiveStartKey"] = last

    def _bucket(self, finished_at: int) -> int:
        return finished_at - finished_at % self.step

    def _put(self, row: tuple) -> None:
        job_id, value = row[0], row[1:]
        old = self.rows.get(job_id)
        if old is not None:
            if old[0] > value[0]:
                return  # a newer record of this job is already here
            b = self._bucket(old[0])
            self.by_bucket.get(b, set()).discard(job_id)
            self.cache.pop(b, None)
        self.rows[job_id] = value
        b = self._bucket(value[0])
        self.by_bucket.setdefault(b, set()).add(job_id)
        self.cache.pop(b, None)

    def _expire(self, since: int) -> None:
        for b in [b for b in self.by_bucket if b + self.step <= since]:
            for job_id in self.by_bucket.pop(b):
                self.rows.pop(job_id, None)
            self.cache.pop(b, None)

    # -- figures ---------------------------------------------------------------------------
    def _figures(self, b: int) -> dict:
        fig = self.cache.get(b)
        if fig is not None:
            return fig
        by_status: dict[str, int] = {}
        by_task: dict[str, list] = {}
        for job_id in self.by_bucket.get(b, ()):
            finished, status, task, duration, wait = self.rows[job_id]
            by_status[status] = by_status.get(status, 0) + 1
            if task:
                t = by_task.setdefault(task, [0, [], [], {}])
                t[0] += 1
                t[3][status] = t[3].get(status, 0) + 1
                if status in RAN:
                    if duration is not None:
                        t[1].append(duration)
                    if wait is not None:
                        t[2].append(wait)
        for _, d, w, _ in by_task.values():  # sorted once here: the window's totals merge these runs
            d.sort()
            w.sort()
        fig = {"by_status": by_status,
               "by_task": {t: {"n": n, "duration": _quantiles(d), "wait": _quantiles(w), "durations": d, "waits": w,
                               "statuses": st} for t, (n, d, w, st) in by_task.items()}}
        self.cache[b] = fig
        return fig

    def summary(self, now_ms: int | None = None) -> dict:
        """The window's charts as of the last :meth:`refresh`."""
        now_ms = int(self.clock() * 1000) if now_ms is None else now_ms
        with self._lock:
            last = self._bucket(now_ms)
            starts = [last - (self.buckets - 1 - i) * self.step for i in range(self.buckets)]
            figs = [self._figures(b) for b in starts]
            tasks = sorted(self.tasks | {t for f in figs for t in f["by_task"]})
            statuses = sorted(RECORDED)
            by_status = {s: [f["by_status"].get(s, 0) for f in figs] for s in statuses}
            per_min = 60_000 / self.step
            per_task: dict[str, dict] = {}
            all_d: list[list[float]] = []
            all_w: list[list[float]] = []
            for t in tasks:
                cells = [f["by_task"].get(t) for f in figs]
                counts = [c["n"] if c else 0 for c in cells]
                # concatenated sorted runs: sorting them merges the runs (timsort), far from a full sort
                d = sorted(chain.from_iterable(c["durations"] for c in cells if c))
                w = sorted(chain.from_iterable(c["waits"] for c in cells if c))
                all_d.append(d)
                all_w.append(w)
                joint: dict[str, int] = {}
                for c in cells:
                    for st, n in (c["statuses"] if c else {}).items():
                        joint[st] = joint.get(st, 0) + n
                per_task[t] = {
                    "count": counts, "throughput": [round(n * per_min, 2) for n in counts],
                    "duration_ms": {f"p{q}": [c["duration"][f"p{q}"] if c else None for c in cells] for q in QUANTILES},
                    "queue_wait_ms": {f"p{q}": [c["wait"][f"p{q}"] if c else None for c in cells] for q in QUANTILES},
                    "total": {"jobs": sum(counts), "by_status": joint, "duration_ms": _quantiles(d),
                              "queue_wait_ms": _quantiles(w)},
                }
            # queued (a revive) and scheduled (received early) stand for no run yet: not finished
            finished = [sum(f["by_status"].get(s, 0) for s in statuses if s not in (QUEUED, SCHEDULED)) for f in figs]
            return {
                "now": now_ms, "since": starts[0], "window_s": self.window_s, "step_ms": self.step, "buckets": starts,
                "statuses": statuses, "by_status": by_status, "tasks": tasks,
                "by_task": {t: per_task[t]["count"] for t in tasks}, "per_task": per_task,
                "throughput": [round(n * per_min, 2) for n in finished],
                "jobs": sum(len(self.by_bucket.get(b, ())) for b in starts),
                "per_minute": round(sum(finished) * 60_000 / (self.step * self.buckets), 2),
                "duration_ms": _quantiles(sorted(chain.from_iterable(all_d))),
                "queue_wait_ms": _quantiles(sorted(chain.from_iterable(all_w))),
                "capped": self.capped, "queries": self.queries, "as_of": self.as_of,
                "note": None if self.task_index else NO_TASK_INDEX_NOTE,
            }

    def close(self) -> None:
        self._pool.shutdown(wait=False)


def summary(stack: Stack, tasks: list[str], *, window_s: int = 3600, buckets: int = 30,
            now_ms: int | None = None) -> dict:
    """One summary read now (``kindling info``): :meth:`Aggregator.summary`, and ``totals``,
    the jobs by status that finished in exactly ``[now - window_s, now]``."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    agg = Aggregator(stack, window_s=window_s, buckets=buckets, tasks=tasks, workers=4, clock=lambda: now_ms / 1000)
    try:
        agg.refresh(now_ms)
        out = agg.summary(now_ms)
        totals: dict[str, int] = dict.fromkeys(out["statuses"], 0)
        for row in agg.rows.values():
            totals[row[1]] = totals.get(row[1], 0) + 1
        out["totals"] = totals
        return out
    finally:
        agg.close()


def _row(item: dict) -> tuple:
    def num(name: str):
        v = item.get(name)
        return float(v["N"]) if v and "N" in v else None

    finished = int(num("finished_at") or 0)
    enqueued, started = num("enqueued_at"), num("started_at")
    wait = max(0.0, started - enqueued) if enqueued and started else None
    return (item["id"]["S"], finished, item["status"]["S"], item.get("task", {}).get("S", ""), num("duration_ms"),
            wait)
