"""kindling's benchmark harness: what do I gain over Celery, and over the handler I'd write myself?

    python infra/bench/run.py [--quick] [--only cold,memory,tls,critical,imports,throughput,dynamodb,sqs,
                                              lambda_valkey,enqueue,latency,network,read_memory]
                              [--aws localstack|moto] [--out bench-results]

Every scenario runs its systems round-robin within each repetition (interleaved, same
machine, same run) and reports medians with min and max and each median's ratio to the
baseline's. Writes <out>/bench-<stamp>.json (every sample), <out>/bench-<stamp>.md (the
tables) and PNG charts; prints progress, the tables and the ratios against the targets.
It edits no file in the repository: the published figures are docs/benchmarks.md, the one
page a new run's results go to (with its date and commit, as it says there).
Nothing else may run heavy work meanwhile: absolute numbers on a shared machine are noise,
the ratios are the result.

This file is the driver: the arguments, the services, the scenarios in their order and the
report. Each scenario is a module of scenarios/ named as ``--only`` names it, with its
systems, its constants, ``scenario(ns, svc, layer, env, results)`` (measures, fills
``results[name]``), ``report(c)`` (its tables) and ``ratio_lines(c)`` (its ratios against the
targets), where ``c`` is ``results[name]``. What they share (the built layer, the children
they spawn and time, the peers, the drain to the last result) is harness.py; the charts are
charts.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(HERE / "systems")]

from charts import charts  # noqa: E402
from harness import PY, build_function, build_layer, log  # noqa: E402
from scenarios import (  # noqa: E402
    cold,
    critical,
    dynamodb,
    enqueue,
    imports,
    lambda_valkey,
    latency,
    memory,
    network,
    read_memory,
    sqs,
    throughput,
    tls,
)
from services import Services  # noqa: E402

# The scenarios in the order they run and report in: --only takes their names.
SCENARIOS = {"cold": cold, "memory": memory, "tls": tls, "critical": critical, "imports": imports,
             "throughput": throughput, "dynamodb": dynamodb, "sqs": sqs, "lambda_valkey": lambda_valkey,
             "enqueue": enqueue, "latency": latency, "network": network, "read_memory": read_memory}
NAMES = tuple(SCENARIOS)


# ----------------------------------------------------------------------------- report

def report(results: dict, out: Path, stamp: str) -> str:
    md = [f"## kindling benchmarks ({stamp})", "", f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}. {results['meta']['services']} Load average at start "
          f"{results['meta']['loadavg_start'][0]:.2f}, at end {results['meta']['loadavg_end'][0]:.2f}.", ""]
    md.extend(scenario.report(results[name]) for name, scenario in SCENARIOS.items() if name in results)
    md.append("### Ratios and targets\n")
    md.extend(f"- {line}" for line in ratio_lines(results))
    return "\n".join(md) + "\n"


def ratio_lines(results: dict) -> list[str]:
    return [line for name, scenario in SCENARIOS.items() if name in results
            for line in scenario.ratio_lines(results[name])]


# ----------------------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="few repetitions, small N (< 10 minutes)")
    ap.add_argument("--only", default=",".join(NAMES), help=f"comma-separated subset of {','.join(NAMES)}")
    ap.add_argument("--out", default=str(ROOT / "bench-results"))
    ap.add_argument("--reps", type=int, help="override every scenario's repetitions (development)")
    ap.add_argument("--n", type=int, help="override N for throughput/enqueue (CPU-bound: N/5)")
    ap.add_argument("--layer", help="a built layer's python/ dir (default: build one fresh into <out>/layer)")
    ap.add_argument("--function", help="a built worker function's dir (default: build one fresh into <out>/function)")
    ap.add_argument("--aws", choices=("localstack", "moto"), default="localstack",
                    help="AWS endpoint for DynamoDB and SQS (default: LocalStack, started if not running)")
    ns = ap.parse_args()
    only = [s.strip() for s in ns.only.split(",") if s.strip()]
    bad = set(only) - set(NAMES)
    if bad:
        ap.error(f"unknown scenarios {sorted(bad)}; choose from {NAMES}")
    q = ns.quick
    # QUICK stays near 10 minutes: imports 15 (was 20), memory 2 (was 3) and cold 8 (was 10)
    # made room for critical and lambda_valkey. critical needs 7: at 3 its medians moved by
    # 40% between runs.
    ns.cold_reps, ns.import_reps, ns.tp_reps, ns.enq_reps = (8, 15, 3, 3) if q else (20, 40, 5, 5)
    ns.mem_reps, ns.tls_reps = (2, 5) if q else (5, 10)
    ns.critical_reps, ns.drain_cold_reps, ns.drain_lat_n = (7, 5, 10) if q else (10, 20, 100)
    n_override = ns.n
    ns.n, ns.n_cpu = (2000, 1000) if q else (10000, 3000)
    ns.n_sqs = 1000 if q else 5000
    ns.n_ddb = 2000 if q else 5000
    ns.n_e2e, ns.e2e_reps = (300, 1) if q else (1000, 3)
    ns.lat_n = 500 if q else 2000
    ns.n_net, ns.n_kept = network.N_PROCESS, network.N_KEPT
    if ns.reps:
        ns.cold_reps = ns.import_reps = ns.tp_reps = ns.enq_reps = ns.e2e_reps = ns.mem_reps = ns.tls_reps = ns.reps
        ns.critical_reps = ns.drain_cold_reps = ns.drain_lat_n = ns.reps
        ns.lat_n = max(10, ns.reps)
    if n_override:
        ns.n, ns.n_cpu, ns.n_sqs = n_override, max(1, n_override // 5), n_override
        ns.n_ddb = ns.n_e2e = ns.n_net = ns.n_kept = n_override
    out = Path(ns.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    log(f"kindling bench: {', '.join(only)}{' (quick)' if q else ''}; load average {os.getloadavg()}")

    layer = ns.layer or build_layer(out)
    log(f"layer: {layer}")
    # the children that run the handler find it here (systems/cold_child.py, systems/ddb_child.py)
    os.environ["KINDLING_BENCH_FUNCTION"] = ns.function or build_function(out)
    log(f"function: {os.environ['KINDLING_BENCH_FUNCTION']}")
    svc = Services(log=log)
    # SIGTERM (timeout, kill) ends the run through SystemExit, so the finally below stops
    # what it started
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results: dict = {"meta": {"quick": q, "stamp": stamp, "layer": layer, "python": PY,
                              "loadavg_start": os.getloadavg(), "cpus": os.cpu_count()}}
    try:
        svc.start_aws(ns.aws)
        # all but these use Valkey (sqs and lambda_valkey: the deployed stack's ValkeyUrl, stack.py)
        if set(only) - {"imports", "critical"}:
            svc.start_valkey()
        env = dict(os.environ, **svc.aws_env(), KINDLING_BENCH_VALKEY=svc.valkey_url or "redis://127.0.0.1:1/0",
                   # a caller's PYTHONPATH still reaches the children: an A/B puts another tree there
                   PYTHONPATH=os.pathsep.join(filter(None, [str(HERE / "systems"), os.environ.get("PYTHONPATH")])))
        os.environ["KINDLING_BENCH_VALKEY"] = env["KINDLING_BENCH_VALKEY"]
        import celery_app

        results["meta"].update(services=f"AWS: {svc.endpoint_kind}. Valkey: {svc.valkey_kind or 'not used'}.",
                               celery_settings=celery_app.SETTINGS, celery_worker_flags=celery_app.WORKER_FLAGS)
        for name in NAMES:
            if name not in only:
                continue
            log(f"== {name}")
            t0 = time.monotonic()
            SCENARIOS[name].scenario(ns, svc, layer, env, results)
            log(f"== {name} done in {time.monotonic() - t0:.0f} s")
            # What is measured so far, kept if a later scenario stops the run.
            (out / f"bench-{stamp}.partial.json").write_text(json.dumps(results, indent=1, default=str))
    finally:
        svc.close()
    results["meta"]["loadavg_end"] = os.getloadavg()
    jpath = out / f"bench-{stamp}.json"
    jpath.write_text(json.dumps(results, indent=1, default=str))
    md = report(results, out, stamp)
    mpath = out / f"bench-{stamp}.md"
    mpath.write_text(md)
    pngs = charts(results, out, stamp)
    print(md)
    log(f"wrote {jpath}, {mpath}, " + ", ".join(str(p) for p in pngs))
    log("to publish this run: its tables and ratios go to docs/benchmarks.md, with its stamp and commit")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
