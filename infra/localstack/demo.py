"""`make demo`: the whole kindling path on LocalStack, on this machine, no AWS account.

It installs and starts LocalStack if needed (infra/localstack/ctl), deploys template.yaml
(sam build + sam deploy), sends a few hundred jobs through the producer client (some slow,
some CPU-bound, some flaky, some that always fail, and three messages that are not valid
jobs), lets LocalStack's SQS event source mapping invoke the worker, waits for every
outcome, and prints the results table, the cold invocation's init time next to the warm
ones, and jobs/s; then runs a chain of three, a group of 20 with a callback and a
periodic task's tick (the stack is deployed with PeriodicTasks=true). It ends with the
commands that open the dashboard on this run, so LocalStack (and the stack deployed in it)
keeps running afterwards; `infra/localstack/ctl stop` stops it. A run that fails stops the
LocalStack it started.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CTL = ROOT / "infra/localstack/ctl"
sys.path.insert(0, str(Path(__file__).parent))


def ctl(*args: str) -> str:
    return subprocess.run([sys.executable, str(CTL), *args], check=True, capture_output=True, text=True).stdout


def mix(n: int) -> list[tuple[str, list, dict]]:
    rng = random.Random(7)
    weighted = [(55, ("noop", [], {})), (15, ("sleep", [10], {})), (10, ("async_sleep", [20], {})),
                (10, ("cpu_hash", [200], {})), (6, ("flaky", [], {"fails": 1})), (4, ("always_fails", ["demo"], {}))]
    population = [call for weight, call in weighted for _ in range(weight)]
    return [rng.choice(population) for _ in range(n)]


def reports(function: str, since_ms: int, logs=None) -> list[dict]:
    """The REPORT lines the runtime wrote to CloudWatch Logs from ``since_ms`` on (this run's:
    an earlier run's lines stay in the log group), every page of them, oldest first."""
    if logs is None:
        import boto3

        logs = boto3.client("logs")
    events, token = [], None
    while True:
        page = logs.filter_log_events(logGroupName=f"/aws/lambda/{function}", startTime=since_ms,
                                      **({"nextToken": token} if token else {}))
        events += page["events"]
        token = page.get("nextToken")
        if not token:
            break
    out = []
    for event in events:
        for line in event["message"].splitlines():
            if line.startswith("REPORT"):
                fields = dict(part.split(": ", 1) for part in line.split("\t")[1:] if ": " in part)
                numbers = {k: v.split()[0] for k, v in fields.items()}
                out.append({k: float(v) for k, v in numbers.items() if v.replace(".", "").isdigit()})
    return out


def malformed(run: str) -> list[dict]:
    """Two envelopes that cannot run (an unknown task, arguments its task does not take),
    under ids of this run: a record a previous run left under a fixed id would be read as
    this run's outcome."""
    return [{"version": 1, "id": f"demo-unknown-task-{run}", "task": "no_such_task", "args": [], "kwargs": {},
             "enqueued_at": 1_700_000_000_000},
            {"version": 1, "id": f"demo-bad-args-{run}", "task": "sleep", "args": [1, 2, 3], "kwargs": {},
             "enqueued_at": 1_700_000_000_000}]


def main(jobs: int = 300) -> int:
    print("installing LocalStack (first time: a few minutes) ...", flush=True)
    ctl("install")
    started = subprocess.run([sys.executable, str(CTL), "status"], capture_output=True).returncode != 0
    if started:
        print(ctl("start").strip().splitlines()[-1])
    os.environ.update(dict(item.split("=", 1) for item in ctl("env").removeprefix("export ").split()))
    try:
        code = run(jobs)
    except BaseException:
        if started:
            ctl("stop")
        raise
    # The dashboard commands printed last need this LocalStack: it stays up, whoever started it.
    print(f"\nLocalStack is still running{' (started by this demo)' if started else ''}, with the kindling-demo "
          f"stack deployed; stop it with: {CTL.relative_to(ROOT)} stop")
    return code


def run(jobs: int) -> int:
    import boto3
    from deploy import deploy
    from kindling.core import codec
    from kindling.core.records import rejected_key
    from kindling.producer.client import Client
    from kindling.stores.results import FINAL, from_item

    print("deploying template.yaml (sam build + sam deploy) ...", flush=True)
    out = deploy("kindling-demo", {"PeriodicTasks": "true"})
    print(f"deployed in {out['DeploySeconds']} s: queue, dead-letter queue, results table, layer, worker function")
    client = Client(queue_url=out["QueueUrl"], table=out["ResultsTableName"])
    sqs = boto3.client("sqs")

    started_ms = int(time.time() * 1000)
    t0 = time.perf_counter()
    handles = client.enqueue_many(mix(jobs))
    enqueue_s = time.perf_counter() - t0
    bad = sqs.send_message(QueueUrl=out["QueueUrl"], MessageBody="{not json")["MessageId"]
    extra = [rejected_key(bad)]  # a body with no job id is recorded under its message id
    for body in malformed(f"{started_ms:x}"):
        sqs.send_message(QueueUrl=out["QueueUrl"], MessageBody=codec.dumps(body))
        extra.append(body["id"])
    print(f"enqueued {len(handles)} jobs in {enqueue_s * 1000:.0f} ms ({len(handles) / enqueue_s:,.0f} jobs/s) "
          f"and 3 malformed messages; waiting for LocalStack's event source mapping to run them ...", flush=True)

    ids = [h.id for h in handles] + extra
    tasks = {h.id: h.task for h in handles} | {i: "(malformed)" for i in extra}
    ddb = boto3.client("dynamodb")
    found: dict[str, dict] = {}
    first_pass_s = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        missing = [i for i in ids if found.get(i, {}).get("status") not in FINAL]
        if not missing:
            break
        for start in range(0, len(missing), 100):
            keys = [{"id": {"S": i}} for i in missing[start:start + 100]]
            resp = ddb.batch_get_item(RequestItems={client.table: {"Keys": keys, "ConsistentRead": True}})
            for item in resp["Responses"][client.table]:
                found[item["id"]["S"]] = from_item(item)
        if first_pass_s is None and len(found) == len(ids):
            first_pass_s = time.perf_counter() - t0
        time.sleep(0.25)
    total_s = time.perf_counter() - t0

    rows: dict[tuple[str, str], int] = {}
    for i in ids:
        key = (tasks[i], found.get(i, {}).get("status", "missing"))
        rows[key] = rows.get(key, 0) + 1
    print(f"\n{'task':<14} {'status':<10} {'jobs':>5}\n{'-' * 14} {'-' * 10} {'-' * 5}")
    for (task, status), n in sorted(rows.items()):
        print(f"{task:<14} {status:<10} {n:>5}")
    dead = [r for r in found.values() if r["status"] == "dead"]
    if dead:
        error = dead[0]["error"]
        print(f"\ne.g. dead after {dead[0]['attempts']} attempts: {error['type']}: {error['message']}")

    time.sleep(2)  # let the runtime's last REPORT lines reach CloudWatch Logs
    rep = reports(out["WorkerFunctionName"], since_ms=started_ms - 1000)
    cold = [r for r in rep if "Init Duration" in r]
    warm = [r["Duration"] for r in rep if "Init Duration" not in r]
    print()
    if cold:
        c = cold[0]
        print(f"cold invocation: init {c['Init Duration']:.1f} ms + handler {c['Duration']:.1f} ms "
              f"(first batch: imports the SigV4 client, opens the DynamoDB connection)")
    if warm:
        print(f"warm invocations: handler median {statistics.median(warm):.1f} ms "
              f"(min {min(warm):.1f}, max {max(warm):.1f}) over {len(warm)} batches; "
              f"{len(cold)} cold start(s) in all")
    if first_pass_s:
        print(f"every job recorded at least once after {first_pass_s:.1f} s "
              f"({len(ids) / first_pass_s:,.0f} jobs/s end to end through the event source mapping)")
    print(f"all outcomes final after {total_s:.1f} s (retries wait their backoff: RetryDelay 1 s, doubling)")
    canvas(client)
    periodic(out, client)
    operating(out, started_ms=started_ms)
    return 0 if rows.keys() and not any(s == "missing" for _, s in rows) else 1


def periodic(out: dict, client) -> None:
    """The ticker: the stack's rate(1 minute) rule invokes the worker with this event; the
    demo sends one now instead of waiting for the next minute."""
    import json

    import boto3

    reply = boto3.client("lambda").invoke(FunctionName=out["WorkerFunctionName"],
                                          Payload=json.dumps({"kindling": "tick"}).encode())
    body = json.loads(reply["Payload"].read())
    print(f"\ntick -> enqueued {body.get('enqueued')} (heartbeat, rate(1 minute): this minute's fire and the "
          f"one before; a doubled tick sends the same ids, so each fire runs once)")
    for job_id in body.get("enqueued", []):
        print(f"  {job_id} -> {client.result(job_id, timeout=60)}")


def canvas(client) -> None:
    """A chain of three and a group of 20 with a callback, run by the deployed worker."""
    import kindling.producer.dispatch
    from kindling import Signature, chain, group
    from kindling.engine.followups import chord_key

    def add(*args, **kwargs):  # a producer needs only the task's name (functions/worker/tasks.py has it)
        return Signature("add", args, kwargs)

    kindling.producer.dispatch.set_producer(client)
    t0 = time.perf_counter()
    steps = chain(add(1, 2), add(10), add(y=100)).delay()
    print(f"\nchain(add.s(1, 2), add.s(10), add.s(y=100)) -> {steps.result(timeout=120)} "
          f"in {time.perf_counter() - t0:.1f} s; step ids derived from the first: {steps.ids[1]}")
    t0 = time.perf_counter()
    chord = group([add(i, i) for i in range(20)]).then(Signature("total")).delay()
    value = chord.result(timeout=120)
    record = client.record(chord_key(chord.id))
    print(f"group([add.s(i, i) for i in range(20)]).then(total.s()) -> {value} in {time.perf_counter() - t0:.1f} s; "
          f"chord record: {record['status']}, {len(record['done'])} of {record['size']} members counted, "
          f"callback {record.get('callback')} ran {client.record(chord.callback_id)['attempts']} time(s)")


def operating(out: dict, started_ms: int) -> None:
    """The end of the demo: its dead jobs as `kindling jobs list` prints them (through the
    results table's by_status index), and the command that opens the dashboard on this run."""
    from kindling.tools import cli

    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_ms / 1000 - 1))
    table, queue = out["ResultsTableName"], out["QueueUrl"]
    print(f"\n$ kindling jobs list --status dead --since {since} --table {table}")
    cli.main(["jobs", "list", "--status", "dead", "--since", since, "--table", table])
    print("\nthe dashboard on this run (LocalStack keeps running for it):")
    print(f'  eval "$(infra/localstack/ctl env)"\n'
          f"  .venv/bin/kindling dashboard --table {table} --queue-url {queue} --tasks functions/worker/tasks.py\n"
          "  open the login link it prints   (and: kindling jobs show ID, kindling jobs retry ID, kindling dlq peek)")


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300))
