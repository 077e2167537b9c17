"""How long does the dashboard's refresh take on a results table of 100,000 records?

    eval "$(infra/localstack/ctl env)"
    .venv/bin/python infra/bench/dashboard_refresh.py [--records 100000] [--tasks 15] [--refreshes 10]

Makes a results table shaped as template.yaml's (key ``id``, the ``by_task`` and
``by_status`` indexes with their projections) on a loopback endpoint (LocalStack), writes
``--records`` records with ``BatchWriteItem`` (records.build_record, spread over the last
hour, ``--tasks`` tasks, mostly succeeded, some failed, dead, rejected and revoked), serves
the dashboard on 127.0.0.1 and times the page's refresh: the two requests it sends every
few seconds on the overview (``/api/summary`` and the first page of ``/api/search``), sent
at once as the page sends them. The first load reads the window; each later refresh comes
after ``--live`` new records were written (traffic goes on) and past the server's one-second
sharing of reads. Prints the first load, every refresh, and their median; then how long the
background reads that keep those answers fresh take, and a new search read in its request. A measurement,
not a test: nothing here asserts a duration. The table is deleted at the end.
"""

from __future__ import annotations

import argparse
import http.client
import random
import statistics
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "layers/kindling"))

import boto3  # noqa: E402
from kindling.core.envelope import new_job  # noqa: E402
from kindling.core.records import build_record, revoked_record  # noqa: E402
from kindling.stores.dynamo import to_item  # noqa: E402
from kindling.tools.dashboard import make_server  # noqa: E402
from kindling.tools.localcloud import results_table_schema  # noqa: E402
from kindling.tools.ops import Stack  # noqa: E402

STATUSES = [("succeeded", 90), ("failed", 4), ("dead", 3), ("rejected", 2), ("revoked", 1)]


def create_table(ddb, name: str) -> None:
    """The results table as template.yaml deploys it (by_task and by_status indexes)."""
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     **results_table_schema(Path(__file__).resolve().parents[2] / "template.yaml"))
    ddb.get_waiter("table_exists").wait(TableName=name)


def records(n: int, tasks: list[str], now_ms: int, span_ms: int, rng: random.Random) -> list[dict]:
    names, weights = zip(*STATUSES, strict=True)
    out = []
    for _ in range(n):
        task = rng.choice(tasks)
        status = rng.choices(names, weights)[0]
        finished = now_ms - rng.randrange(span_ms)
        if status == "revoked":
            out.append(revoked_record(uuid.uuid4().hex, task, at_ms=finished))
            continue
        duration = rng.lognormvariate(4, 1)
        job = new_job(task, [rng.randrange(1000), "x" * rng.randrange(40)])
        job.enqueued_at = int(finished - duration - rng.randrange(2000))
        error = None if status == "succeeded" else {"type": "RuntimeError", "message": f"boom {rng.randrange(50)}",
                                                    "traceback": "Traceback (most recent call last):\n  ...\n"}
        out.append(build_record(key=job.id, task=task, status=status, attempts=1, started_at=int(finished - duration),
                                finished_at=finished, duration_ms=round(duration, 2), job=job, error=error))
    return out


def write(ddb, table: str, recs: list[dict], threads: int = 8) -> None:
    def batch(chunk: list[dict]) -> None:
        request = {table: [{"PutRequest": {"Item": to_item(r)}} for r in chunk]}
        while request:
            request = ddb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(batch, [recs[i:i + 25] for i in range(0, len(recs), 25)]))


def get(port: int, path: str, token: str) -> tuple[int, float]:
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
    resp = conn.getresponse()
    resp.read()
    conn.close()
    return resp.status, (time.perf_counter() - start) * 1000


def refresh(port: int, token: str) -> tuple[float, float, float]:
    """The overview's two requests, sent at once as the page sends them: ms until both
    answered, and each one's."""
    start = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda p: get(port, p, token), ["/api/summary?window=3600",
                                                                "/api/search?window=3600&page_size=50"]))
    assert all(status == 200 for status, _ in answers), answers
    return (time.perf_counter() - start) * 1000, answers[0][1], answers[1][1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--tasks", type=int, default=15)
    ap.add_argument("--refreshes", type=int, default=10)
    ap.add_argument("--live", type=int, default=50, help="records written before each refresh")
    ap.add_argument("--table", help="an existing table to reuse (not deleted)")
    ns = ap.parse_args()
    ddb = boto3.client("dynamodb")
    rng = random.Random(25)
    tasks = [f"task.{i:02d}" for i in range(ns.tasks)]
    table = ns.table or f"dashboard-bench-{uuid.uuid4().hex[:8]}"
    now = int(time.time() * 1000)
    if not ns.table:
        create_table(ddb, table)
        t0 = time.perf_counter()
        write(ddb, table, records(ns.records, tasks, now, 3_500_000, rng))
        print(f"wrote {ns.records:,} records in {time.perf_counter() - t0:.1f} s ({ns.tasks} tasks)", flush=True)
    server = make_server(Stack(table=table), host="127.0.0.1", port=0, tasks=tasks[:3], token="bench",
                         sample_backlog=False)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        first = refresh(port, "bench")
        print(f"first load (reads the hour): {first[0]:.0f} ms (summary {first[1]:.0f}, search {first[2]:.0f})",
              flush=True)
        times = []
        for _ in range(ns.refreshes):
            write(ddb, table, records(ns.live, tasks, int(time.time() * 1000), 1000, rng), threads=2)
            time.sleep(1.1)  # past the server's sharing of one read among refreshes closer than 1 s
            times.append(refresh(port, "bench"))
        print("refreshes, ms (both / summary / search):", " ".join(f"{a:.0f}/{b:.0f}/{c:.0f}" for a, b, c in times))
        print(f"median refresh: {statistics.median(t[0] for t in times):.0f} ms over {len(times)}; summary "
              f"{statistics.median(t[1] for t in times):.0f}, search {statistics.median(t[2] for t in times):.0f} "
              f"(queries in the last: {server.aggregators[3600].queries})")
        # What a poll does not wait for: the background reads that keep the answers fresh.
        agg, reads = server.aggregators[3600], []
        for _ in range(3):
            start = time.perf_counter()
            agg.refresh()
            reads.append((time.perf_counter() - start) * 1000)
        print("background read of the charts (incremental), ms:", " ".join(f"{t:.0f}" for t in reads))
        reads = []
        for _ in range(3):
            reads.append(get(port, f"/api/search?page_size=50&since={int(time.time() * 1000) - 3_600_000}",
                             "bench")[1])
        print("a new search (read in its request), ms:", " ".join(f"{t:.0f}" for t in reads))
    finally:
        server.shutdown()
        server.server_close()
        if not ns.table:
            ddb.delete_table(TableName=table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
