"""``sqs``: the deployed stack on LocalStack end to end, enqueue_many to the last result seen.

SQS -> event source mapping -> Lambda -> DynamoDB; skipped without a deployed stack (stack.py).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import stats
from harness import log

if TYPE_CHECKING:
    from services import Services


def scenario(ns, svc: Services, layer: str, env: dict, results: dict) -> None:
    """The deployed stack on LocalStack: SQS -> event source mapping -> Lambda -> DynamoDB."""
    from stack import deployed_stack

    out = deployed_stack(svc, log)
    if out is None:
        log("sqs: skipped (no deployed stack)")
        return
    import boto3
    from kindling.producer.client import Client

    client = Client(queue_url=out["QueueUrl"], table=out["ResultsTableName"])
    ddb = boto3.client("dynamodb")
    n = ns.n_e2e
    runs = []
    for i in range(ns.e2e_reps):
        t0 = time.perf_counter()
        ids = [h.id for h in client.enqueue_many([("noop", [], {})] * n)]
        enqueued = time.perf_counter()
        seen: set[str] = set()
        first = None
        deadline = time.monotonic() + 600
        while len(seen) < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"sqs end to end: {len(seen)}/{n} results after 600 s")
            missing = [j for j in ids if j not in seen]
            for start in range(0, len(missing), 100):
                keys = [{"id": {"S": j}} for j in missing[start:start + 100]]
                got = ddb.batch_get_item(RequestItems={client.table: {"Keys": keys, "ConsistentRead": True}})
                seen.update(item["id"]["S"] for item in got["Responses"][client.table]
                            if item["status"]["S"] == "succeeded")
            if seen and first is None:
                first = time.perf_counter()
            time.sleep(0.1)
        end = time.perf_counter()
        runs.append({"jobs_per_s": n / (end - t0), "enqueue_s": enqueued - t0, "first_result_s": first - t0,
                     "total_s": end - t0})
        log(f"sqs end to end {i + 1}/{ns.e2e_reps} (n={n}): {runs[-1]['jobs_per_s']:.0f} jobs/s")
    results["sqs"] = {"unit": "jobs/s", "n": n, "runs": runs,
                      "note": "enqueue_many to the last result seen; LocalStack's event source mapping poller "
                              "bounds this (one poll loop, batches of up to 10)"}


def report(c: dict) -> str:
    md = []
    runs = c["runs"]
    md.append(f"### SQS end to end on LocalStack: {c['n']} noop jobs\n\n{c['note']}.\n")
    md.append("| jobs/s | enqueue s | first result s | last result s |\n|---:|---:|---:|---:|")
    md.extend(f"| {stats.fmt(r['jobs_per_s'])} | {stats.fmt(r['enqueue_s'], 2)} "
              f"| {stats.fmt(r['first_result_s'], 2)} | {stats.fmt(r['total_s'], 1)} |" for r in runs)
    md.append("")
    return "\n".join(md)


def ratio_lines(c: dict) -> list[str]:
    """No target: LocalStack's poller bounds the rate (the report's note)."""
    return []
