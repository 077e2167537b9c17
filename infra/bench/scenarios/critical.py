"""The cold start's critical path: what kindling's first batch costs beyond its DynamoDB calls.

At 1,769 MB's CPU share (cpushare.py), over HTTP and over HTTPS (the TLS proxy of tls.py),
interleaved, one fresh child each:

- kindling's first batch (the SQS handler on one noop job): a duplicate check (BatchGetItem)
  and the write (BatchWriteItem), on one connection;
- the same handler on a job of a task declared ``skip_succeeded=False``: the write alone;
- the floor: a bare ``python -S`` making one PutItem (scenario ``cold``'s floor);
- one round trip: a child as the floor that then times BatchGetItem requests shaped as the
  duplicate check on its open connection (the median of five).

Targets: the first batch within 1.2x of floor + one round trip (the read it adds), and the
write-only batch within 1.2x of the floor. The report pieces are pure
(tests/tooling/test_bench_report.py).
"""

from __future__ import annotations

import subprocess
import sys

import stats
from harness import cold_child, log, new_job, sqs_event

KINDLING = "kindling first batch (read + write)"
WRITE_ONLY = "kindling, task with skip_succeeded=False (write only)"
FLOOR = "floor (bare -S + 1 PutItem)"
ROUND_TRIP = "one round trip (BatchGetItem, open connection)"
PROTOCOLS = ("HTTP", "HTTPS")
TARGET = 1.2


def scenario(ns, svc, layer: str, env: dict, results: dict) -> None:
    from cold_child import floor_cmd, kindling_cmd, round_trip_cmd, write_only_cmd
    from cpushare import CgroupUnavailable, CpuShare

    py = sys.executable
    envs = {"HTTP": env, "HTTPS": dict(env, **svc.start_tls())}

    def round_trip(e: dict, share) -> float:
        job = new_job()
        done = subprocess.run(round_trip_cmd(py, layer), env=dict(e, KINDLING_BENCH_EVENT=repr(sqs_event(job))),
                              capture_output=True, text=True, timeout=300,
                              preexec_fn=share.join if share is not None else None)
        if done.returncode != 0 or "RTT" not in done.stdout:
            raise RuntimeError(f"round trip child failed ({done.returncode}): {done.stderr[-2000:]}")
        return float(done.stdout.split("RTT", 1)[1].split()[0])

    def systems_for(proto: str) -> dict:
        e = envs[proto]
        return {
            f"{KINDLING}, {proto}": lambda share: cold_child(kindling_cmd(py, layer), e, svc, new_job(), share),
            f"{WRITE_ONLY}, {proto}": lambda share: cold_child(write_only_cmd(py, layer), e, svc,
                                                               new_job("noop_write_only"), share),
            f"{FLOOR}, {proto}": lambda share: cold_child(floor_cmd(py, layer), e, svc, new_job(), share),
            f"{ROUND_TRIP}, {proto}": lambda share: round_trip(e, share),
        }

    systems = {k: v for proto in PROTOCOLS for k, v in systems_for(proto).items()}
    try:
        share = CpuShare.create(1769)
        cpu = f"1,769 MB's CPU share ({share.describe()})"
    except CgroupUnavailable as exc:
        share, cpu = None, f"the whole machine (no CPU quota: {exc})"
    log(f"critical: on {cpu}")
    samples: dict[str, list[float]] = {k: [] for k in systems}
    try:
        for fn in systems.values():  # untimed warm-up
            fn(share)
        for i in range(ns.critical_reps):
            for name, fn in systems.items():
                samples[name].append(fn(share))
            log(f"critical {i + 1}/{ns.critical_reps}: " + "; ".join(ratio_lines({"samples": samples})))
    finally:
        if share is not None:
            share.remove()
    results["critical"] = {"unit": "ms", "samples": samples,
                           "note": f"on {cpu}; HTTPS through the TLS proxy of the tls scenario"}


# ----------------------------------------------------------------------------- report (pure)

def medians(samples: dict[str, list[float]], proto: str) -> dict[str, float | None]:
    """The four medians of one protocol, keyed KINDLING, WRITE_ONLY, FLOOR, ROUND_TRIP."""
    return {k: stats.summary(samples.get(f"{k}, {proto}", []))["median"]
            for k in (KINDLING, WRITE_ONLY, FLOOR, ROUND_TRIP)}


def ratios(samples: dict[str, list[float]], proto: str) -> dict[str, float | None]:
    """``first_batch``: kindling / (floor + one round trip); ``write_only``: write-only / floor."""
    m = medians(samples, proto)
    bound = None if m[FLOOR] is None or m[ROUND_TRIP] is None else m[FLOOR] + m[ROUND_TRIP]
    return {"first_batch": stats.ratio(m[KINDLING], bound), "write_only": stats.ratio(m[WRITE_ONLY], m[FLOOR]),
            "bound": bound}


def report(c: dict) -> str:
    rows = stats.table_rows(c["samples"], None)
    md = [stats.markdown_table(f"Cold start critical path: the first batch against its DynamoDB calls ({c['note']})",
                               c["unit"], rows, None)]
    md.append("Each system a fresh child, spawn to its record in DynamoDB; the round trip is a BatchGetItem shaped "
              "as kindling's duplicate check on an open connection (median of five per child). kindling's first "
              f"batch should cost the floor plus that read, a write-only batch the floor (targets <= {TARGET:g}x).\n")
    md.append("| protocol | floor + one round trip ms | kindling / (floor + round trip) | write only / floor |\n"
              "|---|---:|---:|---:|")
    for proto in PROTOCOLS:
        r = ratios(c["samples"], proto)
        md.append(f"| {proto} | {stats.fmt(r['bound'])} | {stats.fmt_ratio(r['first_batch'])} "
                  f"| {stats.fmt_ratio(r['write_only'])} |")
    return "\n".join(md) + "\n"


def ratio_lines(c: dict) -> list[str]:
    lines = []
    for proto in PROTOCOLS:
        if not any(k.endswith(f", {proto}") for k in c["samples"]):
            continue
        r = ratios(c["samples"], proto)
        lines.append(stats.verdict(f"critical path over {proto}: kindling first batch / (floor + one round trip)",
                                   r["first_batch"], TARGET))
        lines.append(stats.verdict(f"critical path over {proto}: kindling skip_succeeded=False batch / floor",
                                   r["write_only"], TARGET))
    return lines
