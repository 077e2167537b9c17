"""Revoking a job that is running: "a running job runs on". The revoke stops every later
start, its record never claims the job did not run, and the run under way ends by the
forward-only rule (kindling.core.status.REPLACES): its success is recorded over the revoke (it
ran: the truth), its failure is not (the revoke stands and the job is not retried).

In memory and in DynamoDB (moto), with a task that blocks on an Event while it is revoked.
"""

from __future__ import annotations

import threading

import pytest
from kindling.core.envelope import encode_job, new_job
from kindling.core.registry import Registry
from kindling.engine.runner import Delivery, Runner
from kindling.stores.results import MemoryResultStore

# A test that takes ``store`` runs on the in-memory store and on DynamoDB (moto).
pytestmark = pytest.mark.stores("memory", "dynamo")


class Blocking:
    """A task that runs until released, then returns or raises."""

    def __init__(self):
        self.started, self.release = threading.Event(), threading.Event()
        self.runs = 0
        self.reg = Registry()

        @self.reg.task(name="blocks")
        def blocks(fail: bool = False) -> str:
            self.runs += 1
            self.started.set()
            assert self.release.wait(10), "never released"
            if fail:
                raise RuntimeError("the run under way failed")
            return "done"

    def run(self, store, body: str, delivery: int = 1) -> list:
        out: list = []
        runner = Runner(self.reg, store, log=None, metrics=False, payload_bucket="")
        thread = threading.Thread(target=lambda: out.extend(runner.run([Delivery("m", body, delivery)])))
        thread.start()
        return [thread, out]


def revoke_while_running(store, fail: bool):
    from kindling.core.records import revoke

    task = Blocking()
    job = new_job("blocks", [], {"fail": fail})
    body = encode_job(job).decode()
    thread, out = task.run(store, body)
    assert task.started.wait(10)
    revoke(store, job.id, task="blocks")
    during = _record(store, job.id)
    task.release.set()
    thread.join(10)
    return task, job, body, during, out[0]


def _record(store, job_id: str) -> dict:
    return store.records[job_id] if isinstance(store, MemoryResultStore) else store.record(job_id)


def test_a_revoke_while_the_job_runs_never_records_that_it_did_not_run(store):
    _, _, _, during, _ = revoke_while_running(store, fail=False)
    assert during["status"] == "revoked"
    message = during["error"]["message"]
    assert "before it ran" not in message
    assert "a run already under way" in message


def test_a_run_under_way_that_succeeds_is_recorded_over_the_revoke(store):
    _, job, _, _, outcome = revoke_while_running(store, fail=False)
    assert outcome.status == "succeeded"
    record = _record(store, job.id)
    assert record["status"] == "succeeded" and record["result"] == '"done"'


def test_a_run_under_way_that_fails_leaves_the_revoke_standing_and_is_not_retried(store):
    task, job, body, _, outcome = revoke_while_running(store, fail=True)
    assert outcome.status == "skipped" and "revoked" in outcome.reason
    assert _record(store, job.id)["status"] == "revoked"
    thread, out = task.run(store, body, delivery=2)  # the queue's next delivery
    thread.join(10)
    assert out[0].status == "skipped" and task.runs == 1
