"""``kindling demo``: the whole job path on a local cloud, no AWS account needed.

It starts an embedded AWS (moto's server, in this process), creates the jobs queue with
its dead-letter queue and the results table as template.yaml does, sends a few hundred
jobs (successes, slow and CPU-bound ones, flaky ones, ones that always fail, and messages
that are not valid jobs), runs the worker until the queue is drained, and prints what
became of every job. Run it from the repository root (it loads functions/worker/tasks.py).
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

TASKS_FILE = Path("functions/worker/tasks.py")
MAX_RECEIVE_COUNT = 3


def _mix(n: int, rng: random.Random) -> list[tuple[str, list, dict]]:
    weighted = [
        (55, ("noop", [], {})),
        (15, ("sleep", [10], {})),
        (10, ("async_sleep", [20], {})),
        (10, ("cpu_hash", [200], {})),
        (6, ("flaky", [], {"fails": 1})),
        (4, ("always_fails", ["demo failure"], {})),
    ]
    population = [call for weight, call in weighted for _ in range(weight)]
    return [rng.choice(population) for _ in range(n)]


def _malformed() -> list[tuple[str | None, str]]:
    """Messages no worker can run, each with its job id (``None``: the body has none):
    not JSON, an unknown task, arguments the task cannot take."""
    from kindling.core import codec

    return [(None, '{"not": "a job"'),
            ("demo-unknown", codec.dumps({"version": 1, "id": "demo-unknown", "task": "no_such_task", "args": [],
                                          "kwargs": {}, "enqueued_at": 1_700_000_000_000})),
            ("demo-badargs", codec.dumps({"version": 1, "id": "demo-badargs", "task": "sleep", "args": [1, 2, 3],
                                          "kwargs": {}, "enqueued_at": 1_700_000_000_000}))]


def main(jobs: int = 300, cloud: str = "moto") -> int:
    if cloud != "moto":
        print("kindling demo: the LocalStack demo is `make demo` (infra/localstack/demo.py)")
        return 2
    if not TASKS_FILE.exists():
        raise SystemExit(f"kindling demo: run it from the repository root ({TASKS_FILE} not found)")
    from kindling.tools.localcloud import start_moto

    server, _endpoint = start_moto()
    try:
        return _run(jobs)
    finally:
        server.stop()


def _run(jobs: int) -> int:
    import boto3
    from kindling.core.records import rejected_key
    from kindling.producer.client import Client
    from kindling.shared.config import load_tasks
    from kindling.tools.localcloud import create_stack
    from kindling.triggers.sqs.loop import SqsWorker

    load_tasks([str(TASKS_FILE)])
    print(f"local cloud up at {os.environ['AWS_ENDPOINT_URL']} (moto server)")
    made = create_stack("kindling-demo", visibility_timeout=2,  # short, so the demo's retries come back quickly
                        max_receive_count=MAX_RECEIVE_COUNT)
    queue, dlq, table = made["queue_url"], made["dlq_url"], made["table"]
    sqs = boto3.client("sqs")
    print(f"created queue, dead-letter queue (maxReceiveCount={MAX_RECEIVE_COUNT}) and results table")

    client = Client(queue_url=queue, table=table)
    calls = _mix(jobs, random.Random(7))
    t0 = time.perf_counter()
    handles = client.enqueue_many(calls)
    enqueue_s = time.perf_counter() - t0
    # Every malformed message is tallied under the key its record gets: a not-JSON body has
    # no job id, so the worker records it under its SQS message id (records.rejected_key).
    malformed = []
    for job_id, body in _malformed():
        message_id = sqs.send_message(QueueUrl=queue, MessageBody=body)["MessageId"]
        malformed.append(job_id or rejected_key(message_id))
    print(f"enqueued {len(handles)} jobs in {enqueue_s * 1000:.0f} ms "
          f"({len(handles) / enqueue_s:,.0f} jobs/s, SendMessageBatch) and {len(malformed)} malformed messages")

    worker = SqsWorker(queue, table, wait=1, log=None)
    t0 = time.perf_counter()
    counts = worker.run(burst=True, idle_timeout=30)
    elapsed = time.perf_counter() - t0

    rows: dict[tuple[str, str], int] = {}
    tally = [(h.task, h.id) for h in handles] + [("(malformed)", key) for key in malformed]
    for task, job_id in tally:
        key = (task, client.status(job_id) or "missing")
        rows[key] = rows.get(key, 0) + 1
    in_dlq = int(sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["ApproximateNumberOfMessages"])
                 ["Attributes"]["ApproximateNumberOfMessages"])
    print()
    print(f"{'task':<14} {'status':<10} {'jobs':>5}")
    print(f"{'-' * 14} {'-' * 10} {'-' * 5}")
    for (task, status), n in sorted(rows.items()):
        print(f"{task:<14} {status:<10} {n:>5}")
    print()
    runs = sum(counts.values())
    print(f"worker: {runs} deliveries ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}) "
          f"in {elapsed:.2f} s, of which {worker.busy_s:.2f} s receiving, running and deleting "
          f"({runs / worker.busy_s:,.0f} deliveries/s); the rest is retries waiting out their "
          "visibility timeout")
    print(f"dead-letter queue holds {in_dlq} message(s); the malformed messages are not among them: each is "
          "recorded rejected (the not-JSON one under its message id) and deleted")
    missing = sum(n for (_, status), n in rows.items() if status == "missing")
    return 1 if missing else 0
