"""One kindling stream worker process on a local valkey-server: throughput and latency.

    python infra/bench/valkey_worker.py [--noop 10000] [--sleep 2000] [--latency 300]

Throughput: N jobs are queued first, then one ``kindling worker --valkey URL --burst
--concurrency 100`` process runs them (results in Valkey, ``KINDLING_RESULTS=valkey``);
jobs/s is N over the span from the first job's start to the last job's finish, and also
over the process's whole life (spawn to exit, start-up included).

Latency, at low load (one job at a time, a long-lived worker already running): the
``stamp`` task returns the wall clock when it ran; enqueue -> start is that minus the
producer's clock just before XADD, and finish -> seen is the waiter's clock when its
blocking ``ValkeyResultStore.wait`` returned minus the record's finish time.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CTL = ROOT / "infra/valkey/ctl"
TASKS = Path(__file__).with_name("bench_tasks.py")


def ctl(*args: str) -> str:
    return subprocess.run([str(CTL), *args], check=True, capture_output=True, text=True).stdout.strip()


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def worker_cmd(url: str, stream: str, burst: bool) -> list[str]:
    cmd = [sys.executable, "-m", "kindling.cli", "worker", "--valkey", url, "--stream", stream,
           "--tasks", str(ROOT / "functions/worker/tasks.py"), "--tasks", str(TASKS), "--concurrency", "100"]
    return cmd + (["--burst"] if burst else [])


def throughput(url: str, env: dict, task: str, args: list, n: int) -> dict:
    from kindling.valkey import StreamProducer, connect

    stream = f"bench:{task}:{time.time_ns()}"
    StreamProducer(url, stream=stream).enqueue_many([(task, args, {})] * n)
    t0 = time.perf_counter()
    proc = subprocess.run(worker_cmd(url, stream, burst=True), env=env, capture_output=True, text=True)
    life = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr[-2000:]
    client = connect(url)
    keys = client.keys("kindling:result:*")
    starts, ends, ok = [], [], 0
    from kindling import codec

    for start in range(0, len(keys), 1000):
        for raw in client.mget(keys[start:start + 1000]):
            r = codec.loads(raw)
            if r["task"] == task and r["status"] == "succeeded":
                ok += 1
                starts.append(r["started_at"])
                ends.append(r["finished_at"])
    client.delete(*keys) if keys else None
    span = (max(ends) - min(starts)) / 1000
    return {"task": task, "jobs": n, "succeeded": ok, "first_start_to_last_finish_s": round(span, 3),
            "jobs_per_s": round(n / span), "process_life_s": round(life, 3), "jobs_per_s_incl_startup": round(n / life)}


def latency(url: str, env: dict, n: int) -> dict:
    from kindling.valkey import StreamProducer, ValkeyResultStore

    stream = f"bench:latency:{time.time_ns()}"
    producer = StreamProducer(url, stream=stream)
    store = ValkeyResultStore(url, 600)
    worker = subprocess.Popen(worker_cmd(url, stream, burst=False), env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    to_start, to_seen = [], []
    try:
        producer.enqueue("stamp")  # warm-up: imports, connections
        time.sleep(1.0)
        for _ in range(n):
            t_enqueue = time.time()
            job = producer.enqueue("stamp")
            record = store.wait(job.id, timeout=10)
            t_seen = time.time()
            from kindling import codec

            stamp = codec.loads(record["result"])
            to_start.append((stamp["start"] - t_enqueue) * 1000)
            to_seen.append((t_seen - stamp["end"]) * 1000)
            time.sleep(0.005)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    return {name: {"p50_ms": round(statistics.median(v), 3), "p99_ms": round(pct(v, 0.99), 3), "n": len(v)}
            for name, v in (("enqueue_to_start", to_start), ("finish_to_waiter_sees_result", to_seen))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--noop", type=int, default=10_000)
    ap.add_argument("--sleep", type=int, default=2_000)
    ap.add_argument("--latency", type=int, default=300)
    ns = ap.parse_args()
    ctl("install")
    port = os.environ.get("KINDLING_VALKEY_PORT", "6391")
    ctl("start", port)
    url = ctl("url", port)
    env = dict(os.environ, KINDLING_RESULTS="valkey", KINDLING_LOG="0", KINDLING_VALKEY_BATCH="500")
    try:
        print(throughput(url, env, "noop", [], ns.noop), flush=True)
        print(throughput(url, env, "sleep", [10], ns.sleep), flush=True)
        print(latency(url, env, ns.latency), flush=True)
    finally:
        ctl("stop", port)


if __name__ == "__main__":
    main()
