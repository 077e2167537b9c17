"""A job received before its ``not_before`` is recorded ``scheduled`` with its due time, by
the runner's admission (so every trigger records it alike): handed back until due, no
attempt used; ``kindling jobs show`` and the dashboard say when it is due. Only under the
results policy "all": a task that keeps no success record is never left ``scheduled``."""

from __future__ import annotations

import pytest
from kindling.core.batch import Delivery
from kindling.core.envelope import encode_job, new_job, now_ms
from kindling.core.records import build_record
from kindling.core.registry import Registry
from kindling.core.status import BY_STATUS, FINAL, RECORDED, REPLACES, may_replace
from kindling.engine.runner import Runner
from kindling.stores.memory import MemoryResultStore
from kindling.tools.ops.fmt import job_detail

HOUR_MS = 3_600_000


def registry_tasks(r: Registry) -> None:
    """This module's tasks, on the fresh registry the shared ``reg`` fixture gives each test."""
    r.task(name="add")(lambda a, b: a + b)
    r.task(name="quiet_add", results="failures")(lambda a, b: a + b)
    r.task(name="silent_add", results="none")(lambda a, b: a + b)


def early(task="add", due_in_ms=2 * HOUR_MS, job_id=None):
    job = new_job(task, [1, 2], job_id=job_id, not_before=now_ms() + due_in_ms)
    return job, Delivery(job.id, encode_job(job).decode(), 1)


def runner(reg, store):
    return Runner(reg, store, log=None, metrics=False, max_deliveries=100)


# -- the vocabulary --------------------------------------------------------------------------


def test_scheduled_is_recorded_listed_by_status_and_not_final():
    assert "scheduled" in RECORDED and "scheduled" in BY_STATUS and "scheduled" not in FINAL


def test_scheduled_replaces_only_no_record_or_a_scheduled_one():
    assert REPLACES["scheduled"] == frozenset({None, "scheduled"})
    for old in ("succeeded", "failed", "dead", "rejected", "queued", "revoked"):
        assert not may_replace("scheduled", 0, old), old


def test_every_status_that_replaces_queued_replaces_scheduled_too():
    for new in ("succeeded", "failed", "dead", "rejected", "revoked"):
        assert may_replace(new, 1, "queued") and may_replace(new, 1, "scheduled"), new
    assert not may_replace("queued", 0, "scheduled")  # a revive moves a dead record only


# -- the runner's admission -------------------------------------------------------------------


def test_an_early_job_is_recorded_scheduled_with_its_due_time_and_no_attempt(reg):
    store = MemoryResultStore()
    job, d = early()
    [o] = runner(reg, store).run([d])
    assert o.status == "deferred" and 7190 <= o.retry_in <= 7200
    record = store.records[job.id]
    assert (record["status"], record["attempts"], record["due_at"]) == ("scheduled", 0, job.not_before)
    assert (record["task"], record["enqueued_at"]) == ("add", job.enqueued_at)
    assert record["status_shard"].startswith("scheduled#")  # the dashboard's status search finds it


def test_when_due_the_job_runs_as_attempt_one_over_its_scheduled_record(reg):
    store = MemoryResultStore()
    job, d = early()
    r = runner(reg, store)
    r.run([d])
    due = new_job("add", [1, 2], job_id=job.id, not_before=now_ms() - 1)
    [o] = r.run([Delivery(job.id, encode_job(due).decode(), 2)])
    assert (o.status, o.attempts) == ("succeeded", 1)
    assert store.records[job.id]["status"] == "succeeded" and "due_at" not in store.records[job.id]


def test_a_scheduled_job_revoked_before_it_is_due_is_skipped_when_due(reg):
    store = MemoryResultStore()
    job, d = early()
    r = runner(reg, store)
    r.run([d])
    store.revoke(job.id, task="add")
    due = new_job("add", [1, 2], job_id=job.id, not_before=now_ms() - 1)
    [o] = r.run([Delivery(job.id, encode_job(due).decode(), 2)])
    assert (o.status, store.records[job.id]["status"]) == ("skipped", "revoked")


@pytest.mark.parametrize("task", ["quiet_add", "silent_add"])
def test_a_task_that_keeps_no_success_record_is_never_left_scheduled(reg, task):
    store = MemoryResultStore()
    _, d = early(task)
    [o] = runner(reg, store).run([d])
    assert o.status == "deferred" and store.records == {}


@pytest.mark.parametrize("stored", ["failed", "revoked", "succeeded"])
def test_a_scheduled_record_refused_by_a_later_one_leaves_the_job_deferred(reg, stored):
    """A retry or a redelivery that arrives early must not lose its stored outcome, nor be
    skipped for it: it is handed back until due, as before."""
    store = MemoryResultStore()
    job, d = early(job_id="j-1")
    store.write([build_record(key="j-1", task="add", status=stored, attempts=1, started_at=1, finished_at=2)])
    [o] = runner(reg, store).run([d])
    assert o.status == "deferred" and 7190 <= o.retry_in <= 7200
    assert store.records["j-1"]["status"] == stored


# -- what jobs show prints --------------------------------------------------------------------


def test_jobs_show_says_when_a_scheduled_job_is_due():
    now = 1_800_000_000_000
    record = build_record(key="j-1", task="add", status="scheduled", attempts=0, started_at=now, finished_at=now)
    record["due_at"] = now + HOUR_MS + 59 * 60_000 + 30_000
    out = job_detail(record, now=now)
    lines = dict(line.split(None, 1) for line in out.splitlines() if line.strip())
    assert lines["status"] == "scheduled"
    assert lines["due"] == "2027-01-15 09:59:30 (in 1h 59m)"
    assert "started" not in lines and "duration" not in lines  # it has not run


def test_jobs_show_says_a_scheduled_job_past_its_due_time_is_due_now():
    now = 1_800_000_000_000
    record = build_record(key="j-1", task="add", status="scheduled", attempts=0, started_at=now, finished_at=now)
    record["due_at"] = now - 5_000
    lines = dict(line.split(None, 1) for line in job_detail(record, now=now).splitlines() if line.strip())
    assert lines["due"] == "2027-01-15 07:59:55 (due now)"


def test_jobs_retry_of_a_scheduled_job_is_refused_saying_when_it_runs():
    """Its message is on the queue (hidden until due), not in the DLQ: a retry has nothing
    to send, and the job runs by itself."""
    from kindling.tools.ops.revive import RetryRefused, refuse_settled

    record = build_record(key="j-1", task="add", status="scheduled", attempts=0, started_at=1, finished_at=1)
    record["due_at"] = 1_800_000_000_000
    with pytest.raises(RetryRefused, match=r"j-1 is scheduled: due 2027-01-15 08:00:00 \(UTC\); it runs by itself"):
        refuse_settled("j-1", record)
