# test_fixtures.py: one app's tasks under kindling's three pytest fixtures
import pytest

from kindling import task
from kindling.errors import JobFailed


@task(name="fixtures.add")
def add(x: int, y: int) -> int:
    return x + y


@task(name="fixtures.divide", max_attempts=2)
def divide(x: float, y: float) -> float:
    return x / y


def test_eagerly(kindling_eager):                   # inline: no queue, no table, no socket
    handle = add.delay(2, 3)
    assert handle.result() == 5
    assert kindling_eager.records[handle.id]["attempts"] == 1


def test_through_a_queue_on_moto(kindling_moto_worker):    # SQS and DynamoDB on moto
    ok, broken = add.delay(2, 3), divide.delay(1, 0)
    counts = kindling_moto_worker.drain()           # the worker, until the queue is empty
    assert counts["succeeded"] == 1 and counts["dead"] == 1
    assert ok.result(timeout=5) == 5
    with pytest.raises(JobFailed, match="ZeroDivisionError"):
        broken.result(timeout=5)
    assert broken.status() == "dead"


def test_through_a_valkey_stream(kindling_valkey_worker):  # skipped without a server URL
    handle = add.delay(2, 3)
    assert kindling_valkey_worker.drain()["succeeded"] == 1
    assert handle.result(timeout=5) == 5
