"""The stream worker's peak memory against its read size, on 5,000 queued no-ops.

    python infra/bench/run.py --only read_memory [--reps 3]      (make bench ONLY=read_memory)

One worker process (``systems/stream_burst.py``: kindling's stream worker with
``systems/kindling_valkey.py``'s result store in Valkey, jobs inline, as the throughput
scenario runs it) drains 5,000 no-ops queued before it starts, for each read size: fixed
(``batch = max_batch = N``: 100, 500, 2,000) and grown (the defaults: from 100, doubling to
2,000); its ``chunk`` is the default. Beside them: the same worker on an empty stream (idle:
started, one empty read, gone) and, with the peers' virtualenv (``make bench`` makes it), arq
on the same 5,000 no-ops (max_jobs=100, as in the throughput scenario; stopped once its
queue is empty). Systems round-robin within each repetition.

Peak RSS is the kernel's high-water mark of the process's memory (``VmHWM`` in
/proc/<pid>/status: the worker prints its own as it ends, arq's is read just before it is
stopped), not a sample: a 5,000 no-op run lasts a fraction of a second, shorter than a
sampler's period. (``ru_maxrss`` would not do: a child forked from the harness keeps the
harness's size in it through exec.) jobs/s is kindling's ``worker.run()`` alone, timed in its process (no interpreter
start), and arq's from spawn to an empty queue: not comparable, shown for the read sizes'
sake.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import children
import harness as h
import stats

HERE = Path(__file__).resolve().parents[1]  # infra/bench
N = 5000
IDLE = "kindling, idle (empty stream)"
GROWN = "kindling, reads grown from 100 to 2,000 (the defaults)"
ARQ = "arq (max_jobs=100)"
SIZES = (100, 500, 2000)


def fixed(size: int) -> str:
    return f"kindling, read size {size:,}"


CONCURRENCY = 100  # as the throughput scenario runs the worker


def hwm_kib(pid: int) -> int:
    """The process's peak resident set so far (``VmHWM``), KiB."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def waited(proc: subprocess.Popen, timeout: float, done=None) -> int | None:
    """Wait for ``proc`` to exit, or given ``done``, until ``done()``: then its peak RSS
    (KiB) is read and its group killed. Past ``timeout``: killed, raised."""
    deadline = time.monotonic() + timeout
    peak = None
    while proc.poll() is None:
        if done is not None and done():
            peak = hwm_kib(proc.pid)
            break
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise RuntimeError(f"{proc.args[:3]}: still running after {timeout:g} s: {children.stderr_tail(proc)}")
        time.sleep(0.005)
    if peak is not None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return peak


def kindling_run(svc, env: dict, batch: int, most: int, n: int) -> dict:
    from kindling.valkey import StreamProducer

    svc.valkey(0).flushall()
    svc.valkey(1).flushall()
    if n:
        StreamProducer(svc.valkey_url, reader=False).enqueue_many([("noop", [], {})] * n)
    with tempfile.TemporaryFile("w+") as out:
        proc = children.popen([sys.executable, str(HERE / "systems/stream_burst.py"), svc.valkey_url, str(batch),
                               str(most), str(CONCURRENCY)], env=env, stdout=out, text=True, start_new_session=True)
        waited(proc, 300)
        out.seek(0)
        printed = out.read().split()
    if proc.returncode != 0 or len(printed) != 3:
        raise RuntimeError(f"kindling worker failed ({proc.returncode}): {children.stderr_tail(proc)}")
    seconds, succeeded, peak_kib = float(printed[0]), int(printed[1]), int(printed[2])
    if succeeded != n:
        raise RuntimeError(f"kindling worker: {succeeded} of {n} jobs succeeded")
    return {"peak_rss_mib": peak_kib / 1024, "jobs_per_s": n / seconds if n else None}


def arq_run(svc, env: dict, n: int) -> dict:
    r0 = svc.valkey(0)
    r0.flushall()
    h.peer_enqueue("arq", env, "noop", n)
    t0 = time.monotonic()
    proc = children.popen(h.peer_cmd("arq", quiet=True), env=dict(env, ARQ_MAX_JOBS="100"), cwd=HERE / "systems",
                          stdout=subprocess.DEVNULL, start_new_session=True)
    ended: list[float] = []

    def done() -> bool:
        if r0.zcard("arq:queue") == 0:  # arq drops a job from its queue as it stores the result
            ended.append(time.monotonic())
            return True
        return False

    peak_kib = waited(proc, 600, done)
    if not ended or peak_kib is None:
        raise RuntimeError(f"arq exited with {proc.returncode}: {children.stderr_tail(proc)}")
    return {"peak_rss_mib": peak_kib / 1024, "jobs_per_s": n / (ended[0] - t0)}


def scenario(ns, svc, layer: str, env: dict, results: dict) -> None:
    systems = {IDLE: lambda: kindling_run(svc, env, 100, 0, 0)}
    for size in SIZES:
        systems[fixed(size)] = lambda size=size: kindling_run(svc, env, size, size, N)
    systems[GROWN] = lambda: kindling_run(svc, env, 100, 0, N)
    if (h.PEERS_BIN / "python").exists():
        systems[ARQ] = lambda: arq_run(svc, env, N)
    else:
        h.log(f"read_memory: arq SKIPPED: no {h.PEERS_BIN / 'python'} (make bench installs it)")
    runs: dict[str, list[dict]] = {k: [] for k in systems}
    for i in range(ns.tp_reps):
        for name, fn in systems.items():
            runs[name].append(fn())
        h.log(f"read_memory {i + 1}/{ns.tp_reps}: " + ", ".join(
            f"{k.split(' (')[0]} {v[-1]['peak_rss_mib']:.1f} MiB" for k, v in runs.items()))
    results["read_memory"] = {"n": N, "runs": runs}


def _median(runs: list[dict], key: str) -> float | None:
    return stats.summary([r[key] for r in runs if r[key] is not None])["median"]


def report(c: dict) -> str:
    runs = c["runs"]
    idle = _median(runs[IDLE], "peak_rss_mib")
    md = [f"### The stream worker's peak RSS against its read size, {c['n']:,} no-ops queued (VmHWM)", "",
          "| system | peak RSS MiB, median | min | max | over idle MiB | jobs/s, median |",
          "|---|---:|---:|---:|---:|---:|"]
    for name, rs in runs.items():
        s = stats.summary([r["peak_rss_mib"] for r in rs])
        over = "" if name == IDLE or idle is None else f"{s['median'] - idle:+.1f}"
        md.append(f"| {name} | {stats.fmt(s['median'])} | {stats.fmt(s['min'])} | {stats.fmt(s['max'])} | {over} "
                  f"| {stats.fmt(_median(rs, 'jobs_per_s'))} |")
    return "\n".join(md) + "\n"


def ratio_lines(c: dict) -> list[str]:
    runs = c["runs"]
    rss = {name: _median(rs, "peak_rss_mib") for name, rs in runs.items()}
    lines = [f"peak RSS, {c['n']:,} no-ops, read size 2,000 / 100: "
             f"{stats.fmt_ratio(stats.ratio(rss[fixed(2000)], rss[fixed(100)]))} "
             f"({stats.fmt(rss[fixed(2000)])} / {stats.fmt(rss[fixed(100)])} MiB; idle {stats.fmt(rss[IDLE])} MiB)"]
    if ARQ in rss:
        lines.append(f"peak RSS, {c['n']:,} no-ops, kindling (defaults) / arq: "
                     f"{stats.fmt_ratio(stats.ratio(rss[GROWN], rss[ARQ]))} "
                     f"({stats.fmt(rss[GROWN])} / {stats.fmt(rss[ARQ])} MiB)")
    return lines
