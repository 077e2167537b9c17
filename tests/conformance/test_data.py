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
from conformance import scenario_tasks as tasks
from conformance.grid import cells
from conformance.scenario import Scenario, only, table, verify
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


def result_digest(path, job: str) -> dict:
    """A large result compared by the start of its SHA-256."""
    seen = path.observe(job)
    result = seen["result"]
    digest = hashlib.sha256(result.encode()).hexdigest()[:12] if isinstance(result, str) else result
    return {"status": seen["status"], "result": digest, "error": seen["error"]}


def argument(kind):
    """A job sent with tasks.EDGE_VALUES[kind] as its argument: refused by the producer, at the
    call, or run and echoed back."""

    def steps(path):
        try:
            job = path.enqueue(tasks.echo, tasks.EDGE_VALUES[kind]())
        except (TypeError, ValueError, OverflowError) as exc:  # refused by the producer, at the call
            return {"refused": type(exc).__name__, "rounds": path.run_until_settled()}
        path.run_until_settled()
        seen = path.observe(job)
        return {"refused": None, "status": seen["status"], "result": _plain(seen["result"])}

    return steps


def plain_result(path, job: str) -> dict:
    """What a job's result came back as (max_attempts 3: a refused result is dead at once)."""
    seen = path.observe(job)
    return {k: seen[k] for k in ("status", "attempts", "error")} | {"result": _plain(seen["result"])}


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


SCENARIOS = table(
    Scenario("chain_with_immutable_step", steps=chain_with_immutable_step,
             expect={"statuses": ["succeeded"] * 3, "result": 110}),
    Scenario("empty_chord", steps=empty_chord, expect={"callback": 0, "records": 1}),
    Scenario("model_argument", steps=model_argument, expect={
        "status": "succeeded", "result": {"order_id": 2, "total": 15, "received": "Order"}}),
    Scenario("model_argument_invalid", steps=model_argument_invalid,
             expect={"records": [("rejected", "InvalidJob", 1)]}),
    Scenario("chain_succeeds", steps=chain_succeeds, expect={"statuses": ["succeeded", "succeeded"], "result": 13}),
    Scenario("chain_with_failing_step", steps=chain_with_failing_step, expect={
        "statuses": ["succeeded", "dead", None], "handle": "JobFailed"}),
    Scenario("chord_succeeds", steps=chord_succeeds, expect={"chord": "completed", "callback": 6}),
    Scenario("chord_with_failing_member", steps=chord_with_failing_member, expect={
        "chord": "dead", "callback": None, "handle": "JobFailed"}),
    # Past SQS's 1 MiB (and moto's 256 KiB): its arguments go through S3.
    Scenario("large_argument", tasks.size, ("y" * 1_100_000,), observe=only("status", "result", "error"),
             expect={"status": "succeeded", "result": 1_100_000, "error": None}),
    # Past a record's 350,000 bytes: kept in S3.
    Scenario("large_result", tasks.big, (400_000,), observe=result_digest, expect={
        "status": "succeeded", "error": None, "result": hashlib.sha256(b"x" * 400_000).hexdigest()[:12]}),
    Scenario("argument_nan", steps=argument("nan"), expect=REFUSED),
    Scenario("argument_inf", steps=argument("inf"), expect=REFUSED),
    Scenario("argument_int_2_64", steps=argument("int_2_64"), expect=_round_trip(2**64)),
    Scenario("argument_int_2_70", steps=argument("int_2_70"), expect=_round_trip(2**70)),
    Scenario("argument_int_minus_2_70", steps=argument("int_minus_2_70"), expect=_round_trip(-(2**70))),
    Scenario("argument_int_keys", steps=argument("int_keys"), expect=REFUSED),
    Scenario("argument_datetime", steps=argument("datetime"),
             expect=_round_trip(tasks.EDGE_VALUES["datetime"]().isoformat())),
    Scenario("argument_nested_200", steps=argument("nested_200"),
             expect=_round_trip(tasks.EDGE_VALUES["nested_200"]())),
    Scenario("argument_nested_2000", steps=argument("nested_2000"), expect=REFUSED),
    Scenario("result_nan", tasks.make, ("nan",), observe=plain_result, expect=DEAD),
    Scenario("result_inf", tasks.make, ("inf",), observe=plain_result, expect=DEAD),
    Scenario("result_int_2_64", tasks.make, ("int_2_64",), observe=plain_result, expect=_returned(2**64)),
    Scenario("result_int_2_70", tasks.make, ("int_2_70",), observe=plain_result, expect=_returned(2**70)),
    Scenario("result_int_minus_2_70", tasks.make, ("int_minus_2_70",), observe=plain_result,
             expect=_returned(-(2**70))),
    Scenario("result_int_keys", tasks.make, ("int_keys",), observe=plain_result, expect=DEAD),
    Scenario("result_datetime", tasks.make, ("datetime",), observe=plain_result,
             expect=_returned(tasks.EDGE_VALUES["datetime"]())),
    Scenario("result_nested_200", tasks.make, ("nested_200",), observe=plain_result,
             expect=_returned(tasks.EDGE_VALUES["nested_200"]())),
    Scenario("result_nested_254", tasks.make, ("nested_254",), observe=plain_result,
             expect=_returned(tasks.EDGE_VALUES["nested_254"]())),
    Scenario("result_nested_255", tasks.make, ("nested_255",), observe=plain_result, expect=DEAD),
    Scenario("result_nested_2000", tasks.make, ("nested_2000",), observe=plain_result, expect=DEAD),
)


@pytest.mark.parametrize(("path_name", "scenario"), cells(SCENARIOS))
def test_every_path_carries_data_alike(path, path_name, scenario):
    verify(SCENARIOS, path, path_name, scenario)
