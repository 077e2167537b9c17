"""OpenTelemetry spans per job (kindling.shared.otel), read back through the SDK's in-memory exporter."""

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kindling.core.envelope import encode_job, new_job
from kindling.core.errors import StoreUnavailable
from kindling.core.registry import Registry
from kindling.engine.runner import Delivery, Runner
from kindling.stores.results import MemoryResultStore
from support.tasks import delivery

trace = pytest.importorskip("opentelemetry.trace")
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PRODUCER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
PRODUCER_TRACE_ID = 0x5759E988BD862E3FE1BE46A994272793
PRODUCER_SPAN_ID = 0x53995C3F42CD8AD8


def registry() -> Registry:
    reg = Registry()

    @reg.task(name="ok")
    def ok(x):
        with trace.get_tracer("test").start_as_current_span("inside"):
            return x

    @reg.task(name="flaky", max_attempts=3)
    def flaky():
        raise ValueError("flaky broke")

    @reg.task(name="doomed", max_attempts=1)
    def doomed():
        raise RuntimeError("doomed for good")

    @reg.task(name="secret", max_attempts=1, redact=True)
    def secret(card):
        raise ValueError(f"card {card} refused")

    @reg.task(name="later")
    async def later(x):
        await asyncio.sleep(0)
        return x

    return reg


def by_task(exporter) -> dict:
    return {s.name: s for s in exporter.get_finished_spans() if s.name != "inside"}


def test_one_span_per_job_run_with_its_attributes_and_status(spans):
    runner = Runner(registry(), MemoryResultStore(), log=None, otel=True)
    batch = [delivery("ok", 1, trace=PRODUCER, enqueued_at=1_700_000_000_000),
             delivery("flaky"), delivery("doomed"),
             delivery("later", 2)]
    outcomes = runner.run(batch)
    assert [o.status for o in outcomes] == ["succeeded", "failed", "dead", "succeeded"]
    got = by_task(spans)
    assert sorted(got) == ["doomed", "flaky", "later", "ok"]
    for o in outcomes:
        span = got[o.task]
        assert span.kind is SpanKind.CONSUMER
        a = span.attributes
        assert (a["kindling.job.id"], a["kindling.job.task"], a["kindling.job.status"]) == (o.job_id, o.task, o.status)
        assert a["kindling.job.attempt"] == o.attempts == 1
        assert a["messaging.message.id"] == o.ref
        assert a["kindling.job.queue_wait_ms"] >= 0
        assert a["kindling.job.duration_ms"] == o.record["duration_ms"]
        assert span.end_time - span.start_time == pytest.approx(o.record["duration_ms"] * 1e6, abs=1000)
    # enqueued at a fixed time in 2023: its wait is its start, less that time
    assert got["ok"].attributes["kindling.job.queue_wait_ms"] == outcomes[0].record["started_at"] - 1_700_000_000_000
    assert got["ok"].status.status_code is StatusCode.UNSET and got["later"].status.status_code is StatusCode.UNSET
    for name, message in (("flaky", "flaky broke"), ("doomed", "doomed for good")):
        span = got[name]
        assert span.status.status_code is StatusCode.ERROR and message in span.status.description
        (event,) = span.events
        assert event.name == "exception" and event.attributes["exception.message"] == message
        assert "Traceback" in event.attributes["exception.stacktrace"]


def test_the_task_runs_inside_its_jobs_span(spans):
    Runner(registry(), MemoryResultStore(), log=None, otel=True).run([delivery("ok", 1)])
    inside = next(s for s in spans.get_finished_spans() if s.name == "inside")
    job = by_task(spans)["ok"]
    assert inside.parent.span_id == job.context.span_id and inside.context.trace_id == job.context.trace_id


def test_the_producers_trace_is_the_parent_and_a_link(spans):
    Runner(registry(), MemoryResultStore(), log=None, otel=True).run([delivery("ok", 1, trace=PRODUCER)])
    span = by_task(spans)["ok"]
    assert span.context.trace_id == PRODUCER_TRACE_ID
    assert span.parent.span_id == PRODUCER_SPAN_ID and span.parent.is_remote
    assert [link.context.span_id for link in span.links] == [PRODUCER_SPAN_ID]
    assert span.attributes["kindling.xray_trace_id"] == "1-5759e988-bd862e3fe1be46a994272793"


def test_inside_an_active_span_the_job_is_its_child_and_links_to_the_producer(spans):
    runner = Runner(registry(), MemoryResultStore(), log=None, otel=True)
    with trace.get_tracer("test").start_as_current_span("invocation") as invocation:
        runner.run([delivery("ok", 1, trace=PRODUCER)])
    span = by_task(spans)["ok"]
    assert span.parent.span_id == invocation.get_span_context().span_id
    assert [link.context.trace_id for link in span.links] == [PRODUCER_TRACE_ID]


@pytest.mark.parametrize("header", [None, "", "Root=1-5759e988-bd862e3fe1be46a994272793", "Root=garbage;Parent=x",
                                    "Root=1-zzzzzzzz-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8",
                                    "Root=1-00000000-000000000000000000000000;Parent=53995c3f42cd8ad8",
                                    "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=0000000000000000"])
def test_a_header_without_a_usable_parent_starts_a_trace_of_its_own(spans, header):
    from kindling.shared.otel import producer_context

    assert producer_context(header) is None
    Runner(registry(), MemoryResultStore(), log=None, otel=True).run([delivery("ok", 1, trace=header)])
    span = by_task(spans)["ok"]
    assert span.parent is None and not span.links
    assert span.context.trace_id != PRODUCER_TRACE_ID


def test_sampled_0_is_kept_and_an_open_decision_is_sampled():
    from kindling.shared.otel import producer_context

    root = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8"
    assert not producer_context(root + ";Sampled=0").trace_flags.sampled
    assert producer_context(root + ";Sampled=?").trace_flags.sampled
    assert producer_context(root).trace_flags.sampled


def test_a_redacted_tasks_span_carries_no_error_message(spans):
    Runner(registry(), MemoryResultStore(), log=None, otel=True).run([delivery("secret", "4111-1111")])
    span = by_task(spans)["secret"]
    assert span.attributes["kindling.job.status"] == "dead"
    assert "4111" not in repr(span.to_json())
    assert span.events[0].attributes["exception.type"] == "ValueError"


def test_a_job_handed_back_after_it_ran_ends_deferred_with_an_error(spans):
    class WriteFails(MemoryResultStore):
        def write(self, records, *, deadline=None):
            raise StoreUnavailable("down (test)")

    (o,) = Runner(registry(), WriteFails(), log=None, otel=True).run([delivery("ok", 1)])
    assert o.status == "deferred"
    span = by_task(spans)["ok"]
    assert span.attributes["kindling.job.status"] == "deferred"
    assert span.status.status_code is StatusCode.ERROR and "result store unavailable" in span.status.description


def test_jobs_that_do_not_run_get_no_span(spans):
    store = MemoryResultStore()
    runner = Runner(registry(), store, log=None, otel=True)
    d = delivery("ok", 1)
    runner.run([d])
    spans.clear()
    outcomes = runner.run([d, Delivery("bad", b"not json"), delivery("no_such_task")])
    assert [o.status for o in outcomes] == ["skipped", "rejected", "rejected"]
    assert spans.get_finished_spans() == ()


def test_threaded_runs_get_a_span_each(spans):
    runner = Runner(registry(), MemoryResultStore(), log=None, otel=True, threads=4)
    runner.run([delivery("ok", n) for n in range(6)])
    assert len(by_task(spans)) == 1 and len([s for s in spans.get_finished_spans() if s.name == "ok"]) == 6


@pytest.mark.parametrize("value,on", [(None, False), ("0", False), ("true", False), ("1", True)])
def test_kindling_otel_1_turns_spans_on(spans, monkeypatch, value, on):
    if value is None:
        monkeypatch.delenv("KINDLING_OTEL", raising=False)
    else:
        monkeypatch.setenv("KINDLING_OTEL", value)
    runner = Runner(registry(), MemoryResultStore(), log=None)
    assert runner.otel is on
    runner.run([delivery("ok", 1)])
    assert len(by_task(spans)) == int(on)


@pytest.mark.service  # a moto server: to move to tests/service
def test_the_lambda_handler_opens_a_span_per_job_from_the_sqs_trace_header(spans, table, monkeypatch):
    import tasks  # noqa: F401  the example tasks in functions/worker
    from kindling.triggers.sqs.handler import LambdaWorker

    monkeypatch.setenv("KINDLING_TABLE", table)
    monkeypatch.setenv("KINDLING_OTEL", "1")
    job = new_job("echo", (2, 3))
    event = {"Records": [{"messageId": "m1", "receiptHandle": "rh", "body": encode_job(job).decode(),
                          "attributes": {"ApproximateReceiveCount": "1", "AWSTraceHeader": PRODUCER},
                          "messageAttributes": {}, "eventSource": "aws:sqs",
                          "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:jobs"}]}
    assert LambdaWorker(log=None)(event, None) == {"batchItemFailures": []}
    (span,) = spans.get_finished_spans()
    assert span.name == "echo" and span.attributes["kindling.job.id"] == job.id
    assert span.attributes["kindling.job.status"] == "succeeded" and span.context.trace_id == PRODUCER_TRACE_ID
    assert (span.attributes["messaging.system"], span.attributes["messaging.destination.name"]) == ("aws_sqs", "jobs")


PROBE = """
import sys
from kindling.core.envelope import encode_job, new_job
from kindling.core.registry import Registry
from kindling.stores.results import MemoryResultStore
from kindling.engine.runner import Delivery, Runner
import importlib.util
assert importlib.util.find_spec("opentelemetry") is not None  # installed, so only the switch keeps it out
reg = Registry()
reg.task(name="one")(lambda: 1)
outcomes = Runner(reg, MemoryResultStore(), log=None).run([Delivery("m", encode_job(new_job("one")))])
assert outcomes[0].status == "succeeded", outcomes
print(" ".join(sorted(m for m in sys.modules if m.startswith(("opentelemetry", "kindling.shared.otel")))))
"""


@pytest.mark.parametrize("value,imported", [(None, False), ("0", False), ("1", True)])
def test_without_the_switch_opentelemetry_is_never_imported_even_if_installed(value, imported):
    env = {k: v for k, v in os.environ.items() if k != "KINDLING_OTEL"}
    if value is not None:
        env["KINDLING_OTEL"] = value
    env["PYTHONPATH"] = str(ROOT / "layers/kindling")
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True)
    loaded = out.stdout.split()
    assert ("kindling.shared.otel" in loaded and any(m.startswith("opentelemetry") for m in loaded)) is imported
    assert bool(loaded) is imported


MESSAGING = ("messaging.system", "messaging.destination.name", "messaging.operation.type",
             "messaging.operation.name", "messaging.message.id")


def test_spans_follow_the_messaging_conventions_for_an_sqs_queue(spans):
    runner = Runner(registry(), MemoryResultStore(), log=None, otel=True)
    d = delivery("ok", 1)
    d.queue_arn = "arn:aws:sqs:us-east-1:000000000000:shop-jobs"
    sync_and_async = [d, delivery("later", 2)]
    sync_and_async[1].queue_arn = d.queue_arn
    runner.run(sync_and_async)
    for span, sent in zip((by_task(spans)["ok"], by_task(spans)["later"]), sync_and_async, strict=True):
        assert {k: span.attributes.get(k) for k in MESSAGING} == {
            "messaging.system": "aws_sqs", "messaging.destination.name": "shop-jobs",
            "messaging.operation.type": "process", "messaging.operation.name": "process",
            "messaging.message.id": sent.ref}


def test_spans_follow_the_messaging_conventions_for_a_valkey_stream(spans):
    runner = Runner(registry(), MemoryResultStore(), log=None, otel=True)
    d = delivery("ok", 1)
    d.counts_runs, d.stream = True, "shop:jobs"
    runner.run([d])
    span = by_task(spans)["ok"]
    assert {k: span.attributes.get(k) for k in MESSAGING} == {
        "messaging.system": "valkey", "messaging.destination.name": "shop:jobs",
        "messaging.operation.type": "process", "messaging.operation.name": "process",
        "messaging.message.id": d.ref}
