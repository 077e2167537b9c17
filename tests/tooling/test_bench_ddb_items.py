"""The DynamoDB scenario's baselines write the very items the StreamWorker writes
(infra/bench/systems/ddb_child.py), so the ratio measures kindling's work, not item size."""

import importlib.util
from pathlib import Path

from kindling.core.envelope import encode_job, new_job
from kindling.core.registry import Registry
from kindling.engine.runner import Delivery
from kindling.shared.valkey.connection import default_consumer
from kindling.stores.results import MemoryResultStore, to_item
from kindling.triggers.valkey.worker import _build_runner

_PATH = Path(__file__).resolve().parents[2] / "infra" / "bench" / "systems" / "ddb_child.py"
_spec = importlib.util.spec_from_file_location("bench_ddb_child", _PATH)
ddb_child = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ddb_child)


def _shape(item: dict) -> dict:
    """Attribute names and DynamoDB types, nested maps included: what the table parses."""
    return {k: (next(iter(v)), _shape(v["M"]) if "M" in v else None) for k, v in item.items()}


def test_the_baselines_record_has_the_stream_workers_attributes_and_types():
    registry = Registry()
    registry.task(name="noop")(lambda: None)
    store = MemoryResultStore()
    runner = _build_runner(None, registry, store, 3, default_consumer(), False, {})
    job = new_job("noop")
    (outcome,) = runner.run([Delivery("1-0", encode_job(job))])
    written = store.records[job.id]
    baseline = ddb_child.stream_worker_record("bw-00000001")
    assert _shape(to_item(baseline)) == _shape(to_item(written))
    assert baseline["worker"] == written["worker"]
    assert len(to_item(baseline)["expires_at"]["N"]) == len(to_item(written)["expires_at"]["N"])
