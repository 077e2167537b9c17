"""``tls``: the Lambda-shaped cold starts over HTTP and over HTTPS, same run, at 1,769 MB's CPU share.

HTTPS goes through the TLS proxy of tls.py (services.py starts it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import stats
from harness import FLOOR_COLD, KINDLING_COLD, POWERTOOLS_COLD, cold_handlers, log

if TYPE_CHECKING:
    from services import Services


def scenario(ns, svc: Services, layer: str, env: dict, results: dict) -> None:
    """The Lambda-shaped cold starts over HTTP and over HTTPS (tls.py), same run, at 1,769 MB's CPU share.

    Over HTTPS every child pays the ssl import, loading the bundle (system CAs + test CA)
    and the handshake; the proxy's own work runs outside the child's quota, as AWS's does.
    """
    from cpushare import CgroupUnavailable, CpuShare

    tls_env = dict(env, **svc.start_tls())
    http, https = cold_handlers(layer, env, svc), cold_handlers(layer, tls_env, svc)
    systems = {**{f"{k}, HTTP": v for k, v in http.items()}, **{f"{k}, HTTPS": v for k, v in https.items()}}
    try:
        share = CpuShare.create(1769)
        cpu = f"1,769 MB's CPU share ({share.describe()})"
    except CgroupUnavailable as exc:
        share, cpu = None, f"the whole machine (no CPU quota: {exc})"
    log(f"tls: on {cpu}")
    samples: dict[str, list[float]] = {k: [] for k in systems}
    try:
        for fn in systems.values():  # untimed warm-up
            fn(share)
        for i in range(ns.tls_reps):
            for name, fn in systems.items():
                samples[name].append(fn(share))
            log(f"tls {i + 1}/{ns.tls_reps}: " + ", ".join(
                f"{k.split(' (')[0].split(',')[0]}{k.rsplit(',', 1)[1]} {v[-1]:.0f}" for k, v in samples.items()))
    finally:
        if share is not None:
            share.remove()
    results["tls"] = {"unit": "ms", "baseline": f"{FLOOR_COLD}, HTTP", "samples": samples,
                      "note": f"on {cpu}; HTTPS through a TLS proxy on 127.0.0.1 with a throwaway CA, "
                              "the children trusting system CAs + the CA (SSL_CERT_FILE, AWS_CA_BUNDLE)"}


def report(c: dict) -> str:
    return stats.markdown_table(f"Cold start over HTTP and HTTPS ({c['note']})", c["unit"],
                                stats.table_rows(c["samples"], c["baseline"]), c["baseline"])


def ratio_lines(c: dict) -> list[str]:
    lines = []
    med = lambda xs: stats.summary(xs)["median"]  # noqa: E731
    s = c["samples"]
    for proto in ("HTTP", "HTTPS"):
        k = med(s[f"{KINDLING_COLD}, {proto}"])
        lines.append(f"cold start over {proto} at 1,769 MB: kindling / floor = "
                     f"{stats.fmt_ratio(stats.ratio(k, med(s[f'{FLOOR_COLD}, {proto}'])))}, "
                     f"kindling / boto3 + Powertools = "
                     f"{stats.fmt_ratio(stats.ratio(k, med(s[f'{POWERTOOLS_COLD}, {proto}'])))}")
    for name in (KINDLING_COLD, POWERTOOLS_COLD, FLOOR_COLD):
        lines.append(f"HTTPS - HTTP, {name}: {med(s[f'{name}, HTTPS']) - med(s[f'{name}, HTTP']):+.1f} ms")
    return lines
