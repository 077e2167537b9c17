"""Retry policies per task: which failures retry, when, and a task asking for a retry itself."""

import math

import pytest
from kindling.core.envelope import encode_job, new_job
from kindling.core.errors import Retry, TaskDefinitionError
from kindling.core.policy import Backoff
from kindling.core.registry import Registry
from kindling.engine.runner import Delivery, Runner
from kindling.stores.results import MemoryResultStore


def run_once(reg, store, task, *args, ref=None, **runner):
    job = new_job(task, args, job_id=ref)
    return Runner(reg, store, log=None, metrics=False, **runner).run([Delivery(job.id, encode_job(job).decode(), 1)])[0]


def test_no_retry_on_makes_the_first_failure_dead(store):
    reg = Registry()
    reg.task(name="charge", no_retry_on=(ValueError,))(lambda: int("card declined"))
    outcome = run_once(reg, store, "charge")
    assert outcome.status == "dead" and store.records[outcome.job_id]["attempts"] == 1


def test_retry_on_retries_only_what_it_names(store):
    reg = Registry()
    reg.task(name="fetch2", retry_on=ConnectionError)(lambda: (_ for _ in ()).throw(TimeoutError("slow")))
    assert run_once(reg, store, "fetch2").status == "dead"  # TimeoutError is not a ConnectionError
    reg.task(name="fetch3", retry_on=ConnectionError)(lambda: (_ for _ in ()).throw(ConnectionResetError("reset")))
    assert run_once(reg, store, "fetch3").status == "failed"  # a subclass retries


def test_a_tasks_backoff_sets_when_the_retry_comes(store):
    reg = Registry()
    reg.task(name="flaky", backoff=Backoff(base=10, factor=3, max=60, jitter=False))(lambda: 1 / 0)
    delays = []
    for _ in range(4):
        delays.append(run_once(reg, store, "flaky", ref="flaky-1", max_attempts=10).retry_in)
    assert delays == [10, 30, 60, 60]


def test_jittered_backoff_stays_between_half_and_all_of_the_step():
    backoff = Backoff(base=8, factor=2, max=1000)
    assert all(8 <= backoff.delay_s(2) <= 16 for _ in range(200))


def test_a_task_can_ask_for_a_retry_after_a_delay_of_its_choosing(store):
    reg = Registry()

    @reg.task(name="poll", max_attempts=3)
    def poll():
        raise Retry(after=42, reason="not ready yet")

    outcome = run_once(reg, store, "poll", ref="poll-1")
    assert outcome.status == "failed" and outcome.retry_in == 42
    record = store.records["poll-1"]
    assert record["error"]["type"] == "Retry" and record["error"]["message"] == "not ready yet"
    run_once(reg, store, "poll", ref="poll-1")
    assert run_once(reg, store, "poll", ref="poll-1").status == "dead"  # it still counts as an attempt


def test_retry_on_a_task_that_opted_out_of_the_read(store):
    reg = Registry()
    reg.task(name="count", skip_succeeded=False, no_retry_on=(KeyError,))(lambda: {}["missing"])
    outcome = run_once(reg, store, "count")
    assert outcome.status == "dead" and store.records[outcome.job_id]["status_shard"].startswith("dead#")


@pytest.mark.parametrize("options,message", [
    ({"retry_on": "ValueError"}, "retry_on takes exception classes"),
    ({"no_retry_on": (ValueError, 3)}, "no_retry_on takes exception classes"),
    ({"backoff": {"base": 1}}, "backoff must be a kindling.core.policy.Backoff"),
])
def test_bad_retry_options_fail_at_definition(options, message):
    with pytest.raises(TaskDefinitionError, match=message):
        Registry().task(name="t", **options)(lambda: None)


def test_bad_backoffs_and_retries_are_refused():
    with pytest.raises(ValueError, match="factor"):
        Backoff(factor=0.5)
    with pytest.raises(ValueError, match="at most 43200"):
        Backoff(max=10**6)
    with pytest.raises(ValueError, match="seconds >= 0"):
        Retry(after=-1)


def test_the_sqs_handler_turns_retry_in_into_the_messages_visibility():
    from kindling.triggers.sqs import events as sqs

    reg = Registry()
    reg.task(name="poll")(lambda: (_ for _ in ()).throw(Retry(after=90)))
    job = new_job("poll")
    event = {"Records": [{"messageId": "m1", "receiptHandle": "rh", "body": encode_job(job).decode(),
                          "attributes": {"ApproximateReceiveCount": "1"}, "eventSource": "aws:sqs",
                          "eventSourceARN": "arn:aws:sqs:us-east-1:1:jobs"}]}
    batch = sqs.deliveries(event)
    outcomes = Runner(reg, MemoryResultStore(), log=None, metrics=False).run(batch)
    changes = sqs.settlement(batch, outcomes).visibility
    assert changes["arn:aws:sqs:us-east-1:1:jobs"] == [{"Id": "m1", "ReceiptHandle": "rh", "VisibilityTimeout": 90}]


def test_an_sqs_visibility_change_stays_within_the_12_hours_sqs_allows_a_delivery():
    """SQS refuses to hide a delivery past 12 hours from its receive, and a refused change
    leaves the message to the queue's visibility timeout (back in seconds, not hours): a
    delay past what the delivery has left is cut to what it has left, a shorter one kept."""
    from kindling.triggers.sqs import events as sqs

    reg = Registry()
    reg.task(name="later")(lambda after: (_ for _ in ()).throw(Retry(after=after)))
    jobs = [new_job("later", [after]) for after in (43_200, 90)]
    event = {"Records": [{"messageId": f"m{n}", "receiptHandle": f"rh{n}", "body": encode_job(job).decode(),
                          "attributes": {"ApproximateReceiveCount": "1"}, "eventSource": "aws:sqs",
                          "eventSourceARN": "arn:aws:sqs:us-east-1:1:jobs"} for n, job in enumerate(jobs)]}
    batch = sqs.deliveries(event)
    outcomes = Runner(reg, MemoryResultStore(), log=None, metrics=False).run(batch)
    for in_flight in (0.0, 300.4):
        changes = sqs.settlement(batch, outcomes, in_flight_s=in_flight).visibility["arn:aws:sqs:us-east-1:1:jobs"]
        left = 43_200 - math.ceil(in_flight) - 1  # a second for the trip from SQS's clock to ours
        assert [c["VisibilityTimeout"] for c in changes] == [left, 90]


def test_the_crash_loop_rule_counts_runs_only_where_the_trigger_gives_hand_backs_back(store):
    """A stream's count counts runs: past the job's attempts it is dead unrun. An SQS receive
    count also counts hand-backs, so only the queue's own bound (max_deliveries) applies."""
    from kindling.core.policy import out_of_deliveries

    assert not out_of_deliveries(3, 3, None, counts_runs=True)
    assert out_of_deliveries(4, 3, None, counts_runs=True)
    assert not out_of_deliveries(9, 3, None, counts_runs=False)
    assert out_of_deliveries(5, 3, 5, counts_runs=False)
    ran = []
    reg = Registry()
    reg.task(name="t")(lambda: ran.append(1))
    runner = Runner(reg, store, log=None, metrics=False)
    sqs_job, stream_job = new_job("t"), new_job("t")
    outcomes = runner.run([Delivery("m1", encode_job(sqs_job).decode(), 9),
                           Delivery("e1", encode_job(stream_job).decode(), 4, counts_runs=True)])
    assert [(o.job_id, o.status) for o in outcomes] == [(sqs_job.id, "succeeded"), (stream_job.id, "dead")]
    assert ran == [1] and store.records[stream_job.id]["error"]["type"] == "TooManyDeliveries"
