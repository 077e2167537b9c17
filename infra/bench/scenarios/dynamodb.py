"""``dynamodb``: results in DynamoDB on the AWS endpoint (the default store), one warm process each.

kindling's StreamWorker and its store calls alone against what the table accepts through
BatchWriteItem alone, and the warm SQS handler (systems/ddb_child.py runs each); the rate
over each process's busy span, and the CPU time per job of the local cloud and of each
system's own process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import stats
from harness import HERE, PY, count_and_drop, fresh_table, log, rotated, span_of

if TYPE_CHECKING:
    from services import Services


def server_pids() -> tuple[int, ...]:
    """LocalStack's process and its DynamoDB Local child (call_costs.py finds them); none
    when LocalStack was not started by infra/localstack/ctl here."""
    from call_costs import servers

    try:
        return servers()
    except (OSError, ValueError, KeyError, SystemExit):
        return ()


def children_cpu_seconds() -> float:
    """CPU time of this process's finished children (each system's child, with its start-up)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


DDB_BASELINE = "BatchWriteItem alone (25 per call, 4 connections)"
DDB_STREAM = "kindling StreamWorker, results in DynamoDB (4 connections)"
DDB_CALLS = "the StreamWorker's store calls alone (check + write, 4 connections)"


def scenario(ns, svc: Services, layer: str, env: dict, results: dict) -> None:
    """Results in DynamoDB on the AWS endpoint (the default store): kindling against what the
    table accepts through BatchWriteItem alone, back to back. Jobs/s over each worker's busy
    span (first dedupe read to last write); every record is counted afterwards."""
    n = ns.n_ddb
    child = [PY, "-S", str(HERE / "systems/ddb_child.py")]

    def batchwrite(connections: int):
        def run(table: str) -> tuple[float, float]:
            return span_of([*child, "batchwrite", "--layer", layer, "--table", table, "--n", str(n),
                            "--connections", str(connections)], env)
        return run

    def storecalls(table: str) -> tuple[float, float]:
        return span_of([*child, "storecalls", "--layer", layer, "--table", table, "--n", str(n), "--batch", "500",
                        "--connections", "4"], env)

    def handler(table: str) -> tuple[float, float]:
        return span_of([*child, "handler", "--layer", layer, "--table", table, "--n", str(n), "--batch", "10"], env)

    def stream(table: str) -> tuple[float, float]:
        from kindling.valkey import StreamProducer

        svc.valkey(0).flushall()
        StreamProducer(svc.valkey_url).enqueue_many([("noop", [], {})] * n)
        return span_of([PY, str(HERE / "systems/ddb_child.py"), "stream", "--layer", layer, "--table", table,
                        "--n", str(n), "--url", svc.valkey_url, "--batch", "500", "--connections", "4"], env)

    # each table gets n records plus the warm-up ones: 1 (handler, batchwrite) plus 1 per extra connection
    systems = {
        DDB_BASELINE: (batchwrite(4), n + 5),
        DDB_STREAM: (stream, n),
        DDB_CALLS: (storecalls, n),
        "BatchWriteItem alone (25 per call, 1 connection)": (batchwrite(1), n + 1),
        "kindling SQS handler, warm, events of 10 (1 connection)": (handler, n + 1),
    }
    runs: dict[str, list[dict]] = {k: [] for k in systems}
    from call_costs import cpu_seconds

    servers = server_pids() if svc.localstack else ()
    # DynamoDB Local's JIT warms up over its first thousands of items: one untimed run first,
    # or the first repetition of every system measures the warm-up. It goes on getting
    # faster after that (BatchWriteItem alone from 1.5 to 0.9 ms of server CPU per job over
    # a full run's repetitions), so each repetition starts with the next system: none is
    # always measured on a colder table than another.
    table = fresh_table(svc)
    batchwrite(4)(table)
    count_and_drop(table)
    for i in range(ns.tp_reps):
        for name, (fn, expect) in rotated(list(systems.items()), i):
            table = fresh_table(svc)
            server0, client0 = sum(map(cpu_seconds, servers)), children_cpu_seconds()
            seconds, rss = fn(table)
            server_s, client_s = sum(map(cpu_seconds, servers)) - server0, children_cpu_seconds() - client0
            stored = count_and_drop(table)
            if stored != expect:
                raise RuntimeError(f"{name}: {stored} records in DynamoDB, expected {expect}")
            run = {"jobs_per_s": n / seconds, "total_s": seconds, "peak_rss_mib": rss,
                   "client_cpu_ms_per_job": 1000 * client_s / n}
            if servers:
                run["server_cpu_ms_per_job"] = 1000 * server_s / n
            runs[name].append(run)
        log(f"dynamodb {i + 1}/{ns.tp_reps} (n={n}): " + ", ".join(
            f"{k.split(' (')[0].split(',')[0]} {v[-1]['jobs_per_s']:.0f}/s" for k, v in runs.items()))
    results["dynamodb"] = {"unit": "jobs/s", "baseline": DDB_BASELINE,
                           "n": n, "endpoint": svc.endpoint_kind, "runs": runs}


def cpu_table(c: dict) -> str:
    """CPU time per job of the local cloud and of each DynamoDB system's own process."""
    lines = ["CPU time per job, medians: the local cloud's (LocalStack and DynamoDB Local, read from /proc "
             "around each run) and the system's own process (its start-up included). Both share the "
             "machine's cores, so a system's rate follows the sum.\n",
             "| system | local cloud ms/job | own process ms/job |", "|---|---:|---:|"]
    for name, runs in c["runs"].items():
        server, own = (stats.summary([r[f] for r in runs if f in r])["median"]
                       for f in ("server_cpu_ms_per_job", "client_cpu_ms_per_job"))
        lines.append(f"| {name} | {stats.fmt(server, 3)} | {stats.fmt(own, 3)} |")
    return "\n".join(lines) + "\n"


def report(c: dict) -> str:
    md = []
    rates = {k: [r["jobs_per_s"] for r in v] for k, v in c["runs"].items()}
    md.append(stats.markdown_table(f"Results in DynamoDB ({c['endpoint'].split(' at ')[0]}): {c['n']} noop jobs, "
                                   "busy span of one warm process", c["unit"],
                                   stats.table_rows(rates, c["baseline"], higher_is_better=True), c["baseline"]))
    if DDB_CALLS in rates:
        md.append("The StreamWorker's store calls alone: the duplicate check (one BatchGetItem per 100 jobs, "
                  "sent while the previous batch's write is in flight) and the write (one BatchWriteItem per 25), "
                  "made by kindling's store with no worker, no Valkey and no jobs. Against it, what the worker "
                  "adds; against BatchWriteItem alone, what the check costs the table.\n")
    md.append(cpu_table(c))
    return "\n".join(md)


def ratio_lines(c: dict) -> list[str]:
    lines = []
    med = lambda xs: stats.summary(xs)["median"]  # noqa: E731
    rates = {k: med([r["jobs_per_s"] for r in v]) for k, v in c["runs"].items()}
    base = rates[c["baseline"]]
    lines.append(stats.verdict("results in DynamoDB: kindling StreamWorker / BatchWriteItem alone (4 connections)",
                               stats.ratio(rates[DDB_STREAM], base), 0.9, at_most=False))
    if DDB_CALLS in rates:  # what the duplicate check costs the table, apart from what the worker adds
        lines.append(stats.verdict("results in DynamoDB: kindling StreamWorker / its store calls alone",
                                   stats.ratio(rates[DDB_STREAM], rates[DDB_CALLS]), 0.9, at_most=False))
        lines.append("results in DynamoDB: the StreamWorker's store calls alone (check + write) / BatchWriteItem "
                     f"alone = {stats.fmt_ratio(stats.ratio(rates[DDB_CALLS], base))}")
        server = {k: med([r["server_cpu_ms_per_job"] for r in v if "server_cpu_ms_per_job" in r])
                  for k, v in c["runs"].items()}
        cpu = stats.ratio(server[DDB_CALLS], server[c["baseline"]])
        if cpu is not None:
            lines.append("results in DynamoDB: the local cloud's CPU per job, the StreamWorker's store calls / "
                         f"BatchWriteItem alone = {stats.fmt_ratio(cpu)}")
    one = rates["BatchWriteItem alone (25 per call, 1 connection)"]
    lines.append("results in DynamoDB: kindling SQS handler (events of 10) / BatchWriteItem alone (1 connection) = "
                 + stats.fmt_ratio(stats.ratio(rates["kindling SQS handler, warm, events of 10 (1 connection)"],
                                               one)))
    return lines
