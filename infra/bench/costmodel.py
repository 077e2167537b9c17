"""Capacity and cost on real AWS, on paper: a model fed by one bench run, not a measurement.

    python infra/bench/costmodel.py bench-results/bench-<stamp>.json [--memory-mb 512] [--job-ms 100]

Measured here (read from the bench JSON, printed first): the warm per-instance rate of the
Lambda worker (``dynamodb`` scenario: the SQS handler called with events of 10 noop jobs,
each event a duplicate check and a write to DynamoDB, on LocalStack on the bench machine)
and Celery's rates (``throughput`` scenario: noop and sleep-10-ms jobs, threads c=100, on
the bench machine's CPUs, broker and worker together). Everything else is a published AWS
price or limit (the constants below, us-east-1, on-demand; check them before relying on
them) or an assumption stated where it is made:

* a job's batch on Lambda takes the measured per-batch time (10 jobs / the per-instance
  rate) plus, for timed jobs, ``batch x job time``: synchronous tasks run one by one;
* producers send batches of 10 (``SendMessageBatch``); the event source mapping receives
  and deletes in batches of 10; every job succeeds (no DLQ, no retries, no conditional
  puts);
* a record is under 1 KB (a noop record is ~270 bytes), so one write request unit each for
  the table and for its one index entry (``by_task``; a succeeded record has no
  ``by_status`` entry), and one strongly consistent read request unit for the duplicate
  check (charged whether or not the item exists): :func:`units_per_job`, for each results
  policy and with the ``by_task`` index on or off (tests/unit/test_request_units.py counts
  the same units from the worker's own calls, and holds this function to them); a policy
  that records no success (``failures``, ``none``) makes no DynamoDB call for a batch of
  successes, but its invocation is still priced at the measured per-batch time, which
  included both round trips (so Lambda's line overstates it);
* the Powertools handler a user would write instead (its batch processor, one ``put_item``
  per job into a table without indexes, no duplicate check) is priced at the same
  per-batch time: one write unit per job;
* a Celery node has the bench machine's CPUs and runs at the measured rate (the bench ran
  broker and worker on the same CPUs, so this may overstate the fleet); its broker and
  result store are not priced.

Not priced anywhere: free tiers, CloudWatch Logs and metrics, X-Ray, point-in-time
recovery, KMS, data transfer, idle polling of an empty queue.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

# -- published prices, us-east-1, on-demand (USD) -------------------------------------------
# As last known from the AWS pricing pages; the date is when each price came into force.
LAMBDA_REQUEST_USD = 0.20 / 1e6  # per request; unchanged since Lambda's launch pricing (2014)
LAMBDA_GB_S_X86_USD = 0.0000166667  # per GB-second, first tier, x86_64 (since 1 ms billing, 2020-12-01)
LAMBDA_GB_S_ARM_USD = 0.0000133334  # per GB-second, first tier, arm64 (since Graviton2 Lambda, 2021-09-29)
SQS_STANDARD_REQUEST_USD = 0.40 / 1e6  # per request (64 KB chunk), standard queue, beyond the free tier
SQS_FIFO_REQUEST_USD = 0.50 / 1e6  # per request, FIFO queue
PRICES_AS_OF = {"Lambda": "2021-09-29", "SQS": "2021 (unchanged since)", "DynamoDB on-demand": "2024-11-01",
                "EC2 c6i/c7g on-demand": "2022-05 (c7g launch; unchanged since)",
                "Lambda SnapStart (Python)": "2024-11-18"}
DDB_WRU_USD = 0.625 / 1e6  # per write request unit, on-demand, standard table class (50% cut of 2024-11-01)
DDB_RRU_USD = 0.125 / 1e6  # per read request unit, on-demand (same cut)
DDB_STORAGE_GB_MONTH_USD = 0.25  # per GB-month, standard table class, beyond the first 25 GB
# Start-up. INIT is billed as duration for on-demand ZIP functions on managed runtimes since
# 2025-08-01; SnapStart for Python (3.12+) since 2024-11-18 bills its cache and its restores.
INIT_BILLED_SINCE = "2025-08-01"
SNAPSTART_CACHE_GB_S_USD = 0.0000015046  # per GB-second a published version's snapshot stays cached
SNAPSTART_RESTORE_GB_USD = 0.0001397998  # per GB restored (each execution environment resumed)
SNAPSTART_MIN_CACHE_S = 3 * 3600  # a version's cache is billed for at least 3 hours
EC2_X86 = ("c6i.large", 2, 0.085)  # (type, vCPUs, USD per hour), Linux on-demand
EC2_ARM = ("c7g.large", 2, 0.0725)

# -- published limits (defaults; those marked adjustable move through Service Quotas) --------
LAMBDA_ACCOUNT_CONCURRENCY = 1_000  # concurrent executions per Region, adjustable
ESM_MAX_CONCURRENCY_SETTING = 1_000  # ScalingConfig.MaximumConcurrency's highest value (template MaxValue)
ESM_SQS_MAX_BATCHES = 1_250  # batches one SQS event source mapping processes at once, at most
ESM_SQS_SCALE_PER_MIN = 300  # concurrency a mapping adds per minute, default mode
ESM_PROVISIONED_MAX_CONCURRENCY = 20_000  # one mapping in provisioned mode (pollers), at most
ESM_PROVISIONED_SCALE_PER_MIN = 1_000  # concurrency it adds per minute
SQS_STANDARD_IN_FLIGHT = 120_000  # received but not deleted messages per standard queue
SQS_FIFO_TPS = 300  # API calls per second per action, FIFO without high-throughput mode
SQS_FIFO_HIGH_THROUGHPUT_TPS = 70_000  # per action, high-throughput FIFO, us-east-1
SQS_BATCH = 10  # messages per SendMessageBatch / ReceiveMessage / DeleteMessageBatch
DDB_PARTITION_WCU = 1_000  # write units per second per partition (table or index)
DDB_PARTITION_RCU = 3_000  # read units per second per partition
DDB_NEW_ON_DEMAND_WRU = 4_000  # a new on-demand table serves this at once; more after it has scaled
DDB_NEW_ON_DEMAND_RRU = 12_000
DDB_TABLE_WRU_QUOTA = 40_000  # per table (and per index), on-demand, adjustable
DDB_TABLE_RRU_QUOTA = 40_000
DDB_ACCOUNT_WCU_QUOTA = 80_000  # per Region, provisioned tables; adjustable

# -- kindling's own figures (template.yaml, kindling.core.records) --------------------------------
EVENT_BATCH = 10  # the template's BatchSize default: jobs per invocation
INDEX_SHARDS = 4  # kindling.core.records.SHARDS: by_task's key is <task>#<0..3>
TABLE_WRU_PER_JOB = 1  # BatchWriteItem put of the succeeded record (under 1 KB)
INDEX_WRU_PER_JOB = 1  # its by_task entry
RRU_PER_JOB = 1  # the BatchGetItem duplicate check, strongly consistent
RESULTS_POLICIES = ("all", "failures", "none")  # kindling.core.policy.RESULTS_POLICIES
POWERTOOLS = "Powertools batch handler, one put_item per job"
SQS_REQUESTS_PER_BATCH = 3  # SendMessageBatch, the mapping's ReceiveMessage, its DeleteMessageBatch
RECORD_GB = (270 + 100 + 250 + 100) / 1e9  # item + overhead, index entry + overhead (noop record)
RESULT_TTL_DAYS = 14  # the template's ResultTtlDays default

HANDLER = "kindling SQS handler"
CELERY = "Celery"
RATES = (1_000, 10_000, 100_000)


# -- inputs -------------------------------------------------------------------------------------


def _median_rate(runs: dict, prefix: str) -> tuple[str, float, list[float]]:
    for name, values in runs.items():
        if name.startswith(prefix):
            rates = [r["jobs_per_s"] for r in values]
            return name, statistics.median(rates), rates
    raise KeyError(f"no system starting with {prefix!r} in {sorted(runs)}")


def read_inputs(bench: dict) -> dict:
    """The measured figures the model uses, from a bench JSON (``make bench``)."""
    if "dynamodb" not in bench or "throughput" not in bench:
        raise ValueError("the bench JSON needs the dynamodb and throughput scenarios "
                         "(make bench ONLY=dynamodb,throughput)")
    handler, rate, rates = _median_rate(bench["dynamodb"]["runs"], HANDLER)
    workloads = bench["throughput"]["workloads"]
    sleep = next((w for w in workloads if w.startswith("sleep")), None)
    if "noop" not in workloads or sleep is None:
        raise ValueError(f"the throughput scenario needs the noop and sleep workloads, has {sorted(workloads)}")
    celery, celery_noop, noop_runs = _median_rate(workloads["noop"]["runs"], CELERY)
    _, celery_sleep, sleep_runs = _median_rate(workloads[sleep]["runs"], CELERY)
    meta = bench.get("meta", {})
    return {"handler": handler, "handler_rate": rate, "handler_runs": rates,
            "endpoint": bench["dynamodb"].get("endpoint", "?"), "celery": celery, "celery_noop": celery_noop,
            "celery_noop_runs": noop_runs, "celery_sleep": celery_sleep, "celery_sleep_runs": sleep_runs,
            "sleep_workload": sleep,
            "cpus": meta.get("cpus", 2), "stamp": meta.get("stamp", "?"), "quick": meta.get("quick")}


# -- the model (pure) ------------------------------------------------------------------------------


def batch_seconds(handler_rate: float, job_s: float) -> float:
    """One invocation's time: the measured per-batch time plus the jobs' own, one by one."""
    return EVENT_BATCH / handler_rate + EVENT_BATCH * job_s


def units_per_job(results: str = "all", task_index: bool = True) -> tuple[float, float]:
    """(write, read) request units per succeeded job under a results policy, with the
    ``by_task`` index on or off. A success that keeps no record is neither read first (no
    duplicate check) nor written."""
    if results not in RESULTS_POLICIES:
        raise ValueError(f"results must be one of {RESULTS_POLICIES}, got {results!r}")
    if results != "all":
        return 0.0, 0.0
    return float(TABLE_WRU_PER_JOB + (INDEX_WRU_PER_JOB if task_index else 0)), float(RRU_PER_JOB)


def per_million(inputs: dict, job_s: float, memory_mb: int, results: str = "all",
                task_index: bool = True) -> dict[str, float]:
    """USD per million jobs, by line item."""
    batches = 1e6 / EVENT_BATCH
    gb_s = batches * batch_seconds(inputs["handler_rate"], job_s) * memory_mb / 1024
    sqs_requests = 1e6 / SQS_BATCH * SQS_REQUESTS_PER_BATCH
    wru, rru = units_per_job(results, task_index)
    record_gb = RECORD_GB if task_index else (270 + 100) / 1e9  # no index entry
    stored_gb_months = 1e6 * (record_gb if wru else 0.0) * RESULT_TTL_DAYS / 30
    return {
        "lambda requests": batches * LAMBDA_REQUEST_USD,
        "lambda GB-s x86": gb_s * LAMBDA_GB_S_X86_USD,
        "lambda GB-s arm64": gb_s * LAMBDA_GB_S_ARM_USD,
        "sqs standard": sqs_requests * SQS_STANDARD_REQUEST_USD,
        "sqs fifo": sqs_requests * SQS_FIFO_REQUEST_USD,
        "dynamodb writes": 1e6 * wru * DDB_WRU_USD,
        "dynamodb reads": 1e6 * rru * DDB_RRU_USD,
        "dynamodb storage": stored_gb_months * DDB_STORAGE_GB_MONTH_USD,
    }


def totals(items: dict[str, float]) -> dict[str, float]:
    """kindling on a standard queue, x86 and arm64."""
    shared = items["lambda requests"] + items["sqs standard"] + items["dynamodb writes"] + items["dynamodb reads"] \
        + items["dynamodb storage"]
    return {"x86": shared + items["lambda GB-s x86"], "arm64": shared + items["lambda GB-s arm64"]}


def powertools_per_million(inputs: dict, job_s: float, memory_mb: int) -> dict[str, float]:
    """The hand-written handler: Lambda and SQS as kindling's, one write unit per job (a
    ~270-byte item in a table without indexes), no read."""
    items = per_million(inputs, job_s, memory_mb, "all", task_index=False)
    items["dynamodb reads"] = 0.0
    return items


def policy_rows(inputs: dict, memory_mb: int) -> list[tuple[str, dict[str, float]]]:
    """Per million noop jobs, for each results policy and index setting, then Powertools."""
    rows = [(f"results={results!r}, by_task {'on' if index else 'off'}",
             per_million(inputs, 0.0, memory_mb, results, index))
            for results in RESULTS_POLICIES for index in (True, False)]
    return [*rows, (POWERTOOLS, powertools_per_million(inputs, 0.0, memory_mb))]


def celery_node_rate(inputs: dict, job_s: float) -> float:
    """Jobs/s of one Celery node: the measured noop rate, or for timed jobs (waiting, not
    computing) the lower of the measured sleep-workload rate and what 100 threads allow."""
    if job_s <= 0:
        return inputs["celery_noop"]
    return min(inputs["celery_sleep"], 100 / job_s)


def celery_per_million(inputs: dict, job_s: float) -> dict[str, float]:
    rate = celery_node_rate(inputs, job_s)
    hours = 1e6 / (rate * 3600)
    return {"x86": hours * EC2_X86[2], "arm64": hours * EC2_ARM[2]}


def limits(inputs: dict, job_s: float) -> list[tuple[str, float, str]]:
    """Each limit as (name, the jobs/s it allows, what the user changes when it binds)."""
    per_instance = EVENT_BATCH / batch_seconds(inputs["handler_rate"], job_s)
    in_flight_s = batch_seconds(inputs["handler_rate"], job_s)
    table_wru = TABLE_WRU_PER_JOB
    return [
        ("ESM MaximumConcurrency = 10 (template default)", 10 * per_instance,
         "raise MaxConcurrency (up to 1,000)"),
        ("new on-demand table: 4,000 WRU/s at once", DDB_NEW_ON_DEMAND_WRU / table_wru,
         "pre-warm the table (warm throughput) or ramp up over ~30 min"),
        (f"by_task index: {INDEX_SHARDS} shards x 1,000 WCU/s, one task",
         INDEX_SHARDS * DDB_PARTITION_WCU / INDEX_WRU_PER_JOB,
         "spread jobs over tasks or raise kindling.core.records.SHARDS"),
        ("Lambda: 1,000 concurrent per Region", LAMBDA_ACCOUNT_CONCURRENCY * per_instance,
         "raise the concurrency quota"),
        ("ESM MaximumConcurrency at its maximum, 1,000", ESM_MAX_CONCURRENCY_SETTING * per_instance,
         "several queues (a mapping each), or async tasks"),
        ("one SQS mapping: 1,250 batches at once", ESM_SQS_MAX_BATCHES * per_instance,
         "several queues"),
        ("table: 40,000 WRU/s quota", DDB_TABLE_WRU_QUOTA / table_wru,
         "raise the table's write quota"),
        ("table: 40,000 RRU/s quota (duplicate check)", DDB_TABLE_RRU_QUOTA / RRU_PER_JOB,
         "raise the table's read quota"),
        ("SQS standard: 120,000 in flight", SQS_STANDARD_IN_FLIGHT / in_flight_s,
         "several queues"),
    ]


FIFO_LIMITS = [
    ("of FIFO's 300 calls/s per action", SQS_FIFO_TPS * SQS_BATCH, "high-throughput mode"),
    ("of high-throughput FIFO's 70,000", SQS_FIFO_HIGH_THROUGHPUT_TPS * SQS_BATCH, "several queues"),
]


def binding(inputs: dict, rate: float, job_s: float) -> list[tuple[str, float, str]]:
    """The limits the rate exceeds, in the order they bind as traffic grows (the lowest
    first); if none, the nearest one. Each as (name, rate / allowed, change)."""
    rows = sorted(((name, rate / allowed, change) for name, allowed, change in limits(inputs, job_s)),
                  key=lambda row: -row[1])
    over = [row for row in rows if row[1] > 1]
    return over or rows[:1]


def concurrency_needed(inputs: dict, rate: float, job_s: float) -> int:
    return math.ceil(rate * batch_seconds(inputs["handler_rate"], job_s) / EVENT_BATCH)


# -- start-up: INIT, SnapStart, the trigger's modes -------------------------------------------------


def _gb_s_price(arch: str) -> float:
    return {"x86": LAMBDA_GB_S_X86_USD, "arm64": LAMBDA_GB_S_ARM_USD}[arch]


def init_usd_per_million(init_ms: float, cold_starts_per_million: float, memory_mb: int, arch: str) -> float:
    """What the INIT phases cost per million jobs, billed as duration (since 2025-08-01)."""
    return cold_starts_per_million * init_ms / 1000 * memory_mb / 1024 * _gb_s_price(arch)


def restore_usd_per_million(cold_starts_per_million: float, memory_mb: int) -> float:
    """What the same cold starts cost as SnapStart restores (per GB, whatever the init took)."""
    return cold_starts_per_million * memory_mb / 1024 * SNAPSTART_RESTORE_GB_USD


def snapstart_break_even_init_ms(arch: str) -> float:
    """The init beyond which a restore is cheaper than the INIT it replaces (any memory size)."""
    return SNAPSTART_RESTORE_GB_USD / _gb_s_price(arch) * 1000


def snapstart_cache_usd(memory_mb: int, cached_s: float) -> float:
    """A published version's snapshot cache, for ``cached_s`` seconds (at least 3 hours)."""
    return memory_mb / 1024 * max(cached_s, SNAPSTART_MIN_CACHE_S) * SNAPSTART_CACHE_GB_S_USD


def trigger_ceiling(provisioned: bool) -> int:
    """The most concurrent invocations one SQS mapping drives."""
    if provisioned:
        return ESM_PROVISIONED_MAX_CONCURRENCY
    return min(ESM_MAX_CONCURRENCY_SETTING, ESM_SQS_MAX_BATCHES)


def minutes_to_reach(concurrency: int, provisioned: bool) -> int | None:
    """Minutes from idle to ``concurrency`` on one mapping; None beyond its ceiling."""
    if concurrency > trigger_ceiling(provisioned):
        return None
    return math.ceil(concurrency / (ESM_PROVISIONED_SCALE_PER_MIN if provisioned else ESM_SQS_SCALE_PER_MIN))


INIT_INPUTS_MS = (100, 450, 2_000, 10_000)  # inits to price: a stdlib-only handler, boto3 and a client, heavy ones
COLD_STARTS_PER_MILLION = (100, 1_000, 10_000)  # churn: cold starts per million jobs


def startup_report(memory_mb: int) -> str:
    """INIT against SnapStart restores, and the trigger's two modes: published prices and
    limits only, no bench run."""
    out = [f"Start-up on paper: Lambda {memory_mb} MB; INIT billed as duration since {INIT_BILLED_SINCE}; "
           f"SnapStart prices as of {PRICES_AS_OF['Lambda SnapStart (Python)']}", "",
           "### INIT or SnapStart restore, USD per million jobs (x86)", "",
           "| init | " + " | ".join(f"{c:,} cold starts / M jobs: INIT / restore" for c in COLD_STARTS_PER_MILLION)
           + " |", "|---:|" + "---:|" * len(COLD_STARTS_PER_MILLION)]
    for init_ms in INIT_INPUTS_MS:
        cells = [f"{_usd(init_usd_per_million(init_ms, c, memory_mb, 'x86'))} / "
                 f"{_usd(restore_usd_per_million(c, memory_mb))}" for c in COLD_STARTS_PER_MILLION]
        out.append(f"| {init_ms:,} ms | " + " | ".join(cells) + " |")
    out += ["", f"A restore costs less than the INIT it replaces only beyond an init of "
            f"{snapstart_break_even_init_ms('x86'):,.0f} ms on x86 ({snapstart_break_even_init_ms('arm64'):,.0f} ms "
            f"on arm64), at any memory size. Each published version's snapshot cache: "
            f"{_usd(snapstart_cache_usd(memory_mb, 30 * 86_400))} a month at {memory_mb} MB "
            f"(at least 3 hours, {_usd(snapstart_cache_usd(memory_mb, 0))}, per version published).", "",
           "### The SQS trigger: default or provisioned mode (one mapping)", "",
           "| | most concurrent invocations | added per minute | minutes from idle to 1,000 / 5,000 / 20,000 |",
           "|---|---:|---:|---:|"]
    for label, provisioned, per_min in (("default (MaxConcurrency)", False, ESM_SQS_SCALE_PER_MIN),
                                        ("provisioned (MinimumPollers > 0)", True, ESM_PROVISIONED_SCALE_PER_MIN)):
        reach = " / ".join("-" if (m := minutes_to_reach(n, provisioned)) is None else f"{m}"
                           for n in (1_000, 5_000, 20_000))
        out.append(f"| {label} | {trigger_ceiling(provisioned):,} | {per_min:,} | {reach} |")
    out += ["", "Not priced: provisioned mode's event poller units (billed per hour while provisioned, the "
            "minimum always), Lambda's own concurrency quota (1,000 per Region by default)."]
    return "\n".join(out)


# -- report ---------------------------------------------------------------------------------------


def _usd(x: float) -> str:
    return f"${x:,.3f}" if x < 10 else f"${x:,.0f}"


def report(inputs: dict, path: str, memory_mb: int, job_ms: float) -> str:
    job_s = job_ms / 1000
    out = [f"Capacity and cost on paper (a model, not a measurement), from {path}", "",
           "Measured in that bench run (LocalStack on the bench machine, not AWS):",
           f"- {inputs['handler']}: median {inputs['handler_rate']:,.0f} jobs/s per warm instance "
           f"(runs {', '.join(f'{r:,.0f}' for r in inputs['handler_runs'])}; endpoint {inputs['endpoint']}); "
           f"{1000 * EVENT_BATCH / inputs['handler_rate']:.1f} ms per event of {EVENT_BATCH}",
           f"- {inputs['celery']}, noop: median {inputs['celery_noop']:,.0f} jobs/s "
           f"(runs {', '.join(f'{r:,.0f}' for r in inputs['celery_noop_runs'])}); "
           f"{inputs['sleep_workload']}: {inputs['celery_sleep']:,.0f} jobs/s, on {inputs['cpus']} CPUs",
           f"- bench stamp {inputs['stamp']}{' (QUICK)' if inputs['quick'] else ''}", "",
           f"Model: Lambda {memory_mb} MB, events of {EVENT_BATCH}, standard queue, every job succeeds; "
           f"prices us-east-1 on-demand as of {', '.join(f'{k} {v}' for k, v in PRICES_AS_OF.items())}.", ""]
    for label, js in (("noop jobs", 0.0), (f"{job_ms:g} ms jobs", job_s)):
        per_instance = EVENT_BATCH / batch_seconds(inputs["handler_rate"], js)
        out += [f"### {label}: {per_instance:,.1f} jobs/s per instance", "",
                "| jobs/s | Lambda concurrency | binds first (load / limit) | the user changes |",
                "|---:|---:|---|---|"]
        for rate in RATES:
            rows = binding(inputs, rate, js)
            first, load, _ = rows[0]
            if load > 1:
                then = f"; then {', '.join(n for n, _, _ in rows[1:])}" if rows[1:] else ""
                binds, change = f"{first} ({load:.1f}x){then}", "; ".join(dict.fromkeys(c for _, _, c in rows))
            else:
                binds, change = f"nothing (nearest: {first}, {load:.0%})", "nothing"
            out.append(f"| {rate:,} | {concurrency_needed(inputs, rate, js):,} | {binds} | {change} |")
        out.append("")
    fifo = [f"{rate:,}/s: " + ", ".join(f"{rate / allowed:.2f}x {n}" for n, allowed, _ in FIFO_LIMITS)
            for rate in RATES]
    out += ["A FIFO queue instead (load / limit, batches of 10 messages per call): " + "; ".join(fifo) + ".", ""]
    out += ["### Cost per million jobs (USD)", "",
            "| | Lambda requests | Lambda GB-s x86 / arm64 | SQS standard | DynamoDB writes | DynamoDB reads "
            "| DynamoDB storage (14 d) | kindling x86 / arm64 | Celery on EC2 x86 / arm64 (compute only) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, js in (("noop", 0.0), (f"{job_ms:g} ms", job_s)):
        items, celery = per_million(inputs, js, memory_mb), celery_per_million(inputs, js)
        total = totals(items)
        out.append(f"| {label} | {_usd(items['lambda requests'])} | {_usd(items['lambda GB-s x86'])} / "
                   f"{_usd(items['lambda GB-s arm64'])} | {_usd(items['sqs standard'])} | "
                   f"{_usd(items['dynamodb writes'])} | {_usd(items['dynamodb reads'])} | "
                   f"{_usd(items['dynamodb storage'])} | {_usd(total['x86'])} / {_usd(total['arm64'])} | "
                   f"{_usd(celery['x86'])} / {_usd(celery['arm64'])} |")
    out += ["", f"### Cost per million noop jobs by results policy and index ({memory_mb} MB)", "",
            "Every job succeeds; write and read units per job as tests/unit/test_request_units.py counts them "
            "from the worker's calls.", "",
            "| | write units / read units per job | DynamoDB | Lambda + SQS x86 | total x86 / arm64 |",
            "|---|---:|---:|---:|---:|"]
    for label, items in policy_rows(inputs, memory_mb):
        total = totals(items)
        ddb = items["dynamodb writes"] + items["dynamodb reads"] + items["dynamodb storage"]
        wru, rru = (items["dynamodb writes"] / DDB_WRU_USD / 1e6, items["dynamodb reads"] / DDB_RRU_USD / 1e6)
        out.append(f"| {label} | {wru:g} / {rru:g} | {_usd(ddb)} | {_usd(total['x86'] - ddb)} | "
                   f"{_usd(total['x86'])} / {_usd(total['arm64'])} |")
    out += ["", "### Celery fleet on EC2 sized to the same rate (always on, compute only)", "",
            f"| jobs/s | nodes for noop | nodes for {job_ms:g} ms jobs | USD per hour x86 ({EC2_X86[0]}) / arm64 "
            f"({EC2_ARM[0]}), noop | kindling USD per hour x86, noop |", "|---:|---:|---:|---:|---:|"]
    noop_total = totals(per_million(inputs, 0.0, memory_mb))["x86"]
    for rate in RATES:
        nodes = math.ceil(rate / celery_node_rate(inputs, 0.0))
        timed = math.ceil(rate / celery_node_rate(inputs, job_s))
        out.append(f"| {rate:,} | {nodes:,} | {timed:,} | {_usd(nodes * EC2_X86[2])} / {_usd(nodes * EC2_ARM[2])} | "
                   f"{_usd(noop_total * rate * 3600 / 1e6)} |")
    out += ["", "Not priced: free tiers, Celery's broker and result store, CloudWatch Logs and metrics, X-Ray, "
            "point-in-time recovery, KMS, data transfer, idle polling."]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bench_json", nargs="?", help="a bench JSON with the dynamodb and throughput scenarios")
    ap.add_argument("--start-up", action="store_true",
                    help="INIT against SnapStart, and the trigger's modes: prices and limits only, no bench JSON")
    ap.add_argument("--memory-mb", type=int, default=512, help="the worker's memory (template default 512)")
    ap.add_argument("--job-ms", type=float, default=100.0, help="the timed job's duration")
    ns = ap.parse_args(argv)
    if not 128 <= ns.memory_mb <= 10_240:
        ap.error("--memory-mb must be between 128 and 10240 (Lambda's range)")
    if ns.job_ms <= 0:
        ap.error("--job-ms must be positive")
    if ns.start_up:
        print(startup_report(ns.memory_mb))
        return 0
    if ns.bench_json is None:
        ap.error("a bench JSON is needed (or --start-up)")
    path = Path(ns.bench_json)
    try:
        bench = json.loads(path.read_text())
        inputs = read_inputs(bench)
    except (OSError, ValueError, KeyError) as exc:
        print(f"costmodel: {path}: {exc}", file=sys.stderr)
        return 2
    print(report(inputs, str(path), ns.memory_mb, ns.job_ms))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
