"""An OpenTelemetry span per job run, for workers that set ``KINDLING_OTEL=1``.

The runner imports this module only when that variable is ``1`` (or ``Runner(otel=True)``)
and a job starts, so a worker without it never imports :mod:`opentelemetry`, installed or
not. opentelemetry-api is not in the layer: a function that wants spans brings its own
(and a tracer provider: an SDK it configures, or the ADOT Lambda layer's). Without a
provider the API's spans are no-ops.

Each run of a job gets one span, ``SpanKind.CONSUMER``, named after the job's task, from
the moment its time limit starts to the moment its run ended (the batch's write is not in
it), with these attributes:

``kindling.job.id``, ``kindling.job.task``, ``kindling.job.attempt``,
``kindling.job.status`` (the outcome as recorded: ``succeeded``, ``failed``, ``dead``, or
``deferred`` when the batch was handed back because the store was down),
``kindling.job.deliveries``, ``kindling.job.queue_wait_ms`` (start minus enqueue),
``kindling.job.duration_ms``, ``kindling.xray_trace_id`` (the producer's, propagated on the
message), and OpenTelemetry's messaging attributes for a consumer's ``process`` span:

==============================  ==========================================================
``messaging.system``            ``aws_sqs`` (the convention's value), or ``valkey`` for a
                                Valkey stream (the convention has none; the product's name)
``messaging.destination.name``  the queue's name (from ``eventSourceARN``) or the stream's
``messaging.operation.type``    ``process``
``messaging.operation.name``    ``process``
``messaging.message.id``        the SQS message id or the stream entry id
==============================  ==========================================================

The span is named after the task, as Celery's instrumentation names its ``run/<task>``
spans: a task name is of low cardinality, as the conventions ask of a name, and says what
ran, where ``process <queue>`` would name only the queue. There is no batch span: each job's
span is its own, linked to its producer (below).

A run that raised records the exception (only its type for a task with ``redact=True``)
and ends with status ERROR; so does a job handed back after it ran. Success leaves the
status UNSET, as OpenTelemetry asks of instrumentation.

The producer's X-Ray header (``Root=1-<8 hex>-<24 hex>;Parent=<16 hex>;Sampled=1``) is the
same trace in W3C form (the root without its dashes is the trace id, the parent the span
id). With a ``Parent``, the job's span is linked to it, and is its child when no span is
active around the batch (the job then shows in the producer's trace); when one is (an
instrumented handler), the span is that span's child and keeps the link to the producer.
``Sampled=0`` is kept; a header that leaves sampling open (no ``Sampled``, or ``?``) is taken
as sampled, leaving the decision to the worker's sampler.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import kindling
from kindling.core.status import DEAD, DEFERRED, FAILED
from opentelemetry import context, trace
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from kindling.core.batch import Batch, Delivery, Outcome

__all__ = ["Tracer", "messaging", "producer_context", "start", "attach", "detach", "end"]

_ERROR = (FAILED, DEAD, DEFERRED)

_tracer = trace.get_tracer("kindling", kindling.__version__)


def producer_context(header: str | None) -> SpanContext | None:
    """The producer's span from an X-Ray trace header, or ``None`` without a usable one."""
    if not header:
        return None
    parts = {}
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        parts[name] = value.strip()
    root, parent = parts.get("Root", ""), parts.get("Parent", "")
    pieces = root.split("-")
    if len(pieces) != 3 or pieces[0] != "1" or len(pieces[1]) != 8 or len(pieces[2]) != 24 or len(parent) != 16:
        return None
    try:
        trace_id, span_id = int(pieces[1] + pieces[2], 16), int(parent, 16)
    except ValueError:
        return None
    if not trace_id or not span_id:
        return None
    flags = TraceFlags(TraceFlags.DEFAULT if parts.get("Sampled") == "0" else TraceFlags.SAMPLED)
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=flags)


def messaging(d: Delivery | None) -> dict:
    """The messaging attributes of a delivery's ``process`` span (its system and destination
    when the trigger said where it came from)."""
    attributes = {"messaging.operation.type": "process", "messaging.operation.name": "process"}
    if d is None:
        return attributes
    if d.queue_arn:
        attributes["messaging.system"] = "aws_sqs"
        attributes["messaging.destination.name"] = d.queue_arn.rsplit(":", 1)[-1]
    elif d.stream is not None or d.counts_runs:
        attributes["messaging.system"] = "valkey"
        if d.stream:
            attributes["messaging.destination.name"] = d.stream
    return attributes


def start(o: Outcome, header: str | None, d: Delivery | None = None) -> tuple[trace.Span, int]:
    """Open the span of a job that is starting now; return it with its start (ns since the epoch)."""
    job = o.job
    producer = producer_context(header)
    current = trace.get_current_span().get_span_context()
    parent = None
    if producer is not None and not current.is_valid:
        parent = trace.set_span_in_context(trace.NonRecordingSpan(producer))
    attributes = {"kindling.job.id": o.job_id, "kindling.job.task": o.task, "kindling.job.attempt": o.attempts,
                  "kindling.job.deliveries": o.deliveries, "messaging.message.id": o.ref, **messaging(d)}
    if job is not None and job.enqueued_at:
        attributes["kindling.job.queue_wait_ms"] = max(0, o.started_ms - job.enqueued_at)
    if o.trace_id:
        attributes["kindling.xray_trace_id"] = o.trace_id
    started = time.time_ns()
    span = _tracer.start_span(o.task or "kindling.job", context=parent, kind=SpanKind.CONSUMER,
                              attributes=attributes, links=[Link(producer)] if producer is not None else None,
                              start_time=started)
    return span, started


def attach(span: trace.Span) -> object:
    """Make ``span`` the current one while the task runs (its own spans become children)."""
    return context.attach(trace.set_span_in_context(span))


def detach(token: object) -> None:
    context.detach(token)  # type: ignore[arg-type]


def end(span: trace.Span, started_ns: int, o: Outcome, *, redact: bool = False) -> None:
    """End a job's span with its outcome: status, attempt, error; at the end of its run."""
    status = o.status or "interrupted"
    span.set_attribute("kindling.job.status", status)
    span.set_attribute("kindling.job.attempt", o.attempts)
    record = o.record or {}
    duration = record.get("duration_ms")
    if duration is not None:
        span.set_attribute("kindling.job.duration_ms", duration)
    error = o.error
    if error is not None:
        if redact:
            span.add_event("exception", {"exception.type": type(error).__qualname__,
                                         "exception.message": "[redacted]"})
        else:
            span.record_exception(error, escaped=True)
    if status in _ERROR or o.status is None:
        span.set_status(Status(StatusCode.ERROR, o.reason or status))
    # The run's own end, not the batch's: the write and other jobs' runs are not in it.
    end_ns = started_ns + int(duration * 1_000_000) if duration is not None else None
    span.end(end_time=end_ns)


class Tracer:
    """A runner's job spans: each opened as its job starts and current while it runs, all
    of a batch's ended together once its outcomes are recorded (their status is the
    recorded one). ``redacts(task name)``: whether a task's errors are kept out of spans."""

    def __init__(self, redacts: Callable[[str | None], bool]):
        self.redacts = redacts
        self.spans: list = []  # the executing batch's (outcome, span, start ns)
        self.deliveries: dict = {}  # the executing batch's deliveries by ref: where each came from

    def begin(self) -> list:
        """A new batch's spans: the jobs it runs from now on add theirs to this list."""
        self.spans = []
        return self.spans

    def open(self, o: Outcome) -> object:
        """Open the span of a job starting now and make it current; the token to :func:`detach`."""
        span, started = start(o, o.trace, self.deliveries.get(o.ref))
        self.spans.append((o, span, started))
        return attach(span)

    def close(self, token: object) -> None:
        """The job's run ended: its span is no longer current (it ends with its batch)."""
        detach(token)

    def end_all(self, spans: list) -> None:
        for o, span, started in spans:
            end(span, started, o, redact=self.redacts(o.task))

    @contextmanager
    def running(self, batch: Batch) -> Iterator[None]:
        """While ``batch``'s jobs run, their spans go to ``batch.spans``; if the run itself
        fails, they end then."""
        batch.spans = self.begin()
        self.deliveries = {d.ref: d for d in batch.deliveries}
        try:
            yield
        except BaseException:
            spans, batch.spans = batch.spans, []
            self.end_all(spans)
            raise

    @contextmanager
    def ending(self, batch: Batch) -> Iterator[None]:
        """End ``batch``'s spans once its outcomes are recorded, whatever recording does."""
        try:
            yield
        finally:
            spans, batch.spans = batch.spans, []
            self.end_all(spans)
