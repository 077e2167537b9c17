"""Periodic tasks: expressions, which fires a tick enqueues, and the ticker event end to end on moto."""

import calendar
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kindling.core.errors import TaskDefinitionError
from kindling.core.registry import Registry
from kindling.core.schedules import ScheduleError, due, parse, tick_job_id
from support import examples


def utc(text: str) -> int:
    return calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M")) * 1000


def fires(expression: str, start: str, end: str) -> list[str]:
    return [time.strftime("%Y-%m-%d %H:%M", time.gmtime(ms / 1000))
            for ms in parse(expression).fires(utc(start), utc(end))]


def test_rates_fire_on_multiples_of_their_period():
    assert fires("rate(15 minutes)", "2026-11-22 10:01", "2026-11-22 11:00") == [
        "2026-11-22 10:15", "2026-11-22 10:30", "2026-11-22 10:45"]
    assert fires("rate(1 day)", "2026-11-22 00:00", "2026-11-24 00:00") == ["2026-11-22 00:00", "2026-11-23 00:00"]


def test_cron_as_eventbridge_reads_it():
    # 12:00 UTC on weekdays (2026-11-22 is a Sunday)
    assert fires("cron(0 12 ? * MON-FRI *)", "2026-11-22 00:00", "2026-11-25 00:00") == [
        "2026-11-23 12:00", "2026-11-24 12:00"]
    assert fires("cron(0/20 8 1 JAN,NOV ? 2026)", "2026-11-01 00:00", "2026-11-02 00:00") == [
        "2026-11-01 08:00", "2026-11-01 08:20", "2026-11-01 08:40"]
    assert fires("cron(30 9 ? * 1 *)", "2026-11-22 00:00", "2026-11-23 00:00") == ["2026-11-22 09:30"]  # 1 = SUN


@pytest.mark.parametrize("expression,reason", [
    ("every 5 minutes", "rate(...) or cron(...)"),
    ("rate(0 minutes)", "positive whole number"),
    ("rate(5 weeks)", "minute(s), hour(s) or day(s)"),
    ("cron(0 12 * * *)", "six fields"),
    ("cron(0 12 * * MON *)", "exactly one of day-of-month and day-of-week"),
    ("cron(0 12 L * ? *)", "L, W and # are not supported"),
    ("cron(61 12 * * ? *)", "outside 0-59"),
])
def test_bad_expressions_are_refused_with_a_reason(expression, reason):
    with pytest.raises(ScheduleError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        parse(expression)


def test_a_schedule_is_checked_when_the_task_is_defined():
    reg = Registry()
    with pytest.raises(TaskDefinitionError, match="six fields"):
        reg.task(name="t", schedule="cron(0 12 * *)")(lambda: None)
    with pytest.raises(TaskDefinitionError, match="must run with no arguments"):
        reg.task(name="u", schedule="rate(1 minute)")(lambda x: None)


def test_a_tick_sees_this_minute_and_the_one_before_with_stable_job_ids():
    reg = Registry()
    reg.task(name="every5", schedule="rate(5 minutes)")(lambda: None)
    reg.task(name="plain")(lambda: None)
    at = utc("2026-11-22 10:05") + 20_000  # a tick 20 s into 10:05
    assert [(t.name, f) for t, f in due(reg, at)] == [("every5", utc("2026-11-22 10:05"))]
    late = utc("2026-11-22 10:06") + 50_000  # the next tick, late: still sees 10:05, once more
    assert [f for _, f in due(reg, late)] == [utc("2026-11-22 10:05")]
    assert tick_job_id("every5", utc("2026-11-22 10:05")) == f"sched.every5.{utc('2026-11-22 10:05')}"


@pytest.mark.service  # a moto server: to move to tests/service
def test_the_ticker_event_enqueues_due_fires_on_the_jobs_queue(table, monkeypatch):
    import boto3
    from kindling.core import codec
    from kindling.triggers.sqs.handler import LambdaWorker

    reg = Registry()
    reg.task(name="minutely", schedule="rate(1 minute)")(lambda: None)
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName="ticks")["QueueUrl"]
    monkeypatch.setenv("KINDLING_TABLE", table)
    monkeypatch.setenv("KINDLING_QUEUE_URL", url)
    response = LambdaWorker(reg, log=None, metrics=False)({"kindling": "tick"}, None)
    assert len(response["enqueued"]) == 2 and response["failed"] == []  # this minute and the one before
    bodies = [codec.loads(m["Body"]) for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]]
    assert sorted(b["id"] for b in bodies) == sorted(response["enqueued"])
    assert {b["task"] for b in bodies} == {"minutely"}


@pytest.mark.service  # a moto server: to move to tests/service
def test_on_a_fifo_queue_the_ticker_sends_each_schedule_as_its_own_ordered_group(table, monkeypatch):
    import boto3
    from kindling.core import codec
    from kindling.triggers.sqs.handler import LambdaWorker

    reg = Registry()
    reg.task(name="minutely", schedule="rate(1 minute)")(lambda: None)
    reg.task(name="other", schedule="rate(1 minute)")(lambda: None)
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName="ticks.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    monkeypatch.setenv("KINDLING_TABLE", table)
    monkeypatch.setenv("KINDLING_QUEUE_URL", url)
    worker = LambdaWorker(reg, log=None, metrics=False)
    response = worker({"kindling": "tick"}, None)
    assert len(response["enqueued"]) == 4 and response["failed"] == []
    assert worker({"kindling": "tick"}, None)["failed"] == []  # a doubled tick: deduplicated by job id
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                   AttributeNames=["MessageGroupId", "MessageDeduplicationId"])["Messages"]
    assert len(messages) == 4
    for m in messages:
        body = codec.loads(m["Body"])
        assert m["Attributes"]["MessageGroupId"] == f"sched.{body['task']}"
        assert m["Attributes"]["MessageDeduplicationId"] == body["id"]


def test_kindling_schedules_prints_what_the_code_declares(tmp_path, capsys):
    from kindling.tools.cli import main

    tasks = tmp_path / "sched_tasks.py"
    tasks.write_text('from kindling import task\n\n@task(name="nightly", schedule="cron(0 3 * * ? *)")\n'
                     'def nightly():\n    pass\n')
    assert main(["schedules", "--tasks", str(tasks), "--next", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["TASK", "SCHEDULE", "NEXT", "(UTC)"]
    assert out[1].startswith("nightly") and "cron(0 3 * * ? *)" in out[1] and out[1].count("03:00") == 2


@pytest.mark.parametrize("a, b", [
    ("reports daily", "reports_daily"),  # folded to the same characters
    ("emails/send", "emails_send"),
    ("x" * 100 + "a", "x" * 100 + "b"),  # equal in their first 100 characters
    ("ü", "_"),
])
def test_two_task_names_never_share_a_fire_job_id(a, b):
    assert tick_job_id(a, 1) != tick_job_id(b, 1)


@given(st.text(min_size=1, max_size=200), st.text(min_size=1, max_size=200))
@settings(max_examples=examples(200))
def test_fire_job_ids_differ_whenever_task_names_differ_and_are_valid_job_ids(a, b):
    from kindling.core.envelope import MAX_ID_LENGTH, new_job

    fire = utc("2026-11-22 10:05")
    for name in (a, b):
        assert len(tick_job_id(name, fire)) <= MAX_ID_LENGTH
        new_job(name, job_id=tick_job_id(name, fire))  # the envelope accepts it
    assert (tick_job_id(a, fire) == tick_job_id(b, fire)) == (a == b)
