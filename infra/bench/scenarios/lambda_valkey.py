"""The Valkey-triggered Lambda against the SQS-triggered one, same worker handler, same run.

Two parts, each interleaved (one of each path per repetition):

- cold start: a fresh ``python -S`` with the built layer and the built function on its path,
  given a drain event with one noop already on the stream, against the same child given an
  SQS event (scenario ``cold``'s kindling system), spawn to the first record in DynamoDB;
- warm latency: the deployed stack (stack.py: template.yaml with ``ValkeyUrl`` set), one job
  at a time, enqueue to its record seen in DynamoDB: ``StreamProducer.enqueue`` with the
  function to wake (XADD, the flag, an asynchronous Invoke; the drain reads it) against
  ``Client.enqueue`` (SQS, LocalStack's event source mapping). Each Valkey job waits until
  the previous drain has returned (its flag gone), so every one is woken by its own kick.

The report pieces at the end are pure (tests/tooling/test_bench_report.py).
"""

from __future__ import annotations

import sys
import time

import stats
from harness import cold_child, log, new_job

COLD_DRAIN = "kindling drain (Valkey event, -S + layer)"
COLD_SQS = "kindling SQS handler (-S + layer)"
WARM_DRAIN = "StreamProducer.enqueue -> kick -> drain"
WARM_SQS = "Client.enqueue -> SQS -> event source mapping"
STREAM = "kindling:bench-drain"
COLD_TARGET = 1.3
POLL_S = 0.002


def cold_drain(svc, layer: str, env: dict):
    """The drain's cold start as a function of an optional CPU share (``share=None``): each call
    puts one noop on the stream and times a fresh child given the drain event, spawn to its
    record in DynamoDB. Used here and by the memory scenario."""
    from cold_child import drain_cmd
    from kindling.valkey import StreamProducer

    producer = StreamProducer(svc.valkey_url, stream=STREAM)  # no function: the child is the drain
    event = {"kindling": "drain", "stream": STREAM}  # the URL and stream are the deployment's, not the event's
    env = dict(env, KINDLING_VALKEY_URL=svc.valkey_url, KINDLING_VALKEY_STREAMS=STREAM)

    def drain(share=None) -> float:
        sent = producer.enqueue("noop")
        return cold_child(drain_cmd(sys.executable, layer), env, svc, {"id": sent.id}, share, event=event)

    return drain


def scenario(ns, svc, layer: str, env: dict, results: dict) -> None:
    from cold_child import kindling_cmd

    py = sys.executable
    drain = cold_drain(svc, layer, env)
    systems = {COLD_DRAIN: drain, COLD_SQS: lambda: cold_child(kindling_cmd(py, layer), env, svc, new_job())}
    samples: dict[str, list[float]] = {k: [] for k in systems}
    for fn in systems.values():  # untimed warm-up (page cache, pyc files; the drain's group is created)
        fn()
    for i in range(ns.drain_cold_reps):
        for name, fn in systems.items():
            samples[name].append(fn())
        log(f"lambda_valkey cold {i + 1}/{ns.drain_cold_reps}: drain {samples[COLD_DRAIN][-1]:.0f}, "
            f"SQS {samples[COLD_SQS][-1]:.0f}")
    out: dict = {"cold": {"unit": "ms", "baseline": COLD_SQS, "samples": samples}}
    results["lambda_valkey"] = out

    from stack import deployed_stack

    stack = deployed_stack(svc, log)
    if stack is None:
        out["warm"] = {"skipped": "needs the deployed stack (LocalStack and the dev venv with sam)"}
        return
    out["warm"] = warm_latency(ns, svc, stack, log)


def warm_latency(ns, svc, stack: dict, log) -> dict:
    import boto3
    from kindling.producer.client import Client
    from kindling.shared.valkey.connection import DEFAULT_STREAM
    from kindling.shared.valkey.kick import flag_key
    from kindling.valkey import StreamProducer

    ddb = boto3.client("dynamodb")
    table, function = stack["ResultsTableName"], stack["WorkerFunctionName"]
    producer = StreamProducer(svc.valkey_url, function_name=function)  # the template's stream
    client = Client(queue_url=stack["QueueUrl"], table=table)
    r0 = svc.valkey(0)
    flag = flag_key(DEFAULT_STREAM)

    def seen(job_id: str) -> float:
        deadline = time.monotonic() + 60
        while True:
            item = ddb.get_item(TableName=table, Key={"id": {"S": job_id}}, ConsistentRead=True).get("Item")
            if item is not None:
                at = time.time()
                if item["status"]["S"] != "succeeded":
                    raise RuntimeError(f"lambda_valkey: {job_id} recorded {item['status']['S']}")
                return at
            if time.monotonic() > deadline:
                raise RuntimeError(f"lambda_valkey: no record of {job_id} after 60 s")
            time.sleep(POLL_S)

    def drain_one() -> float:
        deadline = time.monotonic() + 30
        while r0.exists(flag):  # the previous drain still runs: this job would not kick
            if time.monotonic() > deadline:
                raise RuntimeError(f"lambda_valkey: {flag} still set after 30 s")
            time.sleep(0.01)
        t0 = time.time()
        sent = producer.enqueue("noop")
        if producer.kicker.failures:
            raise RuntimeError(f"lambda_valkey: the kick failed: {producer.kicker.last_error}")
        return (seen(sent.id) - t0) * 1000

    def sqs_one() -> float:
        t0 = time.time()
        handle = client.enqueue("noop")
        return (seen(handle.id) - t0) * 1000

    systems = {WARM_DRAIN: drain_one, WARM_SQS: sqs_one}
    samples: dict[str, list[float]] = {k: [] for k in systems}
    for fn in systems.values():  # the function's first invocations (cold in LocalStack), untimed
        for _ in range(2):
            fn()
    for i in range(ns.drain_lat_n):
        for name, fn in systems.items():
            samples[name].append(fn())
        if (i + 1) % 10 == 0 or i + 1 == ns.drain_lat_n:
            log(f"lambda_valkey warm {i + 1}/{ns.drain_lat_n}: drain {samples[WARM_DRAIN][-1]:.0f} ms, "
                f"SQS {samples[WARM_SQS][-1]:.0f} ms")
    return {"unit": "ms", "baseline": WARM_SQS, "samples": samples, "kicks": producer.kicker.invocations,
            "note": f"one job at a time; the waiter polls GetItem (consistent) every {POLL_S * 1000:g} ms; "
                    "a Valkey job is enqueued once the previous drain has returned"}


# ----------------------------------------------------------------------------- report (pure)

def latency_rows(samples: dict[str, list[float]], baseline: str) -> list[dict]:
    """p50, p99, min, max and n per system, and the p50's and p99's ratios to the baseline's."""
    pc = stats.percentile
    base50, base99 = pc(samples.get(baseline, []), 50), pc(samples.get(baseline, []), 99)
    rows = []
    for name, xs in samples.items():
        p50, p99 = pc(xs, 50), pc(xs, 99)
        rows.append({"system": name, "p50": p50, "p99": p99, "min": min(xs, default=None),
                     "max": max(xs, default=None), "n": len(xs), "ratio_p50": stats.ratio(p50, base50),
                     "ratio_p99": stats.ratio(p99, base99)})
    return rows


def report(c: dict) -> str:
    """The scenario's Markdown: the cold-start table and the warm latency table (or why it was skipped)."""
    cold = c["cold"]
    md = [stats.markdown_table("Valkey-triggered Lambda, cold: spawn to first record in DynamoDB, the drain "
                               "event against the SQS event, same handler and layer", cold["unit"],
                               stats.table_rows(cold["samples"], cold["baseline"]), cold["baseline"])]
    md.append("A fresh `python -S` with the built layer and function, spawn to its first batch recorded: the "
              "worker handler given a drain event with one noop already on the stream, or an SQS event of one "
              f"noop; interleaved (target: drain / SQS <= {COLD_TARGET:g}).\n")
    warm = c.get("warm")
    if warm is None:
        return "\n".join(md)
    if "skipped" in warm:
        md.append(f"### Valkey-triggered Lambda, warm latency\n\nSkipped: {warm['skipped']}.\n")
        return "\n".join(md)
    md.append(f"### Valkey-triggered Lambda, warm: enqueue to record seen in DynamoDB through the deployed "
              f"function, ms ({warm['note']}; {warm['kicks']} kicks)\n")
    md.append(f"| system | p50 | p99 | min | max | n | p50 x {warm['baseline']} | p99 x {warm['baseline']} |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in latency_rows(warm["samples"], warm["baseline"]):
        md.append(f"| {r['system']} | {stats.fmt(r['p50'])} | {stats.fmt(r['p99'])} | {stats.fmt(r['min'])} "
                  f"| {stats.fmt(r['max'])} | {r['n']} | {stats.fmt_ratio(r['ratio_p50'])} "
                  f"| {stats.fmt_ratio(r['ratio_p99'])} |")
    return "\n".join(md) + "\n"


def ratio_lines(c: dict) -> list[str]:
    s = c["cold"]["samples"]
    med = lambda xs: stats.summary(xs)["median"]  # noqa: E731
    lines = [stats.verdict("cold start Valkey drain / SQS handler (same handler, spawn to first record)",
                           stats.ratio(med(s[COLD_DRAIN]), med(s[COLD_SQS])), COLD_TARGET)]
    warm = c.get("warm")
    if warm and "samples" in warm:
        rows = {r["system"]: r for r in latency_rows(warm["samples"], warm["baseline"])}
        d = rows[WARM_DRAIN]
        base = rows[warm["baseline"]]
        lines.append(f"warm latency through the deployed function, Valkey drain / SQS: p50 "
                     f"{stats.fmt(d['p50'])} / {stats.fmt(base['p50'])} ms = {stats.fmt_ratio(d['ratio_p50'])}, "
                     f"p99 {stats.fmt(d['p99'])} / {stats.fmt(base['p99'])} ms = {stats.fmt_ratio(d['ratio_p99'])}")
    return lines
