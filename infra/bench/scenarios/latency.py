"""``latency``: low load, one ``stamp`` job at a time per system, enqueue to its result seen.

Celery (threads), kindling's StreamWorker and the bare batched consumer, each running for
good; the waiter polls every 0.5 ms. Split into enqueue to start and start to result seen.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import TYPE_CHECKING

import stats
from harness import HERE, PY, celery_cmd, log, new_job, stop

if TYPE_CHECKING:
    from services import Services


def scenario(ns, svc: Services, layer: str, env: dict, results: dict) -> None:
    """Low load: one ``stamp`` job at a time per system, round-robin; the waiter polls every 0.5 ms."""
    import bare_consumer
    import celery_app
    from kindling.valkey import StreamProducer

    svc.valkey(0).flushall()
    r1 = svc.valkey(1)
    producer = StreamProducer(svc.valkey_url)
    q = subprocess.DEVNULL
    procs = [
        subprocess.Popen(celery_cmd("threads", 10), env=env, cwd=HERE / "systems", stdout=q, stderr=q),
        subprocess.Popen([PY, str(HERE / "systems/kindling_valkey.py"), "--url", svc.valkey_url, "--forever"],
                         env=env, stdout=q, stderr=q),
        subprocess.Popen([PY, str(HERE / "bare_consumer.py"), "--url", svc.valkey_url, "--forever"],
                         env=env, stdout=q, stderr=q),
    ]

    def wait(key: str) -> tuple[float, bytes]:
        deadline = time.monotonic() + 60
        while True:
            raw = r1.get(key)
            if raw is not None:
                return time.time(), raw
            if time.monotonic() > deadline:
                raise RuntimeError(f"latency: no result at {key}")
            time.sleep(0.0005)

    def celery_one():
        t0 = time.time()
        res = celery_app.app.send_task("stamp")
        seen, raw = wait(f"celery-task-meta-{res.id}")
        return t0, json.loads(raw)["result"], seen

    def kindling_one():
        t0 = time.time()
        sent = producer.enqueue("stamp")
        seen, raw = wait(f"kindling-result:{sent.id}")
        return t0, float(json.loads(json.loads(raw)["result"])), seen

    def bare_one():
        job = new_job("stamp")
        t0 = time.time()
        bare_consumer.enqueue(r0, [job])
        seen, raw = wait(f"bare-result:{job['id']}")
        return t0, json.loads(raw)["result"], seen

    r0 = svc.valkey(0)
    systems = {"Celery threads c=10": celery_one, "kindling StreamWorker": kindling_one,
               "bare batched consumer": bare_one}
    samples: dict[str, dict[str, list[float]]] = {k: {"total": [], "enqueue_to_start": [], "start_to_seen": []}
                                                  for k in systems}
    try:
        for fn in systems.values():  # startup and warm-up, untimed
            for _ in range(5):
                fn()
        for i in range(ns.lat_n):
            for name, fn in systems.items():
                t0, started, seen = fn()
                d = samples[name]
                d["total"].append((seen - t0) * 1000)
                d["enqueue_to_start"].append((started - t0) * 1000)
                d["start_to_seen"].append((seen - started) * 1000)
            if (i + 1) % 50 == 0 or i + 1 == ns.lat_n:
                log(f"latency {i + 1}/{ns.lat_n}")
    finally:
        for p in procs:
            stop(p)
    results["latency"] = {"unit": "ms", "baseline": "Celery threads c=10", "samples": samples,
                          "note": "waiter polls the result key every 0.5 ms; one job in flight at a time"}


def report(c: dict) -> str:
    md = []
    md.append(f"### Latency at low load, ms ({c['note']})\n")
    md.append("| system | total p50 | total p99 | min | max | enqueue->start p50 | p99 "
              "| start->result seen p50 | p99 | p50 x Celery |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    base = stats.percentile(c["samples"][c["baseline"]]["total"], 50)
    for k, d in c["samples"].items():
        pc = stats.percentile
        md.append(f"| {k} | {stats.fmt(pc(d['total'], 50), 2)} | {stats.fmt(pc(d['total'], 99), 2)} "
                  f"| {stats.fmt(min(d['total']), 2)} | {stats.fmt(max(d['total']), 2)} "
                  f"| {stats.fmt(pc(d['enqueue_to_start'], 50), 2)} "
                  f"| {stats.fmt(pc(d['enqueue_to_start'], 99), 2)} "
                  f"| {stats.fmt(pc(d['start_to_seen'], 50), 2)} | {stats.fmt(pc(d['start_to_seen'], 99), 2)} "
                  f"| {stats.fmt_ratio(stats.ratio(pc(d['total'], 50), base))} |")
    md.append("")
    return "\n".join(md)


def ratio_lines(c: dict) -> list[str]:
    lines = []
    d = c["samples"]["kindling StreamWorker"]
    for part in ("enqueue_to_start", "start_to_seen"):
        label = part.replace("_to_", " to ").replace("seen", "result seen")
        lines.append(stats.verdict(f"latency kindling {label} p50, ms", stats.percentile(d[part], 50), 1))
        lines.append(stats.verdict(f"latency kindling {label} p99, ms", stats.percentile(d[part], 99), 5))
    base = stats.percentile(c["samples"][c["baseline"]]["total"], 50)
    for k, d in c["samples"].items():
        if k != c["baseline"]:
            r = stats.ratio(stats.percentile(d["total"], 50), base)
            lines.append(f"latency p50 enqueue->result seen: {k} / Celery = {stats.fmt_ratio(r)}")
    return lines
