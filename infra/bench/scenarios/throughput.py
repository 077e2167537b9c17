"""``throughput``: jobs queued in Valkey before the workers start, spawn to the last result.

Three workloads (no-ops, 10 ms sleeps, a CPU-bound hash) for Celery, kindling's
StreamWorker (systems/kindling_valkey.py), a bare batched consumer (bare_consumer.py) and,
with the peers' virtualenv, arq and dramatiq: the rate, the steady rate (10% to 90% of the
results), the time to the first result, peak RSS and peak Valkey connections.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import children
import stats
from harness import HERE, PEERS_BIN, PY, celery_cmd, drain, kill_group, log, new_job, peer_cmd, peer_enqueue

if TYPE_CHECKING:
    from services import Services

ARQ_TP = "arq (max_jobs=100 / 2 processes of 10 for CPU)"
DRAMATIQ_TP = "dramatiq (100 threads / 2 processes for CPU)"
WORKLOADS = {
    # name: (celery task, args, kindling task, args, cpu-bound)
    "noop": ("noop", [], "noop", [], False),
    "sleep 10 ms": ("sleep", [10], "sleep", [10], False),
    "cpu_hash 1000x1KiB": ("cpu_hash", [1000, 1024], "cpu_hash", [1000, 1024], True),
}


def tp_celery(svc: Services, env: dict, workload: str, n: int) -> dict:
    import celery_app
    from celery import group

    task, args, _, _, cpu = WORKLOADS[workload]
    svc.valkey(0).flushall()
    group(celery_app.app.signature(task, args=args) for _ in range(n)).apply_async()
    pool, c = ("prefork", 2) if cpu else ("threads", 100)

    def spawn():
        return [children.popen(celery_cmd(pool, c), env=env, cwd=HERE / "systems", stdout=subprocess.DEVNULL)]
    return drain(svc, spawn, n, "celery-task-meta-")


def tp_kindling(svc: Services, env: dict, workload: str, n: int) -> dict:
    from kindling.valkey import StreamProducer

    _, _, task, args, cpu = WORKLOADS[workload]
    svc.valkey(0).flushall()
    StreamProducer(svc.valkey_url).enqueue_many([(task, args, {})] * n)
    procs = 2 if cpu else 1
    # sync sleep jobs in 100 threads, as the bare consumer and Celery run them (and `kindling worker`
    # --concurrency 100 would); no-op and CPU jobs one after another, as the bare consumer runs them
    cmd = [PY, str(HERE / "systems/kindling_valkey.py"), "--url", svc.valkey_url, "--concurrency", "100",
           "--threads", "100" if task == "sleep" else "0", "--batch", "50" if cpu else "500"]

    def spawn():
        return [children.popen(cmd, env=env, stdout=subprocess.DEVNULL)
                for _ in range(procs)]
    return drain(svc, spawn, n, "kindling-result:")


def tp_bare(svc: Services, env: dict, workload: str, n: int) -> dict:
    import bare_consumer

    task, args, _, _, cpu = WORKLOADS[workload]
    r0 = svc.valkey(0)
    r0.flushall()
    bare_consumer.enqueue(r0, [new_job(task, args) for _ in range(n)])
    threads = 1 if task != "sleep" else 100
    cmd = [PY, str(HERE / "bare_consumer.py"), "--url", svc.valkey_url, "--threads", str(threads),
           "--batch", "50" if cpu else "500"]

    def spawn():
        return [children.popen(cmd, env=env, stdout=subprocess.DEVNULL)
                for _ in range(2 if cpu else 1)]
    return drain(svc, spawn, n, "bare-result:")


def tp_peer(kind: str, svc: Services, env: dict, workload: str, n: int) -> dict:
    """arq or dramatiq as Celery runs: 100 at a time, or 2 processes for CPU work."""
    task, args, _, _, cpu = WORKLOADS[workload]
    r0 = svc.valkey(0)
    r0.flushall()
    peer_enqueue(kind, env, task, n, args)
    if kind == "arq":
        # arq drops a job from its queue (a sorted set) as it stores the result, keys in db 0
        cmds = [peer_cmd("arq", quiet=True)] * (2 if cpu else 1)
        penv = dict(env, ARQ_MAX_JOBS="10" if cpu else "100")  # CPU: the loop runs one at a time anyway
        count, prefix, db = (lambda: n - r0.zcard("arq:queue")), "arq:result:", 0
    else:
        cmds = [peer_cmd("dramatiq", 1, 2) if cpu else peer_cmd("dramatiq", 100, 1)]
        penv, count, prefix, db = env, None, "", 1  # db 1 holds only its results (MD5 keys)

    def spawn():
        return [children.popen(c, env=penv, cwd=HERE / "systems", stdout=subprocess.DEVNULL,
                               start_new_session=True) for c in cmds]
    return drain(svc, spawn, n, prefix, count=count, db=db, stop_proc=kill_group)


def scenario(ns, svc: Services, layer: str, env: dict, results: dict) -> None:
    systems = {"Celery (threads c=100 / prefork c=2 for CPU)": tp_celery,
               "kindling StreamWorker (results in Valkey)": tp_kindling,
               "bare batched consumer (BLMPOP 500)": tp_bare}
    if (PEERS_BIN / "python").exists():
        systems[ARQ_TP] = lambda *a: tp_peer("arq", *a)
        systems[DRAMATIQ_TP] = lambda *a: tp_peer("dramatiq", *a)
    else:
        log(f"throughput: arq and dramatiq SKIPPED: no {PEERS_BIN / 'python'} (make bench installs them)")
    out = {}
    for workload in WORKLOADS:
        n = ns.n_cpu if WORKLOADS[workload][4] else ns.n
        runs: dict[str, list[dict]] = {k: [] for k in systems}
        for i in range(ns.tp_reps):
            for name, fn in systems.items():
                runs[name].append(fn(svc, env, workload, n))
            log(f"throughput {workload} {i + 1}/{ns.tp_reps} (n={n}): " + ", ".join(
                f"{k.split(' ')[0]} {v[-1]['jobs_per_s']:.0f}/s" for k, v in runs.items()))
        out[workload] = {"n": n, "runs": runs}
    results["throughput"] = {"unit": "jobs/s", "baseline": "Celery (threads c=100 / prefork c=2 for CPU)",
                             "workloads": out}


def report(c: dict) -> str:
    tp = c
    md = []
    base = tp["baseline"]
    md.append("Sleep workload: Celery, the bare consumer and kindling all run `time.sleep(0.01)` in 100 threads "
              "(kindling: its `sleep(10)` task on a runner with `threads=100`, as `kindling worker --concurrency "
              "100` runs sync tasks; no-op and CPU jobs run one after another, as in the bare consumer). "
              "CPU workload: 2 processes each (Celery prefork c=2, two kindling/bare workers). Results "
              "in Valkey db 1 for all three. Main rate: N / (spawn to last result), so it includes worker startup; "
              "steady rate: 10% to 90% of results ('-' when they arrived in one batch write). kindling and "
              "the bare consumer fetch 500 per read (50 for the CPU workload, so both processes get work).\n")
    for workload, w in tp["workloads"].items():
        rates = {k: [r["jobs_per_s"] for r in v] for k, v in w["runs"].items()}
        md.append(stats.markdown_table(f"Throughput on Valkey: {w['n']} x {workload}, queued before the "
                                       "workers start (spawn to last result)", "jobs/s",
                                       stats.table_rows(rates, base, higher_is_better=True), base))
        md.append("| system | steady jobs/s (10% to 90% of results) | time to first result s | peak RSS MiB "
                  "| peak Valkey connections |\n|---|---:|---:|---:|---:|")
        for k, v in w["runs"].items():
            d = stats.summary([r["steady_jobs_per_s"] for r in v if r["steady_jobs_per_s"]])
            f = stats.summary([r["first_result_s"] for r in v])
            m = stats.summary([r["peak_rss_mib"] for r in v])
            cn = stats.summary([r["peak_connections"] for r in v])
            md.append(f"| {k} | {stats.fmt(d['median'])} ({stats.fmt(d['min'])}-{stats.fmt(d['max'])}) "
                      f"| {stats.fmt(f['median'], 2)} | {stats.fmt(m['median'])} | {stats.fmt(cn['median'], 0)} |")
        md.append("")
    return "\n".join(md)


def ratio_lines(c: dict) -> list[str]:
    lines = []
    med = lambda xs: stats.summary(xs)["median"]  # noqa: E731
    w = c["workloads"]
    rate = lambda workload, system: med([r["jobs_per_s"] for r in w[workload]["runs"][system]])  # noqa: E731
    celery, ours, bare = "Celery (threads c=100 / prefork c=2 for CPU)", \
        "kindling StreamWorker (results in Valkey)", "bare batched consumer (BLMPOP 500)"
    if "noop" in w:
        lines.append(stats.verdict("throughput noop: kindling / bare batched consumer",
                                   stats.ratio(rate("noop", ours), rate("noop", bare)), 0.25, at_most=False))
        lines.append(f"throughput noop: kindling / Celery = "
                     f"{stats.fmt_ratio(stats.ratio(rate('noop', ours), rate('noop', celery)))}")
    if "sleep 10 ms" in w:
        lines.append(stats.verdict("throughput sleep 10 ms, concurrency 100: kindling / bare batched consumer, "
                                   "spawn to last result", stats.ratio(rate("sleep 10 ms", ours),
                                                                       rate("sleep 10 ms", bare)),
                                   0.9, at_most=False))
        steady = lambda system: med([r["steady_jobs_per_s"] for r in w["sleep 10 ms"]["runs"][system]  # noqa: E731
                                     if r["steady_jobs_per_s"]])
        lines.append(stats.verdict("throughput sleep 10 ms, concurrency 100: kindling / bare batched consumer, "
                                   "steady (10% to 90%)", stats.ratio(steady(ours), steady(bare)),
                                   0.9, at_most=False))
    if "cpu_hash 1000x1KiB" in w:
        lines.append(stats.verdict("throughput CPU, 2 processes: kindling / Celery prefork c=2",
                                   stats.ratio(rate("cpu_hash 1000x1KiB", ours),
                                               rate("cpu_hash 1000x1KiB", celery)), 1, at_most=False))
    peers = [k for k in (celery, ARQ_TP, DRAMATIQ_TP) if k in next(iter(w.values()))["runs"]]
    for workload in w:
        rates = {k: rate(workload, k) for k in peers}
        best = max(rates, key=rates.get)
        lines.append(f"throughput {workload}: kindling / best peer ({best.split(' (')[0]}) = "
                     f"{stats.fmt_ratio(stats.ratio(rate(workload, ours), rates[best]))}")
        rss = {k: med([r["peak_rss_mib"] for r in runs]) for k, runs in w[workload]["runs"].items()}
        least = min(peers, key=rss.get)
        lines.append(f"peak RSS {workload}: kindling / leanest peer ({least.split(' (')[0]}) = "
                     f"{stats.fmt_ratio(stats.ratio(rss[ours], rss[least]))}")
    for workload, v in w.items():
        rss = {k: med([r["peak_rss_mib"] for r in runs]) for k, runs in v["runs"].items()}
        lines.append(stats.verdict(f"peak RSS {workload}: kindling / Celery", stats.ratio(rss[ours], rss[celery]),
                                   0.5))
    return lines
