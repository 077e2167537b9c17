"""The benchmark harness's pure helpers (infra/bench/stats.py)."""

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "infra" / "bench" / "stats.py"
_spec = importlib.util.spec_from_file_location("bench_stats", _PATH)
stats = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stats)


def test_summary_median_min_max():
    assert stats.summary([3, 1, 2, 10]) == {"median": 2.5, "min": 1.0, "max": 10.0, "n": 4}
    assert stats.summary([]) == {"median": None, "min": None, "max": None, "n": 0}


def test_ratio_handles_missing_and_zero():
    assert stats.ratio(10, 80) == 0.125
    assert stats.ratio(None, 1) is None
    assert stats.ratio(1, None) is None
    assert stats.ratio(1, 0) is None


def test_percentile_interpolates():
    xs = list(range(1, 101))
    assert stats.percentile(xs, 50) == pytest.approx(50.5)
    assert stats.percentile(xs, 99) == pytest.approx(99.01)
    assert stats.percentile([7], 99) == 7
    assert stats.percentile([], 50) is None


def test_table_rows_times_and_rates():
    rows = stats.table_rows({"celery": [100, 120, 80], "kindling": [10, 12, 11]}, "celery")
    by = {r["system"]: r for r in rows}
    assert by["celery"]["ratio"] == 1.0
    assert by["kindling"]["ratio"] == pytest.approx(0.11)
    assert by["kindling"]["gain"] == pytest.approx(1 / 0.11)
    rates = stats.table_rows({"celery": [1000], "kindling": [4000]}, "celery", higher_is_better=True)
    assert {r["system"]: r["gain"] for r in rates}["kindling"] == 4.0


def test_markdown_table_shape():
    rows = stats.table_rows({"a": [1.0, 2.0, 3.0], "b": [4.0]}, "a")
    md = stats.markdown_table("Cold start", "ms", rows, "a")
    lines = md.strip().splitlines()
    assert lines[0] == "### Cold start"
    assert lines[2] == "| system | median ms | min | max | n | x a |"
    assert lines[4] == "| a | 2.0 | 1.0 | 3.0 | 3 | 1.00x |"
    assert lines[5] == "| b | 4.0 | 4.0 | 4.0 | 1 | 2.00x |"


def test_formatting():
    assert stats.fmt(None) == "-"
    assert stats.fmt(1234.5) == "1,234"
    assert stats.fmt(3.14159) == "3.1"
    assert stats.fmt_ratio(0.05) == "1/20"
    assert stats.fmt_ratio(25) == "25x"
    assert stats.fmt_ratio(None) == "-"


def test_verdict():
    assert stats.verdict("k/c", 0.1, 0.125).endswith(": met")
    assert "NOT met" in stats.verdict("k/c", 0.2, 0.125)
    assert "not measured" in stats.verdict("k/c", None, 0.125)
    assert stats.verdict("jobs/s", 4162.4, 5000, at_most=False) == "jobs/s: 4,162 (target >= 5000): NOT met"
