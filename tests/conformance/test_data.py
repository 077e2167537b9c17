"""Chains and chords that fail part-way, large arguments and results, and the edges of what
JSON holds, as arguments and as results. One table, every path.

Expected, from docs/tasks.md and kindling.core.codec (one contract for both engines, every path):
integers of any size round-trip exactly; a value outside the contract (NaN, infinities, a
non-string key, nesting past 254 levels) is refused the same way everywhere: as an argument
by the producer, at the call, sending nothing; as a result by the job, recorded ``dead`` at
once (its first attempt, though it may have more) with ``UnencodableResult``.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from conformance import paths
from conformance import scenario_tasks as tasks
from conformance.grid import cells, check
from kindling import chain, group


def _status(path, job_id):
    record = path.record(job_id)
    return record.get("status") if record else None


def chain_succeeds(path):
    handle = chain(tasks.add.s(1, 2), tasks.add.s(10)).delay()
    path.run_until_settled()
    return {"statuses": [_status(path, i) for i in handle.ids], "result": path.observe(handle.ids[-1])["result"]}


def chain_with_failing_step(path):
    handle = chain(tasks.add.s(1, 2), tasks.fail.s().set(max_attempts=1), tasks.add.s(10)).delay()
    path.run_until_settled()
    return {"statuses": [_status(path, i) for i in handle.ids], "handle": _raised(path, handle)}


def chord_succeeds(path):
    handle = group([tasks.add.s(i, i) for i in range(3)]).then(tasks.total.s()).delay()
    path.run_until_settled()
    chord = path.record(f"chord#{handle.id}") or {}
    return {"chord": chord.get("status"), "callback": path.observe(f"{handle.id}.then")["result"]}


def chord_with_failing_member(path):
    handle = group([tasks.add.s(1, 1), tasks.fail.s().set(max_attempts=1)]).then(tasks.total.s()).delay()
    path.run_until_settled()
    chord = path.record(f"chord#{handle.id}") or {}
    return {"chord": chord.get("status"), "callback": _status(path, f"{handle.id}.then"),
            "handle": _raised(path, handle)}


def _raised(path, handle) -> str | None:
    """What the handle's result() raises once the canvas has failed (JobFailed at once)."""
    try:
        handle.result(timeout=0.5)
    except Exception as exc:  # noqa: BLE001 - the type is the observation
        return type(exc).__name__
    return None


def large_argument(path):
    data = "y" * 1_100_000  # past SQS's 1 MiB (and moto's 256 KiB): its arguments go through S3
    job = path.enqueue(tasks.size, data)
    path.run_until_settled()
    seen = path.observe(job)
    return {k: seen[k] for k in ("status", "result", "error")}


def large_result(path):
    job = path.enqueue(tasks.big, 400_000)  # past a record's 350,000 bytes: kept in S3
    path.run_until_settled()
    seen = path.observe(job)
    result = seen["result"]
    digest = hashlib.sha256(result.encode()).hexdigest()[:12] if isinstance(result, str) else result
    return {"status": seen["status"], "result": digest, "error": seen["error"]}


def _argument(kind):
    def run(path):
        try:
            job = path.enqueue(tasks.echo, tasks.EDGE_VALUES[kind]())
        except (TypeError, ValueError, OverflowError) as exc:  # refused by the producer, at the call
            return {"refused": type(exc).__name__, "rounds": path.run_until_settled()}
        path.run_until_settled()
        seen = path.observe(job)
        return {"refused": None, "status": seen["status"], "result": _plain(seen["result"])}

    return run


def _result(kind):
    def run(path):
        job = path.enqueue(tasks.make, kind)  # max_attempts 3: a refused result is dead at once
        path.run_until_settled()
        seen = path.observe(job)
        return {k: seen[k] for k in ("status", "attempts", "error")} | {"result": _plain(seen["result"])}

    return run


def _plain(value):
    """A value compared as its JSON text (so NaN equals NaN and depth is one string)."""
    text = json.dumps(value, sort_keys=True)
    return text if len(text) < 80 else hashlib.sha256(text.encode()).hexdigest()[:12]


REFUSED = {"refused": "TypeError", "rounds": 0}  # nothing was sent
DEAD = {"status": "dead", "attempts": 1, "error": "UnencodableResult", "result": _plain(None)}


def _round_trip(value):
    return {"refused": None, "status": "succeeded", "result": _plain(json.loads(json.dumps(value, default=str)))}


def _returned(value):
    return {"status": "succeeded", "attempts": 1, "error": None,
            "result": _plain(json.loads(json.dumps(value, default=lambda v: v.isoformat())))}


def chain_with_immutable_step(path):
    """task.si(): a chain step run with its own arguments only, the step after it with its result."""
    handle = chain(tasks.add.s(1, 2), tasks.add.si(5, 5), tasks.add.s(100)).delay()
    path.run_until_settled()
    return {"statuses": [_status(path, i) for i in handle.ids], "result": path.observe(handle.ids[-1])["result"]}


def empty_chord(path):
    """Celery's empty chord: the callback runs once, with []."""
    handle = group([]).then(tasks.total.s()).delay()
    path.run_until_settled()
    return {"callback": path.observe(f"{handle.id}.then")["result"], "records": len(path.records())}


def model_argument(path):
    """A pydantic model sent as its JSON, validated into the model for the task, and the
    model it returns recorded as JSON (kindling.core.models)."""
    job = path.enqueue(tasks.place_order, tasks.Order(id=2, qty=3))
    path.run_until_settled()
    seen = path.observe(job)
    return {"status": seen["status"], "result": seen["result"]}


def model_argument_invalid(path):
    """A body whose model argument does not validate: rejected at admission, never retried."""
    from kindling.producer.client import Call

    path.send([Call(tasks.place_order.name, [{"id": "not a number"}], {})])
    path.run_until_settled()
    return {"records": sorted((r.get("status"), (r.get("error") or {}).get("type"), r.get("attempts"))
                              for r in path.records())}


SCENARIOS = {
    "chain_with_immutable_step": (chain_with_immutable_step, {"statuses": ["succeeded"] * 3, "result": 110}),
    "empty_chord": (empty_chord, {"callback": 0, "records": 1}),
    "model_argument": (model_argument, {"status": "succeeded",
                                        "result": {"order_id": 2, "total": 15, "received": "Order"}}),
    "model_argument_invalid": (model_argument_invalid, {"records": [("rejected", "InvalidJob", 1)]}),
    "chain_succeeds": (chain_succeeds, {"statuses": ["succeeded", "succeeded"], "result": 13}),
    "chain_with_failing_step": (chain_with_failing_step, {"statuses": ["succeeded", "dead", None],
                                                           "handle": "JobFailed"}),
    "chord_succeeds": (chord_succeeds, {"chord": "completed", "callback": 6}),
    "chord_with_failing_member": (chord_with_failing_member, {"chord": "dead", "callback": None,
                                                               "handle": "JobFailed"}),
    "large_argument": (large_argument, {"status": "succeeded", "result": 1_100_000, "error": None}),
    "large_result": (large_result, {"status": "succeeded", "error": None,
                                    "result": hashlib.sha256(b"x" * 400_000).hexdigest()[:12]}),
    "argument_nan": (_argument("nan"), REFUSED),
    "argument_inf": (_argument("inf"), REFUSED),
    "argument_int_2_64": (_argument("int_2_64"), _round_trip(2**64)),
    "argument_int_2_70": (_argument("int_2_70"), _round_trip(2**70)),
    "argument_int_minus_2_70": (_argument("int_minus_2_70"), _round_trip(-(2**70))),
    "argument_int_keys": (_argument("int_keys"), REFUSED),
    "argument_datetime": (_argument("datetime"), _round_trip(tasks.EDGE_VALUES["datetime"]().isoformat())),
    "argument_nested_200": (_argument("nested_200"), _round_trip(tasks.EDGE_VALUES["nested_200"]())),
    "argument_nested_2000": (_argument("nested_2000"), REFUSED),
    "result_nan": (_result("nan"), DEAD),
    "result_inf": (_result("inf"), DEAD),
    "result_int_2_64": (_result("int_2_64"), _returned(2**64)),
    "result_int_2_70": (_result("int_2_70"), _returned(2**70)),
    "result_int_minus_2_70": (_result("int_minus_2_70"), _returned(-(2**70))),
    "result_int_keys": (_result("int_keys"), DEAD),
    "result_datetime": (_result("datetime"), _returned(tasks.EDGE_VALUES["datetime"]())),
    "result_nested_200": (_result("nested_200"), _returned(tasks.EDGE_VALUES["nested_200"]())),
    "result_nested_254": (_result("nested_254"), _returned(tasks.EDGE_VALUES["nested_254"]())),
    "result_nested_255": (_result("nested_255"), DEAD),
    "result_nested_2000": (_result("nested_2000"), DEAD),
}


@pytest.mark.parametrize(("path_name", "scenario"), cells(SCENARIOS))
def test_every_path_carries_data_alike(path, path_name, scenario):
    run, expected = SCENARIOS[scenario]
    try:
        observed = run(path)
    except paths.NotApplicable as exc:
        pytest.fail(f"not applicable: {exc}")
    check(path_name, scenario, observed, expected)
