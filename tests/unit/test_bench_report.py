"""The harness's report for the memory-size and TLS scenarios (infra/bench/run.py), on made-up samples."""

import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "infra" / "bench" / "run.py"
_spec = importlib.util.spec_from_file_location("bench_run", _PATH)
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)
sys.path[:] = [p for p in sys.path if not p.startswith(str(_PATH.parent))]  # run.py adds its own dirs
for _name in ("stats", "services"):  # run.py's own modules, kept by it, not left for other tests
    sys.modules.pop(_name, None)

K, P, F = run.KINDLING_COLD, run.POWERTOOLS_COLD, run.FLOOR_COLD


def memory_results():
    return {"memory": {"unit": "ms", "period_us": 14000, "note": "quota", "quotas": {},
                       "sizes": {"128": {K: [800, 900, 700], P: [10000, 8000], F: [750]},
                                 "1769": {K: [70], P: [700], F: [50]}}}}


def test_memory_table_has_a_column_per_size_and_the_ratios():
    md = run.memory_table(memory_results()["memory"])
    assert "| system | 128 MB | 1,769 MB |" in md
    assert f"| {K} | 800 (700-900) | 70.0 (70.0-70.0) |" in md
    assert "| ratio kindling / boto3 + Powertools handler | 1/11 | 0.10x |" in md
    assert "| ratio kindling / floor | 1.07x | 1.40x |" in md


def test_memory_skipped_says_why():
    md = run.memory_table({"skipped": "no writable cgroup cpu controller"})
    assert "Skipped: no writable cgroup cpu controller." in md


def test_ratio_lines_give_memory_and_tls_ratios():
    results = memory_results()
    results["tls"] = {"samples": {f"{K}, HTTP": [70], f"{P}, HTTP": [600], f"{F}, HTTP": [50],
                                  f"{K}, HTTPS": [150], f"{P}, HTTPS": [650], f"{F}, HTTPS": [150]}}
    lines = run.ratio_lines(results)
    assert "cold start at 128 MB: kindling / boto3 + Powertools = 1/11, kindling / floor = 1.07x" in lines
    assert "cold start over HTTPS at 1,769 MB: kindling / floor = 1.00x, kindling / boto3 + Powertools = 0.23x" in lines
    assert f"HTTPS - HTTP, {K}: +80.0 ms" in lines
