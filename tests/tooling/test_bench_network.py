"""The network scenario's report (infra/bench/scenarios/network.py), on made-up samples: its ratios
against the targets, each from the same run's medians, and a peer that failed with its
defaults named beside the setting it was run with again."""

import importlib.util
import sys
from pathlib import Path

_DIR = Path(__file__).resolve().parents[2] / "infra" / "bench"
sys.path.insert(0, str(_DIR))
try:
    _spec = importlib.util.spec_from_file_location("bench_network", _DIR / "scenarios" / "network.py")
    network = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(network)
finally:
    sys.path.remove(str(_DIR))
    for _name in ("stats", "harness", "children"):
        sys.modules.pop(_name, None)


def runs(*rates):
    return [{"jobs_per_s": r, "steady_jobs_per_s": 2 * r} for r in rates]


def results():
    n = network
    return {
        "latency_ms_each_way": 1, "concurrency": 200,
        "rtt_ms": {"Valkey direct": 0.05, "Valkey through the proxy, 1 ms each way": 2.3},
        "processing": {"n": 3000, "failures": {n.DRAMATIQ: "noop: worker exited with 1: ConnectionError"},
                       "workloads": {"noop": {n.KINDLING: runs(9000, 10000, 11000), n.KINDLING_ZERO: runs(10500),
                                              n.CELERY: runs(200, 250, 300),
                                              n.DRAMATIQ_FIXED.format(fix=n.DRAMATIQ_FIX_LABEL): runs(400)},
                                     "sleep 10 ms": {n.KINDLING: runs(5000), n.KINDLING_ZERO: runs(6000),
                                                     n.CELERY: runs(250)}}},
        "enqueue": {"unit": "jobs/s", "n": 1000,
                    "samples": {n.ENQ_CELERY: [400], n.ENQ_KINDLING: [420], n.ENQ_ACELERY: [380, 400],
                                n.ENQ_ACELERY_THREADS: [1000], n.ENQ_AKINDLING: [8000, 12000],
                                n.ENQ_ASQS: [3900]}},
        "dynamodb": {"n": 2000, "rates": {n.DDB_LAT: [1800], n.DDB_ZERO: [2000]},
                     "critical": {f"{n.CP_KINDLING}, 1 ms each way": [120], f"{n.CP_FLOOR}, 1 ms each way": [100],
                                  f"{n.CP_RTT}, 1 ms each way": [2.5]}},
    }


def test_the_ratios_are_medians_of_the_same_run():
    r = network.ratios(results())
    assert r["processing"] == {"noop": 10000 / 250, "sleep 10 ms": 5000 / 250}
    assert r["kept"] == {"noop": 10000 / 10500, "sleep 10 ms": 5000 / 6000}
    assert r["kept_steady"] == r["kept"]  # each steady rate is twice its rate here
    assert r["async"] == 10000 / 390 and r["async_threads"] == 10 and r["async_sqs"] == 10
    assert r["ddb_kept"] == 0.9


def test_each_target_says_met_or_not_met():
    lines = network.ratio_lines(results())
    assert any(line.startswith("network noop: kindling / Celery threads") and line.endswith(": met")
               for line in lines)
    assert any(line.startswith("network sleep 10 ms: kindling with the latency") and line.endswith("NOT met")
               for line in lines)
    assert any("aenqueue / Celery delay() from sync_to_async" in line and line.endswith(": met") for line in lines)


def test_the_report_shows_the_round_trips_the_failed_peer_and_its_fix():
    md = network.report(results())
    assert "| Valkey through the proxy, 1 ms each way | 2.300 |" in md
    assert f"{network.DRAMATIQ} failed under latency with its defaults (noop: worker exited" in md
    assert network.DRAMATIQ_FIX_LABEL in md
    assert "critical path, 1 ms each way: kindling first batch 120 ms / (floor 100 + one round trip 2.50) = 1.17x" \
        in md


def test_the_latency_kept_is_judged_on_the_longer_runs_and_the_short_ones_stated():
    """3,000 no-ops take kindling 0.16 s, where its one-time start through the proxy weighs
    as if every batch paid it: the target is judged on N_KEPT jobs, run alike through both proxies."""
    n = network
    c = results()
    c["processing"]["kept"] = {"n": n.N_KEPT, "workloads": {
        "noop": {n.KINDLING: runs(19000, 18000, 20000), n.KINDLING_ZERO: runs(20000)},
        "sleep 10 ms": {n.KINDLING: runs(5700), n.KINDLING_ZERO: runs(6000)}}}
    r = network.ratios(c)
    assert r["kept"] == {"noop": 19000 / 20000, "sleep 10 ms": 5700 / 6000}
    assert r["kept_short"] == {"noop": 10000 / 10500, "sleep 10 ms": 5000 / 6000}
    lines = network.ratio_lines(c)
    assert f"network noop: kindling with the latency / through the proxy without it ({n.N_KEPT} jobs): 0.95 " \
           "(target >= 0.9): met" in lines, lines
    assert any(line.startswith("network noop: the same on the 3000 jobs of the comparison") for line in lines)
    assert f"the latency kept, kindling alone on {n.N_KEPT} x noop" in network.report(c)
