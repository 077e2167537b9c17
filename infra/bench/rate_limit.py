"""A task's rate limit held across concurrent workers: ``rate_limit="10/s"``, 4 workers
(`kindling worker` on SQS: kindling.triggers.sqs.loop.SqsWorker, one process each) for 60 s against
LocalStack's SQS and DynamoDB, the queue holding more jobs than the limit lets run.

    KINDLING_LOCALSTACK_PORT=4617 .venv/bin/python infra/bench/rate_limit.py [--workers 4] [--seconds 60]

Prints the runs per second (from each run's recorded ``started_at``), the largest count in
any of the limit's windows, and the mean rate over the run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "layers/kindling"), str(ROOT / "tests")]

RATE = "10/s"


def worker(url: str, table: str) -> None:
    from kindling.core.registry import Registry
    from kindling.triggers.sqs.loop import SqsWorker

    registry = Registry()
    registry.task(name="bench.rated", rate_limit=RATE)(lambda n: n)
    SqsWorker(url, table, registry, wait=1, log=None, metrics=False).run()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--jobs", type=int, default=1500)
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(*args.worker)

    from support.localstack import env_if_healthy

    environment = env_if_healthy()
    if environment is None:
        sys.exit("LocalStack is not running on KINDLING_LOCALSTACK_PORT (infra/localstack/ctl start)")
    os.environ.update(environment)
    import boto3
    from kindling.producer.client import Call, Client

    suffix = uuid.uuid4().hex[:8]
    sqs, ddb = boto3.client("sqs"), boto3.client("dynamodb")
    url = sqs.create_queue(QueueName=f"rate-bench-{suffix}", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    table = f"rate-bench-{suffix}"
    from kindling.tools.localcloud import results_table_schema

    ddb.create_table(TableName=table, BillingMode="PAY_PER_REQUEST", **results_table_schema(ROOT / "template.yaml"))
    ddb.get_waiter("table_exists").wait(TableName=table)
    Client(queue_url=url, table=table).enqueue_many([Call("bench.rated", [i], {}) for i in range(args.jobs)])

    procs = [subprocess.Popen([sys.executable, __file__, "--worker", url, table]) for _ in range(args.workers)]
    time.sleep(args.seconds)
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        p.wait(timeout=60)

    pages = ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
    items = [i for page in pages for i in page["Items"] if i.get("status", {}).get("S") == "succeeded"]
    started = sorted(int(i["started_at"]["N"]) for i in items)
    per_second: dict[int, int] = {}
    for ms in started:
        per_second[ms // 1000] = per_second.get(ms // 1000, 0) + 1
    seconds = sorted(per_second)
    full = seconds[1:-1]  # the first and last seconds are partial
    span = (started[-1] - started[0]) / 1000 if len(started) > 1 else 0
    print(json.dumps({
        "workers": args.workers, "seconds": args.seconds, "limit": RATE, "runs": len(started),
        "span_s": round(span, 1), "mean_rate_per_s": round(len(started) / span, 2) if span else None,
        "max_in_one_window": max(per_second.values()) if per_second else 0,
        "per_second_full": [per_second[s] for s in full],
    }))
    sqs.delete_queue(QueueUrl=url)
    ddb.delete_table(TableName=table)


if __name__ == "__main__":
    main()
