"""Named queues: the routing rule, the producer sending to the queue a job is routed to, and
the worker moving a dead job to its own queue's dead-letter queue (moto)."""

import uuid

import boto3
import pytest
from kindling.core import routing
from kindling.core.envelope import decode_job, encode_job, new_job
from kindling.core.errors import KindlingError, TaskDefinitionError, UnknownQueue
from kindling.core.registry import Registry
from kindling.producer.client import Call, Client

# -- the rule, pure ------------------------------------------------------------------


def test_the_send_wins_over_the_task_which_wins_over_the_default():
    assert routing.queue_name("bulk", "reports") == "bulk"
    assert routing.queue_name(None, "reports") == "reports"
    assert routing.queue_name(None, None) == "default"


def test_resolve_finds_named_queues_and_the_default_and_refuses_an_unknown_name():
    queues = {"reports": "https://q/reports", "bulk": "https://q/bulk"}
    assert routing.resolve("reports", "https://q/jobs", queues) == "https://q/reports"
    assert routing.resolve("default", "https://q/jobs", queues) == "https://q/jobs"
    with pytest.raises(UnknownQueue, match="unknown queue 'report': the named queues are bulk, reports"):
        routing.resolve("report", "https://q/jobs", queues)
    with pytest.raises(UnknownQueue, match=r"none \(KINDLING_QUEUES is not set\)"):
        routing.resolve("reports", "https://q/jobs", {})
    with pytest.raises(UnknownQueue, match="no default queue"):
        routing.resolve("default", "", queues)


def test_kindling_queues_parses_and_refuses_what_it_cannot_route():
    assert routing.parse_queues("a=https://q/a, b=https://q/b,") == {"a": "https://q/a", "b": "https://q/b"}
    assert routing.parse_queues("") == {}
    for text, message in [("a", "not key=value"), ("=https://q/a", "not key=value"), ("a=", "not key=value"),
                          ("a=u1,a=u2", "given twice"), ("default=https://q/x", "'default' is the jobs queue"),
                          ("bad.name=https://q/x", "a queue name is"), (f"{'x' * 41}=u", "a queue name is")]:
        with pytest.raises(KindlingError, match=message):
            routing.parse_queues(text)


def test_a_dead_letter_goes_to_its_own_queues_dlq_and_only_there():
    dlqs = {"arn:q:reports": "https://q/reports-dead", "arn:q:jobs": "https://q/dead"}
    assert routing.dead_letter_url("arn:q:reports", dlqs, "https://q/dead") == "https://q/reports-dead"
    assert routing.dead_letter_url("arn:q:other", dlqs, "https://q/dead") is None  # left to its redrive policy
    assert routing.dead_letter_url("arn:q:any", {}, "https://q/dead") == "https://q/dead"  # one-queue deployment
    assert routing.dead_letter_url("arn:q:any", {}, "") is None


def test_a_task_names_its_queue_and_a_bad_name_fails_at_import():
    reg = Registry()
    t = reg.task(name="report", queue="reports")(lambda: None)
    assert t.queue == "reports" and reg.task(name="plain")(lambda: None).queue is None
    for bad in ("", "has space", "x" * 41, 3):
        with pytest.raises(TaskDefinitionError, match="queue: a queue name is"):
            reg.task(name=f"bad{bad!r}", queue=bad)(lambda: None)


# -- the producer (moto) -------------------------------------------------------------


def _queue(name: str, fifo: bool = False) -> str:
    attrs = {"FifoQueue": "true"} if fifo else {}
    suffix = ".fifo" if fifo else ""
    return boto3.client("sqs").create_queue(QueueName=f"{name}-{uuid.uuid4().hex[:8]}{suffix}",
                                            Attributes=attrs)["QueueUrl"]


def _drain(url: str) -> list:
    sqs, jobs = boto3.client("sqs"), []
    while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        jobs += [decode_job(m["Body"].encode()) for m in got]
        sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
    return jobs


@pytest.fixture
def queues(moto_endpoint):
    return {"default": _queue("jobs"), "reports": _queue("reports"), "bulk": _queue("bulk")}


@pytest.fixture
def client(queues, monkeypatch):
    monkeypatch.setenv("KINDLING_QUEUES", f"reports={queues['reports']},bulk={queues['bulk']}")
    return Client(queue_url=queues["default"], table="unused")


def test_a_tasks_jobs_go_to_its_queue_unless_the_send_names_another(client, queues):
    reg = Registry()
    report = reg.task(name="report", queue="reports")(lambda n: n)
    plain = reg.task(name="plain")(lambda n: n)
    a = client.enqueue(report, 1)
    b = client.send(Call(report, [2], queue="bulk"))
    c = client.enqueue(plain, 3)
    d = client.send(Call("plain", [4], queue="reports"))  # a task by name: only the send routes it
    e = client.send(Call(report, [5], queue="default"))
    assert [j.id for j in _drain(queues["reports"])] in ([a.id, d.id], [d.id, a.id])
    assert [j.id for j in _drain(queues["bulk"])] == [b.id]
    assert sorted(j.id for j in _drain(queues["default"])) == sorted([c.id, e.id])


def test_apply_async_routes_through_the_dispatch_producer(client, queues):
    from kindling.producer import dispatch

    reg = Registry()
    report = reg.task(name="report", queue="reports")(lambda n: n)
    dispatch.set_producer(client)
    try:
        first = report.delay(1)
        second = report.apply_async([2], queue="bulk")
    finally:
        dispatch.set_producer(None)
    assert [j.id for j in _drain(queues["reports"])] == [first.id]
    assert [j.id for j in _drain(queues["bulk"])] == [second.id]


def test_enqueue_many_splits_batches_by_queue_and_keeps_the_callers_order(client, queues):
    calls = [Call("echo", [i], queue=("reports", "bulk", None)[i % 3]) for i in range(25)]
    handles = client.enqueue_many(calls, concurrency=4)
    assert len(handles) == 25
    sent = {j.id: j.args[0] for url in queues.values() for j in _drain(url)}
    assert [sent[h.id] for h in handles] == list(range(25))


def test_an_unknown_queue_name_is_refused_before_anything_is_sent(client, queues):
    with pytest.raises(UnknownQueue, match="unknown queue 'reprots'"):
        client.enqueue_many([Call("echo", [1], queue="reports"), Call("echo", [2], queue="reprots")])
    reg = Registry()
    orphan = reg.task(name="orphan", queue="nowhere")(lambda: None)
    with pytest.raises(UnknownQueue, match="unknown queue 'nowhere'"):
        client.enqueue(orphan)
    assert all(_drain(url) == [] for url in queues.values())


def test_kindling_enqueue_sends_to_a_named_queue(client, queues, capsys):
    from kindling.tools.cli import main

    assert main(["enqueue", "echo", "1", "--queue", "bulk", "--queue-url", queues["default"], "--table", "t"]) == 0
    assert [j.id for j in _drain(queues["bulk"])] == [capsys.readouterr().out.strip()]
    assert main(["enqueue", "echo", "--queue", "nope", "--queue-url", queues["default"], "--table", "t"]) == 1
    assert capsys.readouterr().err.startswith("kindling: unknown queue 'nope'")
    with pytest.raises(UnknownQueue, match="unknown queue 'nope'"):  # --debug: the exception, its traceback
        main(["--debug", "enqueue", "echo", "--queue", "nope", "--queue-url", queues["default"], "--table", "t"])


def test_a_malformed_kindling_queues_fails_when_the_client_is_made(monkeypatch):
    monkeypatch.setenv("KINDLING_QUEUES", "reports https://q/reports")
    with pytest.raises(KindlingError, match="KINDLING_QUEUES: 'reports' is not key=value"):
        Client(queue_url="https://q/jobs", table="unused")


def test_a_client_with_named_queues_only_still_sends_to_them(queues):
    client = Client(queue_url="", table="unused", queues={"reports": queues["reports"]})
    handle = client.send(Call("echo", [1], queue="reports"))
    assert [j.id for j in _drain(queues["reports"])] == [handle.id]
    with pytest.raises(UnknownQueue, match="no default queue"):
        client.enqueue("echo", 2)


def test_fifo_rules_follow_the_queue_a_job_is_routed_to(moto_endpoint):
    ordered, plain = _queue("ordered", fifo=True), _queue("plain")
    client = Client(queue_url=plain, table="unused", queues={"ordered": ordered})
    with pytest.raises(ValueError, match="a FIFO queue needs group="):
        client.send(Call("echo", [1], queue="ordered"))
    with pytest.raises(ValueError, match="a FIFO queue takes no per-message delay"):
        client.send(Call("echo", [1], queue="ordered", group="g", delay=5))
    with pytest.raises(ValueError, match="group= needs a FIFO queue"):
        client.send(Call("echo", [1], group="g"))  # the default queue here is a standard one
    handle = client.send(Call("echo", [1], queue="ordered", group="g"))
    client.send(Call("echo", [2], delay=5))  # a delay is fine on the standard default
    assert [j.id for j in _drain(ordered)] == [handle.id]


def test_a_stream_producer_refuses_a_routed_job_instead_of_running_it_unrouted():
    from kindling.valkey import StreamProducer

    producer = StreamProducer.__new__(StreamProducer)  # no connection: the check comes first
    reg = Registry()
    report = reg.task(name="report", queue="reports")(lambda: None)
    with pytest.raises(UnknownQueue, match="named queues are SQS queues"):
        producer.enqueue_many([Call(report)])
    with pytest.raises(UnknownQueue, match="named queues are SQS queues"):
        producer.enqueue_many([Call("echo", queue="bulk")])


# -- the worker (moto) ---------------------------------------------------------------


class _Context:
    aws_request_id = "req-1"

    def get_remaining_time_in_millis(self):
        return 30_000


def _record(body: str, message_id: str, arn: str, receives: int) -> dict:
    return {"messageId": message_id, "receiptHandle": "rh", "body": body, "eventSource": "aws:sqs",
            "attributes": {"ApproximateReceiveCount": str(receives)}, "messageAttributes": {},
            "eventSourceARN": arn, "awsRegion": "us-east-1"}


def _arn(url: str) -> str:
    return boto3.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]


def test_the_worker_moves_each_dead_job_to_its_own_queues_dlq(table, monkeypatch, moto_endpoint):
    import tasks  # noqa: F401  the example tasks in functions/worker
    from kindling.triggers.sqs.handler import LambdaWorker

    jobs, reports, stray = _queue("jobs"), _queue("reports"), _queue("stray")
    jobs_dlq, reports_dlq = _queue("jobs-dead"), _queue("reports-dead")
    monkeypatch.setenv("KINDLING_TABLE", table)
    monkeypatch.setenv("KINDLING_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("KINDLING_DLQ_URL", jobs_dlq)
    monkeypatch.setenv("KINDLING_DLQ_URLS", f"{_arn(jobs)}={jobs_dlq},{_arn(reports)}={reports_dlq}")
    worker = LambdaWorker(log=None)
    bodies = {}
    for name in ("from-jobs", "from-reports", "from-stray"):
        job = new_job("always_fails", [name])
        bodies[name] = (job.id, encode_job(job).decode())
    event = {"Records": [_record(bodies["from-jobs"][1], "m1", _arn(jobs), 1),
                         _record(bodies["from-reports"][1], "m2", _arn(reports), 1),
                         _record(bodies["from-stray"][1], "m3", _arn(stray), 1)]}
    response = worker(event, _Context())
    # The stray queue has no DLQ in the map: reported, so its own redrive policy moves it.
    assert response["batchItemFailures"] == [{"itemIdentifier": "m3"}]
    assert [j.id for j in _drain(jobs_dlq)] == [bodies["from-jobs"][0]]
    assert [j.id for j in _drain(reports_dlq)] == [bodies["from-reports"][0]]
    client = Client(queue_url="unused", table=table, queues={})
    assert {client.status(bodies[n][0]) for n in bodies} == {"dead"}


def test_a_malformed_dlq_map_moves_nothing_and_loses_nothing(table, monkeypatch, moto_endpoint):
    import tasks  # noqa: F401
    from kindling.triggers.sqs.handler import LambdaWorker

    monkeypatch.setenv("KINDLING_TABLE", table)
    monkeypatch.setenv("KINDLING_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("KINDLING_DLQ_URLS", "not-a-pair")
    lines = []
    worker = LambdaWorker(log=lines.append)
    job = new_job("always_fails", ["x"])
    response = worker({"Records": [_record(encode_job(job).decode(), "m1", "arn:aws:sqs:us-east-1:0:q", 1)]},
                      _Context())
    assert response["batchItemFailures"] == [{"itemIdentifier": "m1"}]
    assert any(line.get("kindling") == "dlq_config_invalid" for line in lines)


def test_a_scheduled_task_is_enqueued_on_its_own_queue_and_an_unknown_one_is_reported(table, monkeypatch,
                                                                                       moto_endpoint):
    from kindling.triggers.sqs.handler import LambdaWorker

    jobs, reports = _queue("jobs"), _queue("reports")
    reg = Registry()
    reg.task(name="routed", schedule="rate(1 minute)", queue="reports")(lambda: None)
    reg.task(name="plain", schedule="rate(1 minute)")(lambda: None)
    reg.task(name="lost", schedule="rate(1 minute)", queue="nowhere")(lambda: None)
    monkeypatch.setenv("KINDLING_TABLE", table)
    monkeypatch.setenv("KINDLING_QUEUE_URL", jobs)
    monkeypatch.setenv("KINDLING_QUEUES", f"reports={reports}")
    lines = []
    response = LambdaWorker(reg, log=lines.append, metrics=False)({"kindling": "tick"}, None)
    assert {j.task for j in _drain(reports)} == {"routed"}
    assert {j.task for j in _drain(jobs)} == {"plain"}
    assert len(response["failed"]) == 2 and all(i.startswith("sched.lost.") for i in response["failed"])
    assert any("unknown queue 'nowhere'" in line.get("error", "") for line in lines)


def test_eager_mode_runs_a_routed_job_inline_whatever_its_queue(monkeypatch):
    from kindling.tools.testing import eager

    monkeypatch.delenv("KINDLING_QUEUES", raising=False)
    reg = Registry()
    report = reg.task(name="report", queue="reports")(lambda n: n * 2)
    with eager():
        assert report.delay(2).result() == 4
        assert report.apply_async([3], queue="bulk").result() == 6
