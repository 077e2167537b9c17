"""What a worker does before running a job: rejected bodies, signatures, duplicates,
revokes, jobs not due yet, deliveries that never finished. One table, every path."""

from __future__ import annotations

import time

import pytest
from conformance import scenario_tasks as tasks
from conformance.grid import cells
from conformance.scenario import Scenario, records, table, verify, written
from kindling.core.envelope import encode_job, new_job


def _raw(path, body: bytes, signature="sign") -> dict:
    path.enqueue_raw(body, signature)
    path.run_until_settled()
    return records(path)


def not_json(path):
    return _raw(path, b"{not json")


def wrong_arguments_at_the_call(path):
    """A Task's arguments are checked where it is sent (.delay(), .apply_async(), .s()):
    TypeError at the call, nothing sent."""
    refused = []
    for send in (lambda: tasks.add.delay(1, c=2), lambda: tasks.add.apply_async((1,), {"c": 2}),
                 lambda: tasks.add.s(1, c=2)):
        try:
            send()
        except TypeError:
            refused.append("TypeError")
        else:
            refused.append(None)
    return {"refused": refused, "rounds": path.run_until_settled(), "records": written(path)}


def bad_signature(path):
    return _raw(path, encode_job(new_job("c.add", [1, 2])), signature="v1:k1:bm90IGEgc2lnbmF0dXJl")


def unsigned(path):
    return _raw(path, encode_job(new_job("c.add", [1, 2])), signature=None)


def unsigned_delivered_too_often(path):
    path.enqueue_raw(encode_job(new_job("c.add", [1, 2])), signature=None)
    path.crash(path.crashes_to_exhaust)
    path.run_until_settled()
    return records(path)


def delivered_too_often(path):
    job = path.enqueue(tasks.add, 1, 2)
    path.crash(path.crashes_to_exhaust)
    path.run_until_settled()
    seen = path.observe(job)
    return {k: seen[k] for k in ("status", "error", "result", "dead_letter")}


def duplicate_skipped(path):
    key = f"dup-{time.monotonic_ns()}"
    ids = [path.enqueue(tasks.count, key, job_id=key) for _ in range(2)]
    path.run_until_settled()
    path.enqueue(tasks.count, key, job_id=key)
    path.run_until_settled()
    seen = path.observe(ids[0])
    return {"runs": tasks.RUNS.get(key, 0), "status": seen["status"], "attempts": seen["attempts"]}


def duplicate_run_again(path):
    key = f"again-{time.monotonic_ns()}"
    path.enqueue(tasks.count_again, key, job_id=key)
    path.run_until_settled()
    path.enqueue(tasks.count_again, key, job_id=key)
    path.run_until_settled()
    return {"runs": tasks.RUNS.get(key, 0), "status": path.observe(key)["status"]}


def dead_id_sent_again(path):
    """A job id is an idempotency key: sent again after its job died, it is not run again (the
    record stays ``dead`` with the first run's error; the copy goes to the dead letters).
    Running it again is a revive (``kindling jobs retry``: a new generation of the record)."""
    key = f"dead-again-{time.monotonic_ns()}"
    path.enqueue(tasks.count_fail, key, job_id=key)
    path.run_until_settled()
    path.enqueue(tasks.count_fail, key, job_id=key)
    path.run_until_settled()
    seen = path.observe(key)
    return {"runs": tasks.RUNS.get(key, 0), "status": seen["status"], "error": seen["error"],
            "message": (path.record(key) or {}).get("error", {}).get("message")}


def celery_message(path):
    """An unchanged Celery producer's message (kombu's SQS transport, protocol 2) runs the
    registered task it names, under the Celery task id (kindling.core.celery_message)."""
    from support.celery_messages import celery_body

    task_id = f"celery-{time.monotonic_ns()}"
    path.enqueue_raw(celery_body("c.add", [2, 3], {}, task_id=task_id))
    path.run_until_settled()
    seen = path.observe(task_id)
    return {k: seen[k] for k in ("status", "result", "attempts")}


def celery_message_with_callback(path):
    """A Celery link callback kindling cannot honour: rejected with the reason, never run."""
    from support.celery_messages import celery_body

    path.enqueue_raw(celery_body("c.add", [2, 3], {}, embed={"callbacks": [{"task": "c.echo"}]}))
    path.run_until_settled()
    return {"records": written(path),
            "reason": [(r.get("error") or {}).get("message", "")[:58] for r in path.records()]}


def over_the_rate_limit(path):
    """A task limited to 1/h: of two jobs, one runs and the other is handed back unrun, its
    attempt unused (kindling.core.ratelimit)."""
    from kindling.producer.client import Call

    key = f"rated-{time.monotonic_ns()}"
    ids = path.send([Call(tasks.rated, [key], {}), Call(tasks.rated, [key], {})])
    path.run_until_settled()
    seen = sorted((path.observe(i)["status"] or "none", path.observe(i)["attempts"]) for i in ids)
    return {"runs": tasks.RUNS.get(key, 0), "outcomes": seen}


def revoked_before_running(path):
    key = f"revoked-{time.monotonic_ns()}"
    path.revoke(key, tasks.count.name)
    path.enqueue(tasks.count, key, job_id=key)
    path.run_until_settled()
    return {"runs": tasks.RUNS.get(key, 0), "status": path.observe(key)["status"]}


def not_before_ahead(path):
    job = new_job("c.add", [1, 2], not_before=int(time.time() * 1000) + 3_600_000)
    path.enqueue_raw(encode_job(job))
    path.run_until_settled()
    seen = path.observe(job.id)
    observed = {k: seen[k] for k in ("status", "attempts", "delays")}
    return {**observed, "due_at_is_not_before": seen["due_at"] == job.not_before}


def delay_past_sqs_maximum(path):
    before = int(time.time() * 1000)
    job = path.enqueue(tasks.add, 1, 2, delay=3600)
    after = int(time.time() * 1000)
    path.run_until_settled()
    seen = path.observe(job)
    due_in_an_hour = seen["due_at"] is not None and before + 3_600_000 <= seen["due_at"] <= after + 3_600_000
    return {**{k: seen[k] for k in ("status", "attempts")}, "due_in_an_hour": due_in_an_hour}


def _refused(path, job_id: str, because: str) -> dict:
    seen = path.observe(job_id)
    message = ((path.record(job_id) or {}).get("error") or {}).get("message") or ""
    return {"status": seen["status"], "error": seen["error"], "dead_letter": seen["dead_letter"],
            "says_why": because in message}


def not_due_on_its_last_delivery(path):
    """Each hop toward a due time is a delivery: on the last one the queue allows, the job gets
    a terminal record (dead, moved by the worker), not a redrive that leaves it scheduled."""
    job = new_job("c.add", [1, 2], not_before=int(time.time() * 1000) + 3_600_000)
    path.enqueue_raw(encode_job(job))
    path.crash(path.crashes_to_exhaust)
    path.run_until_settled()
    seen = path.observe(job.id)
    return {k: seen[k] for k in ("status", "error", "dead_letter")}


def due_past_the_receive_count(path):
    """3 days in 12-hour hops outlasts a maxReceiveCount of 5: refused at once, with why."""
    job = new_job("c.add", [1, 2], not_before=int(time.time() * 1000) + 3 * 86_400_000)
    path.enqueue_raw(encode_job(job))
    path.run_until_settled()
    return _refused(path, job.id, "maxReceiveCount")


def not_before_past_retention(path):
    """Any producer can write a due time: one in the year 9999 is refused, not hopped until the
    queue deletes it."""
    job = new_job("c.add", [1, 2], not_before=253_402_300_799_000)
    path.enqueue_raw(encode_job(job))
    path.run_until_settled()
    return _refused(path, job.id, "retention")


def celery_eta_past_retention(path):
    import datetime as dt

    from support.celery_messages import celery_body

    task_id = f"celery-far-{time.monotonic_ns()}"
    eta = (dt.datetime.now(dt.UTC) + dt.timedelta(days=400)).isoformat()
    path.enqueue_raw(celery_body("c.add", [2, 3], {}, task_id=task_id, eta=eta))
    path.run_until_settled()
    return _refused(path, task_id, "retention")


def none_policy_delayed_job_keeps_its_attempts(path):
    """Under results="none" a job hopped before its due time still gets every attempt it asked
    for: its attempts count the runs of its task, not the hops."""
    key = f"none-delayed-{time.monotonic_ns()}"
    due = int(time.time() * 1000) + 700
    path.enqueue_raw(encode_job(new_job("c.count_none", [key, 99], job_id=key, max_attempts=2, not_before=due)))
    path.run_until_settled()  # hopped: handed back for the 1 s a hop lasts at least
    time.sleep(max(due / 1000 - time.time(), 1.05))
    path.run_until_settled()
    seen = path.observe(key)
    return {"runs": tasks.RUNS.get(key, 0), **{k: seen[k] for k in ("status", "attempts", "error")}}


def delivery_that_breaks_the_runner(path):
    """A batch that makes the runner itself raise (a bug in kindling, not a job's failure) is
    run again one delivery at a time: the one that still breaks it is recorded rejected under
    its message's own key (its body is not trusted to name its job) and settled, with what it
    raised; its batch-mates run as usual. The runner does it, for every trigger."""
    from kindling.engine.runner import Runner
    from kindling.producer.client import Call

    begin, marker = Runner.begin, f"breaks-the-runner-{time.monotonic_ns()}"

    def breaking(self, deliveries, *args, **kwargs):
        if any(marker in (d.body.decode() if isinstance(d.body, bytes) else d.body) for d in deliveries):
            raise RecursionError("maximum recursion depth exceeded (a runner bug)")
        return begin(self, deliveries, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Runner, "begin", breaking)
        ids = path.send([Call(tasks.echo, [1], {}), Call(tasks.echo, [marker], {}), Call(tasks.echo, [3], {})])
        path.run_until_settled()
    return {"records": written(path), "mates": [path.observe(i)["status"] for i in (ids[0], ids[2])],
            "poison_by_its_job_id": path.record(ids[1])}


REJECTED = {"records": [("rejected", "InvalidJob")]}
REFUSED = {"status": "rejected", "error": "InvalidJob", "dead_letter": False, "says_why": True}
SCENARIOS = table(
    Scenario("rejected_not_json", steps=not_json, expect=REJECTED),
    # Sent by the task's name, as a producer without the task's code does: the producer
    # cannot check the arguments, so the worker's admission is what is tested.
    Scenario("rejected_unknown_task", "c.no_such_task", observe=records, expect=REJECTED),
    Scenario("rejected_wrong_arguments", "c.add", (1,), {"kwargs": {"c": 2}}, observe=records, expect=REJECTED),
    Scenario("refused_wrong_arguments_at_the_call", steps=wrong_arguments_at_the_call,
             expect={"refused": ["TypeError"] * 3, "rounds": 0, "records": []}),
    Scenario("rejected_bad_signature", steps=bad_signature, signing=True,
             expect={"records": [("rejected", "InvalidJob")]}),
    Scenario("rejected_unsigned", steps=unsigned, signing=True, expect={"records": [("rejected", "InvalidJob")]}),
    Scenario("rejected_unsigned_delivered_too_often", steps=unsigned_delivered_too_often, signing=True,
             expect={"records": [("rejected", "InvalidJob")]}),
    Scenario("dead_delivered_too_often", steps=delivered_too_often, expect={
        "status": "dead", "error": "TooManyDeliveries", "result": None, "dead_letter": True}),
    Scenario("duplicate_skipped", steps=duplicate_skipped, expect={"runs": 1, "status": "succeeded", "attempts": 1}),
    Scenario("duplicate_run_again_without_skip_succeeded", steps=duplicate_run_again,
             expect={"runs": 2, "status": "succeeded"}),
    Scenario("dead_id_sent_again", steps=dead_id_sent_again, expect={
        "runs": 1, "status": "dead", "error": "RuntimeError", "message": "run 1 fails"}),
    Scenario("celery_message", steps=celery_message, expect={"status": "succeeded", "result": 5, "attempts": 1}),
    Scenario("celery_message_with_callback", steps=celery_message_with_callback, expect={
        "records": [("rejected", "InvalidJob")],
        "reason": ["Celery task message: link callbacks cannot be honoured by "]}),
    Scenario("over_the_rate_limit", steps=over_the_rate_limit,
             expect={"runs": 1, "outcomes": [("none", 0), ("succeeded", 1)]}),
    Scenario("revoked_before_running", steps=revoked_before_running, expect={"runs": 0, "status": "revoked"}),
    Scenario("not_before_ahead", steps=not_before_ahead, expect={
        "status": "scheduled", "attempts": 0, "delays": [3600], "due_at_is_not_before": True}),
    Scenario("delay_past_sqs_maximum", steps=delay_past_sqs_maximum,
             expect={"status": "scheduled", "attempts": 0, "due_in_an_hour": True}),
    Scenario("not_due_on_its_last_delivery", steps=not_due_on_its_last_delivery, expect={
        "status": "dead", "error": "TooManyDeliveries", "dead_letter": True}),
    Scenario("due_past_the_receive_count", steps=due_past_the_receive_count, expect=REFUSED),
    Scenario("not_before_past_retention", steps=not_before_past_retention, expect=REFUSED),
    Scenario("celery_eta_past_retention", steps=celery_eta_past_retention, expect=REFUSED),
    Scenario("rejected_delivery_that_breaks_the_runner", steps=delivery_that_breaks_the_runner, expect={
        "records": [("rejected", "RecursionError"), ("succeeded", None), ("succeeded", None)],
        "mates": ["succeeded", "succeeded"], "poison_by_its_job_id": None}),
    Scenario("results_none_delayed_job_keeps_its_attempts", steps=none_policy_delayed_job_keeps_its_attempts,
             expect={"runs": 2, "status": "dead", "attempts": 2, "error": "RuntimeError"}),
)


@pytest.mark.parametrize(("path_name", "scenario"), cells(SCENARIOS))
def test_every_path_admits_jobs_alike(path, path_name, scenario):
    verify(SCENARIOS, path, path_name, scenario)
