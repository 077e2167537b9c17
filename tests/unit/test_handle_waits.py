"""Every handle waits the same way (kindling.producer.handles.wait): 20 ms, doubling to 1 s, then the
state at the deadline decides; a reader that is ``settled`` (eager mode) is never waited on."""

from __future__ import annotations

import pytest
from kindling.core.errors import JobFailed
from kindling.producer import handles

BACKOFF = [0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0, 1.0]


class Clock:
    """time.monotonic and time.sleep for the handles module: sleeping moves the clock."""

    def __init__(self):
        self.now, self.slept = 1000.0, []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 3))
        self.now += seconds


class Pending:
    """A reader with no outcome for ``pending`` reads, then ``record``."""

    def __init__(self, pending: int, record: dict | None):
        self.pending, self.final, self.reads = pending, record, 0

    def record(self, job_id: str) -> dict | None:
        self.reads += 1
        if job_id.startswith("chord#"):
            return {"status": "completed"} if self.reads > self.pending else {"status": "waiting"}
        return self.final if self.reads > self.pending else None


@pytest.fixture
def clock(monkeypatch) -> Clock:
    c = Clock()
    # The handles module's own name for the clock: patching the time module itself would hand
    # the fake to any module that does `from time import monotonic` while it is in place.
    monkeypatch.setattr(handles, "time", c)
    return c


def every_handle(reader):
    from kindling.producer.valkey import Sent
    from kindling.tools.testing import EagerHandle

    return {
        "job": handles.JobHandle("j", "t", reader),
        "sent": Sent("j", "t", "1-0", reader),
        "eager": EagerHandle("j", "t", reader),
        "chain": handles.ChainHandle(["j"], reader),
        "chord": handles.GroupHandle("c", 1, False, reader),
    }


@pytest.mark.parametrize("kind", ["job", "sent", "eager", "chain", "chord"])
def test_every_handle_polls_with_one_backoff_until_the_outcome(clock, kind):
    reader = Pending(8, {"status": "succeeded", "result": "7"})
    assert every_handle(reader)[kind].result(timeout=30) in (7, [7])
    assert clock.slept == BACKOFF


@pytest.mark.parametrize("kind", ["job", "sent", "eager", "chain"])
def test_a_job_still_failed_at_the_deadline_raises_job_failed_with_its_error(clock, kind):
    reader = Pending(0, {"status": "failed", "error": {"type": "E", "message": "attempt 1"}})
    with pytest.raises(JobFailed, match="failed: E: attempt 1"):
        every_handle(reader)[kind].result(timeout=2)
    assert sum(clock.slept) == pytest.approx(2)


def test_a_settled_reader_is_read_once_and_never_waited_on(clock):
    reader = Pending(1000, None)
    reader.settled = True
    with pytest.raises(TimeoutError, match="nothing is left to run"):
        handles.JobHandle("j", "t", reader).result(timeout=30)
    assert clock.slept == [] and reader.reads == 1


def test_the_sqs_client_waits_through_the_same_helper(clock, monkeypatch):
    from kindling.producer.client import Client

    client = Client(queue_url="https://sqs.invalid/q", table="t")
    reader = Pending(3, {"status": "succeeded", "result": '"ok"'})
    monkeypatch.setattr(client, "record", reader.record)
    assert client.result("j", timeout=30) == "ok"
    assert clock.slept == BACKOFF[:3]
