"""A job's record keeps a bounded preview of its arguments (the dashboard's job page shows it),
built in records.build_record alone, and never for a task with ``redact=True``."""

from kindling.core import codec
from kindling.core.envelope import encode_job, new_job
from kindling.core.records import MAX_ARGS_PREVIEW_BYTES, build_record
from kindling.core.registry import Registry
from kindling.engine.runner import Delivery, Runner
from kindling.stores.results import MemoryResultStore


def test_every_outcome_of_a_run_records_its_arguments_as_a_preview():
    reg = Registry()
    reg.task(name="add")(lambda a, b=0: a + b)
    reg.task(name="boom")(lambda *a, **k: 1 / 0)
    store = MemoryResultStore()
    jobs = [new_job("add", [1], {"b": 2}), new_job("boom", ["x"], {"why": "test"})]
    Runner(reg, store, metrics=False).run([Delivery(f"m{i}", encode_job(j).decode(), 1) for i, j in enumerate(jobs)])
    assert codec.loads(store.records[jobs[0].id]["args_preview"]) == {"args": [1], "kwargs": {"b": 2}}
    assert store.records[jobs[1].id]["status"] == "failed"
    assert codec.loads(store.records[jobs[1].id]["args_preview"]) == {"args": ["x"], "kwargs": {"why": "test"}}


def test_large_arguments_are_cut_to_the_preview_budget_and_named_truncated():
    job = new_job("big", ["é" * 5000])
    record = build_record(key=job.id, task="big", status="succeeded", attempts=1, started_at=1, finished_at=2, job=job)
    assert len(record["args_preview"].encode("utf-8")) <= MAX_ARGS_PREVIEW_BYTES
    assert record["truncated"]["args_preview"] == len(codec.dumps({"args": job.args, "kwargs": {}}).encode())
    # One write unit: a typical record with a full preview stays under 1 KB.
    assert len(codec.dumps(record).encode()) < 1024


def test_a_redacted_task_keeps_no_preview():
    job = new_job("card", ["4111-1111-1111-1111"])
    record = build_record(key=job.id, task="card", status="succeeded", attempts=1, started_at=1, finished_at=2,
                          job=job, redact=True)
    assert "args_preview" not in record and "4111" not in codec.dumps(record)


def test_a_redacted_task_dead_after_too_many_deliveries_keeps_no_preview():
    reg = Registry()
    reg.task(name="card", redact=True)(lambda number: number)
    store = MemoryResultStore()
    job = new_job("card", ["4111-1111-1111-1111"])
    Runner(reg, store, metrics=False, max_deliveries=5).run([Delivery("m", encode_job(job).decode(), 5)])
    assert store.records[job.id]["status"] == "dead"
    assert "4111" not in codec.dumps(store.records[job.id])
