"""Pure helpers of the benchmark harness: summaries, ratios, the Markdown table.

No I/O and no third-party imports, so the unit tests (tests/unit/test_bench_stats.py) run
anywhere.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence


def summary(samples: Sequence[float]) -> dict:
    """Median, min, max and count of ``samples`` (an empty list gives ``n == 0`` and Nones)."""
    xs = [float(x) for x in samples]
    if not xs:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def ratio(value: float | None, baseline: float | None) -> float | None:
    """``value / baseline``, or None when either is missing or the baseline is zero."""
    if value is None or baseline is None or baseline == 0:
        return None
    return value / baseline


def percentile(samples: Sequence[float], p: float) -> float | None:
    """The ``p``-th percentile (0-100) by linear interpolation between closest ranks."""
    xs = sorted(samples)
    if not xs:
        return None
    if len(xs) == 1:
        return float(xs[0])
    k = (len(xs) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def fmt(x: float | None, digits: int = 1) -> str:
    """A number for the table: thousands separators, ``digits`` decimals below 100, '-' for None."""
    if x is None:
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:,.{digits}f}"


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return "-"
    if r >= 10 or r == 0:
        return f"{r:.0f}x" if r >= 10 else "0x"
    if r < 0.1:
        return f"1/{1 / r:.0f}"
    return f"{r:.2f}x"


def table_rows(results: dict[str, list[float]], baseline: str | None, *,
               higher_is_better: bool = False) -> list[dict]:
    """One row per system: its summary and its median's ratio to the baseline's median.

    ``ratio`` is always system/baseline; ``gain`` is how many times better the system is
    than the baseline (baseline/system for times, system/baseline for rates).
    """
    base = summary(results.get(baseline, []))["median"] if baseline else None
    rows = []
    for name, samples in results.items():
        s = summary(samples)
        r = ratio(s["median"], base)
        gain = None if r is None or r == 0 else (r if higher_is_better else 1 / r)
        rows.append({"system": name, **s, "ratio": r, "gain": gain})
    return rows


def markdown_table(title: str, unit: str, rows: Iterable[dict], baseline: str | None) -> str:
    """A Markdown table of rows from :func:`table_rows`."""
    rows = list(rows)
    base = f"x {baseline}" if baseline else "ratio"
    out = [f"### {title}", "", f"| system | median {unit} | min | max | n | {base} |",
           "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['system']} | {fmt(r['median'])} | {fmt(r['min'])} | {fmt(r['max'])} | {r['n']} "
                   f"| {fmt_ratio(r['ratio'])} |")
    return "\n".join(out) + "\n"


def verdict(name: str, value: float | None, target: float, *, at_most: bool = True) -> str:
    """'name: 0.08 (target <= 0.125): met' style line for the targets at the end."""
    if value is None:
        return f"{name}: not measured (target {'<=' if at_most else '>='} {target:g})"
    ok = value <= target if at_most else value >= target
    shown = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return f"{name}: {shown} (target {'<=' if at_most else '>='} {target:g}): {'met' if ok else 'NOT met'}"
