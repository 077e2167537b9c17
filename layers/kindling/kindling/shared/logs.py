"""The worker's own log lines, in the key layout of Powertools' Logger.

One JSON object per line on stdout (Lambda sends it to CloudWatch Logs), with the keys
Powertools writes, in its order, so Logs Insights queries written for Powertools work
unchanged::

    {"level": "WARNING", "location": "_finish_batch:331", "message": "job failed",
     "timestamp": "2026-11-22 20:51:03,123+0000", "service": "checkout", "cold_start": true,
     "function_name": "...", "function_memory_size": 512, "function_arn": "...",
     "function_request_id": "...", "job_id": "...", "task": "...", "attempt": 1,
     "status": "failed", "duration_ms": 12.5, "error": "...", "xray_trace_id": "1-..."}

``location`` is ``<function>:<line>`` of the code that wrote the line, as Powertools writes
it (``%(funcName)s:%(lineno)d``). Keys without a value are left out, as Powertools does. The level comes from
``AWS_LAMBDA_LOG_LEVEL`` (Lambda's advanced logging controls), then
``POWERTOOLS_LOG_LEVEL`` (or ``LOG_LEVEL``), then INFO; the service from
``POWERTOOLS_SERVICE_NAME`` (default ``service_undefined``, as Powertools).

These lines are written during the first batch, so this module imports neither
:mod:`logging` nor :mod:`json`: kindling's codec is loaded already. Task code that wants
the same layout with its job's fields uses :func:`kindling.shared.tasklog.get_logger`.
"""

from __future__ import annotations

import os
import sys
import time

from kindling.core import codec
from kindling.core.errors import masked_url
from kindling.core.status import DEAD, FAILED, REJECTED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from kindling.core.batch import Outcome

__all__ = ["LEVELS", "LogSink", "invocation", "log_batch", "sink", "trace_root"]

LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}
_LAMBDA_LEVELS = {"TRACE": "DEBUG", "DEBUG": "DEBUG", "INFO": "INFO", "WARN": "WARNING", "ERROR": "ERROR",
                  "FATAL": "CRITICAL"}
_ORDER = ("level", "location", "message", "timestamp", "service", "cold_start", "function_name",
          "function_memory_size", "function_arn", "function_request_id")

# The invocation being served: set by the handler, read by every line it writes.
_invocation: dict = {}


def service_name() -> str:
    """The service every line and metric names: ``POWERTOOLS_SERVICE_NAME``, the variable
    Powertools reads too (the template sets it from its ``MetricsService`` parameter)."""
    return os.environ.get("POWERTOOLS_SERVICE_NAME") or "service_undefined"


def configured_level() -> int:
    env = os.environ
    name = _LAMBDA_LEVELS.get(env.get("AWS_LAMBDA_LOG_LEVEL", "").upper()) or (
        env.get("POWERTOOLS_LOG_LEVEL") or env.get("LOG_LEVEL") or "INFO").upper()
    return LEVELS.get("WARNING" if name == "WARN" else name, 20)


def invocation(context=None, *, cold_start: bool = False, trace_id: str | None = None) -> None:
    """Remember the Lambda context of the invocation now running (``None`` outside Lambda)."""
    _invocation.clear()
    _invocation["cold_start"] = cold_start
    if context is not None:
        _invocation["function_name"] = getattr(context, "function_name", None)
        memory = getattr(context, "memory_limit_in_mb", None)
        _invocation["function_memory_size"] = int(memory) if memory is not None else None
        _invocation["function_arn"] = getattr(context, "invoked_function_arn", None)
        _invocation["function_request_id"] = getattr(context, "aws_request_id", None)
    _invocation["xray_trace_id"] = trace_id or _trace_id_from_env()


def _trace_id_from_env() -> str | None:
    return trace_root(os.environ.get("_X_AMZN_TRACE_ID"))


def trace_root(header: str | None) -> str | None:
    """The trace id of an X-Ray header (``Root=1-...;Parent=...;Sampled=1`` -> ``1-...``)."""
    if not header:
        return None
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == "Root" and value:
            return value[:64]
    return None


def timestamp(at: float | None = None) -> str:
    """Powertools' default: local time with milliseconds and offset, ``2026-11-22 20:51:03,123+0000``."""
    at = time.time() if at is None else at
    stamp = time.localtime(at)
    return time.strftime(f"%Y-%m-%d %H:%M:%S,{int(at * 1000) % 1000:03d}%z", stamp)


class LogSink:
    """Writes the runner's log entries as Powertools-layout lines.

    Entries are dicts with ``level``, ``message`` and ``location`` plus any fields of their
    own; a callable, so a :class:`~kindling.engine.runner.Runner` takes it as its ``log``.
    """

    def __init__(self, stream=None, *, level: int | None = None, service: str | None = None):
        self.stream = stream
        self.level = configured_level() if level is None else level
        self.service = service or service_name()

    def enabled(self, level: str) -> bool:
        return LEVELS.get(level, 20) >= self.level

    def __call__(self, entry: dict) -> None:
        level = entry.get("level", "INFO")
        if not self.enabled(level):
            return
        line = {"level": level, "location": entry.get("location") or _caller(), "message": entry.get("message", ""),
                "timestamp": timestamp(), "service": self.service, **_invocation}
        line.update((k, v) for k, v in entry.items() if k not in ("level", "location", "message") and v is not None)
        ordered = {k: line[k] for k in _ORDER if line.get(k) is not None}
        ordered.update((k, v) for k, v in line.items() if k not in ordered and k != "xray_trace_id" and v is not None)
        if line.get("xray_trace_id"):  # Powertools adds it last, after the line's own keys
            ordered["xray_trace_id"] = line["xray_trace_id"]
        text = codec.dumps(ordered)
        if "://" in text:  # a URL's credentials never reach a log line
            text = masked_url(text)
        (self.stream or sys.stdout).write(text + "\n")


def _caller() -> str:
    """``function:line`` of the code that logged, past this module and the forwarders that
    hand entries on to a sink (a runner's default ``_log``)."""
    frame = sys._getframe(2)
    while frame.f_back is not None and (frame.f_globals.get("__name__") == __name__
                                        or frame.f_code.co_name in _FORWARDERS):
        frame = frame.f_back
    return f"{frame.f_code.co_name}:{frame.f_lineno}"


_FORWARDERS = frozenset({"_log"})


def sink() -> LogSink:
    """The process's default sink (stdout), created at first use."""
    global _sink
    if _sink is None:
        _sink = LogSink()
    return _sink


_sink: LogSink | None = None


_JOB_LEVEL = {FAILED: "WARNING", DEAD: "ERROR", REJECTED: "WARNING"}


def log_batch(outcomes: list[Outcome], log: Callable[[dict], object]) -> None:
    """A batch's lines: one per job that failed, died or was rejected, then the batch's (it
    sums them up, so it comes last, as a batch ends after its jobs)."""
    counts: dict[str, int] = {}
    for o in outcomes:
        status = o.status or "unsettled"  # every outcome has one by now
        counts[status] = counts.get(status, 0) + 1
        level = _JOB_LEVEL.get(o.status or "")
        if level is not None:
            record = o.record or {}
            log({"level": level, "message": f"job {o.status}",
                 "kindling": o.status, "job_id": o.job_id, "task": record.get("task", o.task), "attempt": o.attempts,
                 "status": o.status, "duration_ms": record.get("duration_ms"), "ref": o.ref, "error": o.reason,
                 "xray_trace_id": o.trace_id})
    log({"level": "INFO", "message": "batch done", "kindling": "batch", "messages": len(outcomes), **counts})
