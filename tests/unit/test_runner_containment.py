"""A batch that breaks the runner itself (a bug in kindling, not a job's failure) is run again
one delivery at a time by the runner, whatever trigger fed it: the delivery that still breaks
it is recorded ``rejected`` (by the one rule for rejections, kindling.core.refusals) and
settled, its batch-mates run as usual. And the two trigger ports keep one contract."""

from __future__ import annotations

import inspect

import pytest
from kindling.core.batch import STORE_OUTAGE
from kindling.core.envelope import encode_job, new_job
from kindling.core.errors import StoreUnavailable
from kindling.core.registry import Registry
from kindling.engine.runner import Delivery, Runner
from kindling.stores.memory import MemoryResultStore

BREAKS = "breaks-the-runner"


@pytest.fixture
def tasks():
    r = Registry()
    r.task(name="echo")(lambda value: value)
    return r


@pytest.fixture
def broken_on_marker(monkeypatch):
    """The runner raises (as a bug in it would) for any batch holding a body with the marker."""
    begin = Runner.begin

    def begin_breaking(self, deliveries, *args, **kwargs):
        if any(BREAKS in (d.body.decode() if isinstance(d.body, bytes) else d.body) for d in deliveries):
            raise RecursionError("maximum recursion depth exceeded (a runner bug)")
        return begin(self, deliveries, *args, **kwargs)

    monkeypatch.setattr(Runner, "begin", begin_breaking)


def _sqs_event(bodies: list[str]) -> dict:
    return {"Records": [{"messageId": f"m{i}", "receiptHandle": f"rh{i}", "body": body,
                         "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
                         "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:jobs"}
                        for i, body in enumerate(bodies)]}


class Context:
    aws_request_id = "req-1"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def test_the_lambda_handler_settles_a_delivery_that_breaks_the_runner_alone(tasks, broken_on_marker):
    from kindling.triggers.sqs.handler import LambdaWorker

    store = MemoryResultStore()
    jobs = [new_job("echo", [1]), new_job("echo", [BREAKS]), new_job("echo", [3])]
    bodies = [encode_job(j).decode() for j in jobs]
    response = LambdaWorker(tasks, store=store, log=None, metrics=False)(_sqs_event(bodies), Context())

    assert response == {"batchItemFailures": []}  # all settled: Lambda deletes the three
    assert [store.records[j.id]["status"] for j in (jobs[0], jobs[2])] == ["succeeded", "succeeded"]
    assert jobs[1].id not in store.records  # its body is not trusted to name its job
    poison = store.records["rejected#m1"]
    assert poison["status"] == "rejected" and poison["error"]["type"] == "RecursionError"
    assert "broke the worker" in poison["error"]["message"] and poison["raw"] == bodies[1]
    assert poison["worker"]["request_id"] == "req-1"


def test_runner_run_contains_for_any_trigger(tasks, broken_on_marker):
    store = MemoryResultStore()
    good, bad = new_job("echo", [1]), new_job("echo", [BREAKS])
    outcomes = Runner(tasks, store, log=None).run([Delivery("a", encode_job(good), 1),
                                                   Delivery("b", encode_job(bad), 2)])
    assert [(o.ref, o.status) for o in outcomes] == [("a", "succeeded"), ("b", "rejected")]
    assert outcomes[1].job_id == "rejected#b" and store.records["rejected#b"]["attempts"] == 2


def test_a_delivery_that_breaks_the_runner_while_the_store_is_down_is_handed_back(tasks, broken_on_marker):
    class Down(MemoryResultStore):
        def write(self, records, *, deadline=None):
            raise StoreUnavailable("connection refused")

    outcomes = Runner(tasks, Down(), log=None).run([Delivery("b", encode_job(new_job("echo", [BREAKS])), 1)])
    assert [o.status for o in outcomes] == ["deferred"]
    assert outcomes[0].handed_back_because == STORE_OUTAGE and outcomes[0].record is None


def test_a_job_that_raises_is_its_own_failure_not_a_broken_batch(tasks):
    runs = []

    def boom(n):
        runs.append(n)
        raise ValueError("a task's own failure")

    tasks.task(name="boom", max_attempts=1)(boom)
    logged = []
    outcomes = Runner(tasks, MemoryResultStore(), log=logged.append).run(
        [Delivery("a", encode_job(new_job("boom", [1])), 1), Delivery("b", encode_job(new_job("echo", [2])), 1)])
    assert [o.status for o in outcomes] == ["dead", "succeeded"] and runs == [1]  # run once, not again alone
    assert not [e for e in logged if e.get("kindling") == "batch_failed"]


# -- one contract for the trigger ports ----------------------------------------------------------------


def _ports():
    from kindling.triggers.sqs.port import SqsPort
    from kindling.triggers.valkey.consumer import StreamConsumer

    return [SqsPort, StreamConsumer]


@pytest.mark.parametrize("port", _ports(), ids=lambda p: p.__name__)
def test_every_trigger_port_keeps_the_contract(port):
    """Each method of the contract is there, takes the contract's parameters by the same names
    in the same order, and anything more it takes has a default."""
    from kindling.core.port import TriggerPort

    for name in ("fetch", "settle", "send"):
        wanted = list(inspect.signature(getattr(TriggerPort, name)).parameters.values())[1:]
        given = list(inspect.signature(getattr(port, name)).parameters.values())[1:]
        assert [p.name for p in given[: len(wanted)]] == [p.name for p in wanted], (port.__name__, name)
        extra = [p.name for p in given[len(wanted):] if p.default is inspect.Parameter.empty
                 and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        assert not extra, f"{port.__name__}.{name} needs more than the contract gives: {extra}"


def test_the_ports_as_built_are_trigger_ports():
    from kindling.core.port import TriggerPort
    from kindling.triggers.sqs.port import SqsPort
    from kindling.triggers.valkey.consumer import StreamConsumer

    class Client:
        def register_script(self, script):
            return script

    runner = Runner(Registry(), MemoryResultStore(), log=None)
    assert isinstance(SqsPort(runner, lambda deadline: None, route=str, queue_url=str), TriggerPort)
    assert isinstance(StreamConsumer(Client(), "s", "g", "c"), TriggerPort)
    assert not isinstance(object(), TriggerPort)
