"""Logs in Powertools' layout and EMF metrics, held to what Powertools itself writes."""

import io
import logging
import re

import pytest
from kindling.core import codec
from kindling.core.envelope import encode_job, new_job
from kindling.core.registry import Registry
from kindling.engine.runner import Delivery, Runner
from kindling.shared import logs, metrics
from kindling.stores.results import MemoryResultStore

TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"


class Context:
    function_name = "kindling-worker"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:kindling-worker"
    aws_request_id = "req-1"


@pytest.fixture
def lambda_env(monkeypatch):
    monkeypatch.setenv("_X_AMZN_TRACE_ID", TRACE)
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "checkout")
    for name in ("POWERTOOLS_LOG_LEVEL", "LOG_LEVEL", "AWS_LAMBDA_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)


def powertools_line(message: str, **extra) -> dict:
    from aws_lambda_powertools import Logger

    buf = io.StringIO()
    logger = Logger(service="checkout", logger_handler=logging.StreamHandler(buf))

    @logger.inject_lambda_context
    def handler(event, context):
        logger.warning(message, extra=extra)

    handler({}, Context())
    return codec.loads(buf.getvalue().splitlines()[0])


def kindling_line(entry: dict) -> dict:
    buf = io.StringIO()
    logs.invocation(Context(), cold_start=True)
    logs.LogSink(buf)(entry)
    return codec.loads(buf.getvalue())


def test_log_lines_have_powertools_keys_in_powertools_order(lambda_env):
    theirs = powertools_line("job failed", job_id="j1", task="resize")
    ours = kindling_line({"level": "WARNING", "location": "kindling.engine.runner:run", "message": "job failed",
                          "job_id": "j1", "task": "resize"})
    assert list(ours) == list(theirs)
    for key in ("level", "message", "service", "cold_start", "function_name", "function_memory_size",
                "function_arn", "function_request_id", "xray_trace_id", "job_id", "task"):
        assert ours[key] == theirs[key], key
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}[+-]\d{4}"
    assert re.fullmatch(stamp, ours["timestamp"]) and re.fullmatch(stamp, theirs["timestamp"])


@pytest.mark.parametrize("env,level,shown", [
    ({}, "INFO", True),
    ({"POWERTOOLS_LOG_LEVEL": "WARNING"}, "INFO", False),
    ({"POWERTOOLS_LOG_LEVEL": "WARNING"}, "ERROR", True),
    ({"LOG_LEVEL": "ERROR"}, "WARNING", False),
    ({"AWS_LAMBDA_LOG_LEVEL": "WARN", "POWERTOOLS_LOG_LEVEL": "DEBUG"}, "INFO", False),
    ({"AWS_LAMBDA_LOG_LEVEL": "DEBUG"}, "DEBUG", True),
])
def test_log_level_follows_lambda_then_powertools_variables(lambda_env, monkeypatch, env, level, shown):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    buf = io.StringIO()
    logs.LogSink(buf)({"level": level, "message": "m"})
    assert bool(buf.getvalue()) is shown


def test_the_runner_logs_a_batch_line_and_one_per_failed_job(lambda_env):
    reg = Registry()
    reg.task(name="boom")(lambda: 1 / 0)
    reg.task(name="ok")(lambda: 1)
    buf = io.StringIO()
    bodies = [encode_job(new_job(name)).decode() for name in ("ok", "boom")]
    logs.invocation()  # as the handler starts each invocation: the trace id comes from the environment
    Runner(reg, MemoryResultStore(), log=logs.LogSink(buf), metrics=False).run(
        [Delivery(f"m{i}", b, 1) for i, b in enumerate(bodies)])
    failed, batch = (codec.loads(line) for line in buf.getvalue().splitlines())  # its jobs, then the batch
    assert batch["message"] == "batch done" and batch["succeeded"] == 1 and batch["failed"] == 1
    assert failed["level"] == "WARNING" and failed["task"] == "boom" and failed["attempt"] == 1
    assert failed["status"] == "failed" and "ZeroDivisionError" in failed["error"]
    assert failed["xray_trace_id"] == "1-5759e988-bd862e3fe1be46a994272793"
    for line in (failed, batch):
        assert_powertools_location(line["location"])


def assert_powertools_location(location: str) -> None:
    """``<function>:<line>`` as Powertools writes it (``%(funcName)s:%(lineno)d``), naming a
    function of kindling's whose source spans that line."""
    import inspect

    import kindling.engine.runner

    name, _, line = location.partition(":")
    assert re.fullmatch(r"[A-Za-z_]\w*", name) and line.isdigit(), location
    sources = [getattr(kindling.engine.runner.Runner, name, None), getattr(kindling.engine.runner, name, None),
               getattr(logs, name, None)]
    spans = []
    for fn in filter(None, sources):
        lines, first = inspect.getsourcelines(fn)
        spans.append(first <= int(line) < first + len(lines))
    assert any(spans), location


def test_the_runners_other_lines_say_where_they_were_written(lambda_env):
    from kindling.core.errors import StoreUnavailable

    class Down(MemoryResultStore):
        def begin_read(self, ids, *, deadline=None):
            raise StoreUnavailable("down")

    reg = Registry()
    reg.task(name="ok")(lambda: 1)
    buf = io.StringIO()
    Runner(reg, Down(), log=logs.LogSink(buf), metrics=False).run(
        [Delivery("m", encode_job(new_job("ok")).decode(), 1)])
    lines = [codec.loads(line) for line in buf.getvalue().splitlines()]
    assert lines and all(line["location"] != "kindling.engine.runner:run" for line in lines)
    for line in lines:
        assert_powertools_location(line["location"])


# -- EMF ------------------------------------------------------------------------------------

UNITS = {"Count", "Milliseconds", "Seconds"}


def assert_valid_emf(doc: dict) -> None:
    """The EMF specification's rules for one document (the subset kindling writes)."""
    meta = doc["_aws"]
    assert isinstance(meta["Timestamp"], int) and meta["Timestamp"] > 0
    for directive in meta["CloudWatchMetrics"]:
        assert isinstance(directive["Namespace"], str) and 0 < len(directive["Namespace"]) <= 255
        for dimension_set in directive["Dimensions"]:
            assert 1 <= len(dimension_set) <= 30
            for key in dimension_set:
                assert isinstance(doc[key], str) and doc[key]
        assert len(directive["Metrics"]) <= 100
        for metric in directive["Metrics"]:
            assert metric["Unit"] in UNITS
            values = doc[metric["Name"]]
            assert isinstance(values, list) and 1 <= len(values) <= 100
            assert all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def run_batch(reg, bodies, **runner):
    store = MemoryResultStore()
    outcomes = Runner(reg, store, log=None, metrics=False, **runner).run(
        [Delivery(f"m{i}", b, 1) for i, b in enumerate(bodies)])
    return outcomes


def registry_tasks(r: Registry) -> None:
    """This module's tasks, on the fresh registry the shared ``reg`` fixture gives each test."""
    r.task(name="resize")(lambda: 1)
    r.task(name="boom")(lambda: 1 / 0)


def test_one_document_per_registered_task_and_one_of_totals(reg, lambda_env):
    bodies = [encode_job(new_job(n)).decode() for n in ("resize", "resize", "boom")]
    bodies.append(codec.dumps({"version": 1, "id": "x", "task": "made.up", "args": [], "kwargs": {},
                               "enqueued_at": 1_700_000_000_000}))
    docs = metrics.documents(run_batch(reg, bodies), reg, cold_start=True, at_ms=1_700_000_000_000)
    for doc in docs:
        assert_valid_emf(doc)
    by_task = {d.get("task"): d for d in docs}
    assert set(by_task) == {"resize", "boom", None}  # the unknown task is no dimension
    assert by_task["resize"]["JobsSucceeded"] == [2] and len(by_task["resize"]["JobDuration"]) == 2
    assert by_task["boom"]["JobsFailed"] == [1]
    totals = by_task[None]
    assert totals["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["service"]]
    assert totals["BatchSize"] == [4] and totals["JobsRejected"] == [1] and totals["ColdStart"] == [1]
    assert totals["service"] == "checkout"


def test_documents_match_powertools_metrics_for_the_same_figures(reg, lambda_env, monkeypatch):
    from aws_lambda_powertools import Metrics
    from aws_lambda_powertools.metrics import MetricUnit

    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "shop")
    bodies = [encode_job(new_job("resize")).decode() for _ in range(3)]
    doc = next(d for d in metrics.documents(run_batch(reg, bodies), reg, at_ms=1) if d.get("task") == "resize")

    theirs = Metrics(namespace="shop", service="checkout")
    theirs.add_dimension(name="task", value="resize")
    theirs.add_metric(name="JobsSucceeded", unit=MetricUnit.Count, value=3)
    for name, unit in (("JobDuration", MetricUnit.Milliseconds), ("QueueWait", MetricUnit.Milliseconds)):
        for value in doc[name]:
            theirs.add_metric(name=name, unit=unit, value=value)
    expected = theirs.serialize_metric_set()

    def shape(d):
        directive = d["_aws"]["CloudWatchMetrics"][0]
        return (directive["Namespace"], sorted(map(sorted, directive["Dimensions"])),
                sorted((m["Name"], m["Unit"]) for m in directive["Metrics"]),
                {k: v for k, v in d.items() if k != "_aws"})

    ours_shape, their_shape = shape(doc), shape(expected)
    assert ours_shape[:3] == their_shape[:3]
    assert {k: [float(x) for x in v] if isinstance(v, list) else v for k, v in ours_shape[3].items()} == \
        {k: [float(x) for x in v] if isinstance(v, list) else v for k, v in their_shape[3].items()}


def test_a_500_job_batch_records_every_value_in_documents_of_at_most_100(reg, lambda_env):
    bodies = [encode_job(new_job("resize" if i % 5 else "boom")).decode() for i in range(500)]
    outcomes = run_batch(reg, bodies)
    docs = metrics.documents(outcomes, reg, at_ms=1)
    for doc in docs:
        assert_valid_emf(doc)

    def values(task, name):
        return [v for d in docs if d.get("task") == task for v in d.get(name, [])]

    durations = sorted(o.record["duration_ms"] for o in outcomes if o.task == "resize")
    assert len(durations) == 400 and sorted(values("resize", "JobDuration")) == durations
    assert len(values("resize", "QueueWait")) == 400 and len(values("boom", "JobDuration")) == 100
    assert len(values(None, "JobDuration")) == 500 and len(values(None, "QueueWait")) == 500
    # Counts are written once, never once per document.
    assert values("resize", "JobsSucceeded") == [400] and values("boom", "JobsFailed") == [100]
    assert values(None, "JobsSucceeded") == [400] and values(None, "BatchSize") == [500]


def test_the_worker_writes_emf_lines_when_enabled(reg, lambda_env, capsys):
    Runner(reg, MemoryResultStore(), log=None, metrics=True).run(
        [Delivery("m", encode_job(new_job("resize")).decode(), 1)])
    docs = [codec.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [d.get("task") for d in docs] == ["resize", None] and docs[1]["ColdStart"] == [1]


def test_task_code_logs_carry_the_running_jobs_fields(lambda_env, monkeypatch):
    from kindling.shared.tasklog import get_logger

    buf = io.StringIO()
    monkeypatch.setattr(logs, "_sink", logs.LogSink(buf))
    log = get_logger("tests.tasklog")
    reg = Registry()

    @reg.task(name="resize")
    def resize(key):
        log.info("resizing", extra={"key": key})
        try:
            raise ZeroDivisionError("no")
        except ZeroDivisionError:
            log.exception("it broke")
        return key

    job = new_job("resize", ["a.png"])
    Runner(reg, MemoryResultStore(), log=None, metrics=False).run([Delivery("m", encode_job(job).decode(), 1)])
    info, error = (codec.loads(line) for line in buf.getvalue().splitlines())
    assert info["message"] == "resizing" and info["key"] == "a.png"
    assert (info["job_id"], info["task"], info["attempt"]) == (job.id, "resize", 1)
    assert info["location"].startswith("resize:") and info["service"] == "checkout"
    assert error["level"] == "ERROR" and error["exception_name"] == "ZeroDivisionError"


@pytest.mark.service  # a moto server: to move to tests/service
def test_the_producers_trace_reaches_the_jobs_log_line_and_record(lambda_env, moto_endpoint, table, monkeypatch):
    """Client -> SQS (AWSTraceHeader) -> the worker's record and log line, on moto."""
    import boto3
    from kindling.producer.client import Client
    from kindling.triggers.sqs.handler import LambdaWorker

    producer_trace = "Root=1-67891233-abcdef012345678912345678;Parent=53995c3f42cd8ad8;Sampled=1"
    monkeypatch.setenv("_X_AMZN_TRACE_ID", producer_trace)
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName="traced")["QueueUrl"]
    client = Client(queue_url=url, table=table)
    handle = client.enqueue("always_fails", "traced")
    msg = sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["All"])["Messages"][0]
    assert msg["Attributes"]["AWSTraceHeader"] == producer_trace

    import tasks  # noqa: F401

    monkeypatch.setenv("_X_AMZN_TRACE_ID", TRACE)  # the worker's own invocation has another trace
    monkeypatch.setenv("KINDLING_TABLE", table)
    buf = io.StringIO()
    worker = LambdaWorker(log=logs.LogSink(buf), metrics=False)
    event = {"Records": [{"messageId": msg["MessageId"], "receiptHandle": msg["ReceiptHandle"], "body": msg["Body"],
                          "attributes": msg["Attributes"], "eventSource": "aws:sqs",
                          "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:traced"}]}
    worker(event, None)
    *jobs, batch = [codec.loads(line) for line in buf.getvalue().splitlines()]
    (failed,) = [line for line in jobs if line.get("job_id")]  # before its batch's line
    assert batch["kindling"] == "batch"
    assert failed["job_id"] == handle.id and failed["xray_trace_id"] == "1-67891233-abcdef012345678912345678"
    assert client.record(handle.id)["trace_id"] == "1-67891233-abcdef012345678912345678"
