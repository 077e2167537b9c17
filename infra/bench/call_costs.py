"""What one DynamoDB call costs the local cloud's CPU: LocalStack's process and DynamoDB Local's.

    infra/localstack/ctl start && .venv-bench/bin/python infra/bench/call_costs.py [--calls 60] [--rounds 3]

Against the LocalStack started by infra/localstack/ctl (its pid file), on one connection
through kindling's own client, on a fresh table: a BatchWriteItem of 25 records, a
BatchGetItem of 100 keys shaped as kindling's duplicate check (keys that exist, keys that do
not), a BatchGetItem of 10 and a GetItem. For each: the wall time per call, and the CPU
time LocalStack (python) and DynamoDB Local (java, its child) spent per call, read from
/proc before and after. Three rounds (``--rounds``): the first ones warm DynamoDB Local's
JIT, so read the last. This is the
measurement behind docs/benchmarks.md's "what the duplicate check costs the table" on LocalStack,
where both servers share the machine's cores with the worker.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "layers/kindling"))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found.extend(int(c) for c in text)
    return found


def servers() -> tuple[int, int]:
    """LocalStack's pid (infra/localstack/ctl's pid file) and its DynamoDB Local child's."""
    state = json.loads((ROOT / ".state/localstack/localstack.pid").read_text())
    pid = int(state["pid"])
    for child in children(pid):
        if b"DynamoDBLocal" in Path(f"/proc/{child}/cmdline").read_bytes():
            return pid, child
    raise SystemExit("no DynamoDB Local under LocalStack: make one DynamoDB call first (or start LocalStack)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ns = ap.parse_args()
    os.environ.setdefault("AWS_ENDPOINT_URL", "http://127.0.0.1:" + os.environ.get("KINDLING_LOCALSTACK_PORT", "4566"))
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_REGION", "us-east-1")):
        os.environ.setdefault(key, value)
    from kindling.core.records import build_record
    from kindling.drivers.aws import dynamodb
    from kindling.stores.results import to_item

    client = dynamodb()
    table = f"kindling-call-costs-{time.time_ns()}"
    from kindling.tools.localcloud import results_table_schema

    client.call("CreateTable", {"TableName": table, "BillingMode": "PAY_PER_REQUEST",
                                **results_table_schema(ROOT / "template.yaml")})
    localstack, java = servers()
    now = time.time_ns() // 1_000_000

    def put(i: int) -> dict:
        record = build_record(key=f"cc-{i:08d}", task="noop", status="succeeded", attempts=1, started_at=now,
                              finished_at=now, result="null", worker={"function": "bench"})
        return {"PutRequest": {"Item": to_item(record)}}

    def check(keys: list[str]) -> dict:
        return {"RequestItems": {table: {"Keys": [{"id": {"S": k}} for k in keys], "ConsistentRead": True,
                                         "ProjectionExpression": "#s, #a, #g",
                                         "ExpressionAttributeNames": {"#s": "status", "#a": "attempts",
                                                                      "#g": "generation"}}}}

    def measure(name: str, call) -> None:
        ls, jv, t0 = cpu_seconds(localstack), cpu_seconds(java), time.perf_counter()
        for i in range(ns.calls):
            call(i)
        per = 1000 / ns.calls
        wall, ls, jv = (per * (time.perf_counter() - t0), per * (cpu_seconds(localstack) - ls),
                        per * (cpu_seconds(java) - jv))
        print(f"{name:38s} wall {wall:6.1f} ms   LocalStack {ls:5.1f} ms   DynamoDB Local {jv:5.1f} ms   per call",
              flush=True)

    def one_round(rnd: int) -> None:
        print(f"round {rnd + 1} ({ns.calls} calls each, one connection)")
        base, written = rnd * 25 * ns.calls, 25 * ns.calls * (rnd + 1)
        measure("BatchWriteItem of 25", lambda i: client.call(
            "BatchWriteItem", {"RequestItems": {table: [put(base + i * 25 + j) for j in range(25)]}}))
        measure("BatchGetItem of 100, keys that exist", lambda i: client.call(
            "BatchGetItem", check([f"cc-{(i * 100 + j) % written:08d}" for j in range(100)])))
        measure("BatchGetItem of 100, new keys", lambda i: client.call(
            "BatchGetItem", check([f"new-{rnd}-{i}-{j}" for j in range(100)])))
        measure("BatchGetItem of 10, new keys", lambda i: client.call(
            "BatchGetItem", check([f"ten-{rnd}-{i}-{j}" for j in range(10)])))
        measure("GetItem", lambda i: client.call("GetItem", {"TableName": table,
                                                             "Key": {"id": {"S": f"one-{rnd}-{i}"}}}))

    try:
        for rnd in range(ns.rounds):
            one_round(rnd)
    finally:
        client.call("DeleteTable", {"TableName": table})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
