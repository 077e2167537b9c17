"""``GET /metrics``: the dashboard's figures in Prometheus's text exposition format (0.0.4).

Gauges over the dashboard's window (the jobs that finished in it, as their records stand
now), per task and status; quantiles of duration and queue wait per task; the queues'
depth as last sampled. The table holds records, not counters, so these are gauges: alert
on them (``kindling_jobs{status="dead"} > 0``), or ``rate()`` the workers' own EMF metrics.
"""

from __future__ import annotations

__all__ = ["render", "CONTENT_TYPE"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _line(name: str, labels: dict, value) -> str:
    inner = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
    return f"{name}{{{inner}}} {float(value)!r}" if inner else f"{name} {float(value)!r}"


def render(summary: dict, backlog: dict) -> str:
    """The exposition text for a summary (:meth:`Aggregator.summary`) and the latest
    backlog sample."""
    window = str(summary["window_s"])
    joint = {t: summary["per_task"][t]["total"]["by_status"] for t in summary["tasks"]}
    out = ["# HELP kindling_jobs Jobs that finished in the window, by task and status.",
           "# TYPE kindling_jobs gauge"]
    for task in sorted(joint):
        for status in sorted(joint[task]):
            out.append(_line("kindling_jobs", {"task": task, "status": status, "window_s": window},
                             joint[task][status]))
    for name, key, what in (("kindling_job_duration_seconds", "duration_ms", "Run time"),
                            ("kindling_job_queue_wait_seconds", "queue_wait_ms", "Time from enqueue to start")):
        out += [f"# HELP {name} {what} of the jobs that ran in the window, by task (quantiles by nearest rank).",
                f"# TYPE {name} gauge"]
        for task in summary["tasks"]:
            total = summary["per_task"][task]["total"][key]
            for q in ("p50", "p95", "p99"):
                if total[q] is not None:
                    out.append(_line(name, {"task": task, "quantile": f"0.{q[1:]}", "window_s": window},
                                     total[q] / 1000))
    out += ["# HELP kindling_queue_messages Messages in the jobs queue and its dead-letter queue, as last sampled.",
            "# TYPE kindling_queue_messages gauge"]
    for queue, depth in sorted(backlog.items()):
        for state, n in sorted(depth.items()):
            out.append(_line("kindling_queue_messages", {"queue": queue, "state": state}, n))
    out += ["# HELP kindling_dashboard_queries DynamoDB queries the last refresh made.",
            "# TYPE kindling_dashboard_queries gauge", _line("kindling_dashboard_queries", {}, summary["queries"])]
    return "\n".join(out) + "\n"
