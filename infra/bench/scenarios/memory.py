"""``memory``: the Lambda-shaped cold starts under a cgroup CPU quota per Lambda memory size.

cpushare.py: Lambda's CPU share is proportional to memory, one vCPU at 1,769 MB. With Valkey,
the Valkey-triggered Lambda's drain (scenarios/lambda_valkey.py) runs beside them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import stats
from harness import FLOOR_COLD, KINDLING_COLD, POWERTOOLS_COLD, cold_handlers, log

from . import lambda_valkey

if TYPE_CHECKING:
    from services import Services

MEMORY_SIZES = (128, 512, 1024, 1769)
MEMORY_SIZES_QUICK = (128, 1769)

def scenario(ns, svc: Services, layer: str, env: dict, results: dict) -> None:
    """Cold start under a cgroup CPU quota per Lambda memory size (see cpushare.py)."""
    from cpushare import PERIOD_US, CgroupUnavailable, CpuShare, find_controller

    try:
        find_controller()
    except CgroupUnavailable as exc:
        log(f"memory: SKIPPED, {exc}")
        results["memory"] = {"skipped": str(exc)}
        return
    systems = cold_handlers(layer, env, svc)
    if svc.valkey_url:  # the Valkey-triggered Lambda's drain: the same handler, a drain event
        systems[lambda_valkey.COLD_DRAIN] = lambda_valkey.cold_drain(svc, layer, env)
    for fn in systems.values():  # untimed warm-up at full speed (page cache, pyc files)
        fn()
    sizes = MEMORY_SIZES_QUICK if ns.quick else MEMORY_SIZES
    by_size: dict[str, dict[str, list[float]]] = {}
    quotas = {}
    for mb in sizes:
        share = CpuShare.create(mb)
        quotas[str(mb)] = share.describe()
        log(f"memory {mb} MB: {share.describe()}")
        samples: dict[str, list[float]] = {k: [] for k in systems}
        try:
            for i in range(ns.mem_reps):
                for name, fn in systems.items():
                    samples[name].append(fn(share))
                log(f"memory {mb} MB {i + 1}/{ns.mem_reps}: "
                    + ", ".join(f"{k.split(' (')[0]} {v[-1]:.0f}" for k, v in samples.items()))
        finally:
            share.remove()
        by_size[str(mb)] = samples
    results["memory"] = {"unit": "ms", "period_us": PERIOD_US, "quotas": quotas, "sizes": by_size,
                         "note": f"CFS quota = {PERIOD_US} us x MB / 1769 per {PERIOD_US} us period, "
                                 "on the child process only (joined between fork and exec)"}


def report(c: dict) -> str:
    """Cold start by memory size: one row per system, median (min-max) per size, and the ratios."""
    if "skipped" in c:
        return f"### Cold start by memory size\n\nSkipped: {c['skipped']}.\n"
    sizes = list(c["sizes"])
    systems = list(c["sizes"][sizes[0]])
    n = len(c["sizes"][sizes[0]][systems[0]])
    out = [f"### Cold start by memory size (CPU share emulated: {c['note']}; median (min-max) ms, n={n})", "",
           "| system | " + " | ".join(f"{int(mb):,} MB" for mb in sizes) + " |", "|---|" + "---:|" * len(sizes)]
    for name in systems:
        cells = []
        for mb in sizes:
            x = stats.summary(c["sizes"][mb][name])
            cells.append(f"{stats.fmt(x['median'])} ({stats.fmt(x['min'])}-{stats.fmt(x['max'])})")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    for other in (POWERTOOLS_COLD, FLOOR_COLD):
        if other not in systems:
            continue
        cells = [stats.fmt_ratio(stats.ratio(stats.summary(c["sizes"][mb][KINDLING_COLD])["median"],
                                             stats.summary(c["sizes"][mb][other])["median"])) for mb in sizes]
        out.append(f"| ratio kindling / {other.split(' (')[0]} | " + " | ".join(cells) + " |")
    if lambda_valkey.COLD_DRAIN in systems:
        cells = [stats.fmt_ratio(stats.ratio(stats.summary(c["sizes"][mb][lambda_valkey.COLD_DRAIN])["median"],
                                             stats.summary(c["sizes"][mb][KINDLING_COLD])["median"])) for mb in sizes]
        out.append("| ratio drain / SQS handler | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def ratio_lines(c: dict) -> list[str]:
    lines = []
    med = lambda xs: stats.summary(xs)["median"]  # noqa: E731
    if "sizes" in c:
        for mb, s in c["sizes"].items():
            k = med(s[KINDLING_COLD])
            lines.append(f"cold start at {int(mb):,} MB: kindling / boto3 + Powertools = "
                         f"{stats.fmt_ratio(stats.ratio(k, med(s[POWERTOOLS_COLD])))}, kindling / floor = "
                         f"{stats.fmt_ratio(stats.ratio(k, med(s[FLOOR_COLD])))}")
    return lines
