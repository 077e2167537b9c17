"""CloudWatch metrics through the Embedded Metric Format: log lines, no API call.

Per batch the runner writes one EMF document per task present in the batch (dimensions
``service`` and ``task``) and one of totals (dimension ``service``). Only registered tasks
become a dimension value: a message naming an unknown task counts in the totals only, so
no sender can mint metrics. Job ids never become dimensions.

Metrics (namespace ``POWERTOOLS_METRICS_NAMESPACE``, default ``kindling``):

==================  ============  ===========================================================
``JobsSucceeded``   Count         also ``JobsFailed``, ``JobsDead``, ``JobsRejected``,
                                  ``JobsSkipped``, ``JobsDeferred``
``JobDuration``     Milliseconds  one value per job run
``QueueWait``       Milliseconds  start minus enqueue, one value per job run
``BatchSize``       Count         totals only
``ColdStart``       Count         totals only, 1 on a cold start's first batch
==================  ============  ===========================================================

A document holds at most 100 values per metric (EMF's limit): a bigger batch's values go
on in further documents with the same dimensions, so every run's duration and queue wait
is recorded (a stream batch of 500 jobs writes five). Counts are written once, in the first.
"""

from __future__ import annotations

import os
import sys

from kindling.core import codec
from kindling.core.status import DEAD, DEFERRED, FAILED, RAN, REJECTED, SKIPPED, SUCCEEDED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from kindling.core.batch import Outcome

__all__ = ["documents", "emit", "namespace"]

MAX_VALUES = 100
_COUNTS = {SUCCEEDED: "JobsSucceeded", FAILED: "JobsFailed", DEAD: "JobsDead", REJECTED: "JobsRejected",
           SKIPPED: "JobsSkipped", DEFERRED: "JobsDeferred"}


def namespace() -> str:
    return os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "kindling"


def service() -> str:
    from kindling.shared.logs import service_name  # the one reader of POWERTOOLS_SERVICE_NAME

    return service_name()


def documents(outcomes: Iterable[Outcome], registered, *, cold_start: bool = False, at_ms: int) -> list[dict]:
    """The EMF documents for one batch: one per registered task present, then the totals.

    ``registered`` answers ``name in registered`` for the worker's task names.
    """
    ns, svc = namespace(), service()
    totals: dict[str, list] = {}
    per_task: dict[str, dict[str, list]] = {}
    size = 0
    for o in outcomes:
        size += 1
        name = _COUNTS.get(o.status)  # type: ignore[arg-type]
        groups = [totals]
        if o.task and o.task in registered:
            groups.append(per_task.setdefault(o.task, {}))
        for metrics in groups:
            if name:
                metrics.setdefault(name, [0])[0] += 1
            record = o.record
            if record is not None and o.status in RAN and record.get("duration_ms"):
                _add(metrics, "JobDuration", record["duration_ms"])
                if record.get("enqueued_at"):
                    _add(metrics, "QueueWait", max(0, record["started_at"] - record["enqueued_at"]))
    docs = [doc for task, metrics in per_task.items()
            for doc in _documents(ns, {"service": svc, "task": task}, metrics, at_ms)]
    totals["BatchSize"] = [size]
    if cold_start:
        totals["ColdStart"] = [1]
    docs.extend(_documents(ns, {"service": svc}, totals, at_ms))
    return docs


def emit(outcomes: Iterable[Outcome], registered, *, cold_start: bool = False) -> None:
    """Write one batch's documents to stdout, where CloudWatch reads them from the log."""
    from kindling.core.envelope import now_ms

    sys.stdout.write(lines(documents(outcomes, registered, cold_start=cold_start, at_ms=now_ms())))


def lines(docs: list[dict]) -> str:
    return "".join(codec.dumps(doc) + "\n" for doc in docs)


def _add(metrics: dict[str, list], name: str, value: float) -> None:
    metrics.setdefault(name, []).append(value)


def _documents(ns: str, dimensions: dict[str, str], metrics: dict[str, list], at_ms: int) -> list[dict]:
    """One group's documents: the first with every metric, then as many as its longest list
    of values needs, MAX_VALUES values per metric each."""
    docs = []
    for start in range(0, max(map(len, metrics.values()), default=1) or 1, MAX_VALUES):
        chunk = {name: values[start:start + MAX_VALUES] for name, values in metrics.items()}
        docs.append(_document(ns, dimensions, {name: v for name, v in chunk.items() if v}, at_ms))
    return docs


_UNITS = {"JobDuration": "Milliseconds", "QueueWait": "Milliseconds"}


def _document(ns: str, dimensions: dict[str, str], metrics: dict[str, list], at_ms: int) -> dict:
    doc: dict = {
        "_aws": {
            "Timestamp": at_ms,
            "CloudWatchMetrics": [{
                "Namespace": ns,
                "Dimensions": [list(dimensions)],
                "Metrics": [{"Name": name, "Unit": _UNITS.get(name, "Count")} for name in metrics],
            }],
        },
        **dimensions,
    }
    for name, values in metrics.items():
        doc[name] = values  # a list even of one, as Powertools writes it
    return doc
