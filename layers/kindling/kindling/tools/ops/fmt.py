"""Terminal output for the operator's commands: aligned columns cut to the width, UTC times."""

from __future__ import annotations

import shutil
import time

from kindling.core.status import QUEUED, SCHEDULED

__all__ = ["dumps", "width", "jobs_table", "job_detail", "dlq_table", "dead_stream_table", "when", "due", "ms"]


def dumps(value) -> str:
    from kindling.core import codec

    return codec.dumps(value)


def width() -> int:
    return max(60, shutil.get_terminal_size((120, 24)).columns)


def when(epoch_ms) -> str:
    """``2026-11-22 20:54:23`` (UTC), or ``-``."""
    if not epoch_ms:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(int(epoch_ms) / 1000))


def due(epoch_ms, now_ms: int | None = None) -> str:
    """``2026-11-22 20:54:23 (in 1h 59m)`` (UTC): when a scheduled job is due, and how soon."""
    if not epoch_ms:
        return "-"
    now = int(time.time() * 1000) if now_ms is None else now_ms
    left = (int(epoch_ms) - now) // 60_000  # whole minutes: "in 0m" is under a minute
    if int(epoch_ms) <= now:
        return f"{when(epoch_ms)} (due now)"
    days, minutes = divmod(left, 1440)
    soon = (f"{days}d " if days else "") + f"{minutes // 60}h {minutes % 60}m"
    return f"{when(epoch_ms)} (in {soon})"


def ms(value) -> str:
    """A duration in milliseconds, readable: ``850 ms``, ``3.2 s``, ``4.5 min``."""
    if value is None or value == "":
        return "-"
    value = float(value)
    if value < 1000:
        return f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"
    if value < 120_000:
        return f"{value / 1000:.1f} s"
    if value < 7_200_000:
        return f"{value / 60_000:.1f} min"
    return f"{value / 3_600_000:.1f} h"


def _cut(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: max(n - 1, 0)] + "…"


def table(headers: list[str], rows: list[list[str]], width: int, right: set[int] = frozenset()) -> str:
    """Columns as wide as their content; the last one takes what is left of ``width``."""
    cols = len(headers)
    widths = [max([len(headers[c])] + [len(r[c]) for r in rows]) for c in range(cols)]
    fixed = sum(widths[:-1]) + 2 * (cols - 1)
    widths[-1] = max(len(headers[-1]), min(widths[-1], width - fixed))
    lines = []
    for row in [headers, *rows]:
        cells = []
        for c, cell in enumerate(row):
            cell = _cut(cell, widths[c])
            cells.append(cell.rjust(widths[c]) if c in right else cell.ljust(widths[c]))
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _error(record: dict) -> str:
    error = record.get("error") or {}
    if not error:
        return ""
    return f"{error.get('type', '')}: {error.get('message', '')}"


def jobs_table(records: list[dict], width: int = 120) -> str:
    if not records:
        return "no jobs"
    rows = [[when(r.get("finished_at")), r["id"], _cut(r.get("task", ""), 28), r.get("status", ""),
             str(r.get("attempts", "")), ms(r.get("duration_ms")), _error(r)] for r in records]
    out = table(["FINISHED (UTC)", "ID", "TASK", "STATUS", "ATT", "DURATION", "ERROR"], rows, width, right={4, 5})
    return f"{out}\n{len(records)} job(s)"


def job_detail(record: dict, width: int = 120, *, now: int | None = None) -> str:
    """One job's record, a line per field; ``now`` (epoch ms) is what a due time counts from."""
    r = record
    lines: list[tuple[str, str]] = [("id", r["id"]), ("task", r.get("task") or "-")]
    status = r.get("status") or "no record"
    if r.get("generation", 1) > 1:
        status += f" (generation {r['generation']})"
    lines.append(("status", status))
    lines.append(("attempts", str(r.get("attempts", "-"))))
    if r.get("status") == QUEUED:  # a revive's record: no run of this generation yet
        lines.append(("revived", when(r.get("finished_at"))))
    elif r.get("status") == SCHEDULED:  # received before its not_before: no run yet
        lines.append(("due", due(r.get("due_at"), now)))
        lines.append(("enqueued", when(r.get("enqueued_at"))))
        lines.append(("received", when(r.get("finished_at"))))
    else:
        lines.append(("enqueued", when(r.get("enqueued_at"))))
        lines.append(("started", when(r.get("started_at"))))
        lines.append(("finished", when(r.get("finished_at"))))
        if r.get("enqueued_at") and r.get("started_at"):
            lines.append(("queue wait", ms(max(0, r["started_at"] - r["enqueued_at"]))))
        lines.append(("duration", ms(r.get("duration_ms"))))
    worker = r.get("worker") or {}
    if worker:
        lines.append(("worker", ", ".join(f"{k} {v}" for k, v in worker.items() if v)))
    if r.get("trace_id"):
        lines.append(("trace", r["trace_id"]))
    if r.get("job_id"):
        lines.append(("claimed id", r["job_id"]))
    if r.get("expires_at"):
        lines.append(("expires", when(int(r["expires_at"]) * 1000)))
    if r.get("error"):
        lines.append(("error", _error(r)))
    if r.get("truncated"):
        lines.append(("truncated", ", ".join(f"{k} ({v:,} bytes)" for k, v in r["truncated"].items())))
    ref = r.get("result_payload")
    if ref:
        lines.append(("result in", f"s3://{ref.get('bucket')}/{ref.get('key')} ({ref.get('size', 0):,} bytes)"))
    if r.get("result_unavailable"):
        lines.append(("result", f"unreadable: {r['result_unavailable']}"))
    if "result" in r:
        lines.append(("result", _cut(r["result"], 4 * width)))
    if "raw" in r:
        lines.append(("raw body", _cut(r["raw"], 4 * width)))
    for p in r.get("previous") or []:
        err = p.get("error") or {}
        text = f"{p.get('status')} after {p.get('attempts')} attempt(s), {when(p.get('finished_at'))}"
        if err.get("type"):
            text += f": {err['type']}: {err.get('message', '')}"
        lines.append((f"generation {p.get('generation')}", _cut(text, width - 16)))
    label = max(len(k) for k, _ in lines)
    out = "\n".join(f"{k.ljust(label)}  {v}" for k, v in lines)
    traceback = (r.get("error") or {}).get("traceback")
    if traceback:
        out += "\n\ntraceback:\n" + "\n".join("  " + line for line in traceback.rstrip().splitlines())
    return out


def dlq_table(report: dict, width: int = 120) -> str:
    depth = report["depth"]
    name = report["queue"].rstrip("/").rsplit("/", 1)[-1]
    head = (f"dead-letter queue {name}: {depth['visible']} visible, {depth['in_flight']} in flight "
            f"(approximate)")
    if report.get("oldest_sent_at"):
        age = ms(time.time() * 1000 - report["oldest_sent_at"])
        head += f"; oldest seen sent {when(report['oldest_sent_at'])} ({age} ago)"
    rows = []
    for m in report["messages"]:
        status = m.get("status") or "no record"
        if (m.get("generation") or 1) > 1:
            status += f" (gen {m['generation']})"
        rows.append([when(m["sent_at"]), m.get("job_id") or "-", _cut(m.get("task") or "-", 28), status,
                     str(m["receives"]), m.get("reason") or ""])
    if not rows:
        return head + "\nno messages"
    return head + "\n" + table(["SENT (UTC)", "JOB ID", "TASK", "RECORD", "RECV", "REASON"], rows, width, right={4})


def dead_stream_table(report: dict, width: int = 120) -> str:
    """``kindling dlq peek --valkey``: the dead stream's oldest entries."""
    head = f"dead stream {report['stream']}: {report['length']} entries"
    if report.get("oldest_dead_at"):
        age = ms(time.time() * 1000 - report["oldest_dead_at"])
        head += f"; oldest dead {when(report['oldest_dead_at'])} ({age} ago)"
    rows = []
    for e in report["entries"]:
        status = e.get("status") or ("no record" if "status" in e and e.get("job_id") else "-")
        if (e.get("generation") or 1) > 1:
            status += f" (gen {e['generation']})"
        rows.append([when(e["dead_at"]), e.get("job_id") or "-", _cut(e.get("task") or "-", 28), status,
                     str(e["attempts"]), e.get("reason") or ""])
    if not rows:
        return head + "\nno entries"
    return head + "\n" + table(["DEAD AT (UTC)", "JOB ID", "TASK", "RECORD", "ATT", "REASON"], rows, width, right={4})
