"""A batch handed back because the result store is down says so by a cause, not by its wording.

The stream worker pauses, and the Lambda drain stops, when the store is down
(:func:`kindling.triggers.valkey.worker.store_down`); what they read is the cause the runner (or the
worker, for an entry it records itself) set where it handed the batch back."""

import pytest
from kindling.core.errors import StoreUnavailable
from kindling.core.registry import Registry
from kindling.engine.runner import STORE_OUTAGE, Outcome, Runner
from kindling.stores.results import MemoryResultStore
from support.tasks import delivery


class DownStore(MemoryResultStore):
    """A store that cannot be reached: for its read, its write, or both."""

    def __init__(self, *, read=True, write=True):
        super().__init__()
        self.read_down, self.write_down = read, write

    def read_states(self, job_ids, *, deadline=None):
        if self.read_down:
            raise StoreUnavailable("connection refused")
        return super().read_states(job_ids, deadline=deadline)

    def write(self, records, *, deadline=None):
        if self.write_down:
            raise StoreUnavailable("connection refused")
        return super().write(records, deadline=deadline)


def registry_tasks(r: Registry) -> None:
    """This module's tasks, on the fresh registry the shared ``reg`` fixture gives each test."""

    @r.task(name="add")
    def add(a, b):
        return a + b


@pytest.mark.parametrize("down", ["read", "write"])
def test_the_runner_names_a_store_outage_as_the_cause_of_every_hand_back(reg, down):
    from kindling.triggers.valkey.worker import store_down

    store = DownStore(read=down == "read", write=True)
    outcomes = Runner(reg, store, log=None).run([delivery("add", 1, 2, ref="1-0"), delivery("add", 1, 2, ref="2-0")])
    assert [o.status for o in outcomes] == ["deferred", "deferred"]
    assert [o.handed_back_because for o in outcomes] == [STORE_OUTAGE, STORE_OUTAGE]
    assert store_down(outcomes) == outcomes[0].reason


def test_a_store_outage_is_told_by_its_cause_whatever_the_reason_says():
    from kindling.triggers.valkey.worker import store_down

    reworded = Outcome("1-0", "a", "add", "deferred", 1)
    reworded.reason, reworded.handed_back_because = "the results table did not answer", STORE_OUTAGE
    assert store_down([reworded]) == "the results table did not answer"

    lookalike = Outcome("2-0", "b", "add", "deferred", 1)
    lookalike.reason = "result store unavailable: a task's own words, not an outage"
    assert store_down([lookalike]) is None


def test_a_batch_handed_back_for_want_of_signing_keys_is_not_a_store_outage(reg):
    from kindling.triggers.valkey.worker import store_down

    class NoKeys:
        def prepare(self, read_by=None):
            return "signing keys could not be read"

    outcomes = Runner(reg, MemoryResultStore(), log=None, verifier=NoKeys()).run([delivery("add", 1, 2, ref="1-0")])
    assert [o.status for o in outcomes] == ["deferred"]
    assert outcomes[0].handed_back_because == "signing_keys_unavailable"
    assert store_down(outcomes) is None


def test_an_entry_that_breaks_the_runner_while_the_store_is_down_is_handed_back_as_an_outage(
        reg, valkey_url, monkeypatch):
    from kindling.triggers.valkey.worker import store_down
    from kindling.valkey import StreamProducer, StreamWorker

    stream = "cause:poison"
    StreamProducer(valkey_url, stream=stream).enqueue("add", 1, 2)
    runner = Runner(reg, DownStore(read=False), log=None)
    worker = StreamWorker(valkey_url, runner=runner, stream=stream, block_ms=50, heartbeat=False)

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in kindling")

    monkeypatch.setattr(Runner, "begin", broken)
    outcomes = worker.process(worker.fetch(50))
    assert [o.status for o in outcomes] == ["deferred"]
    assert outcomes[0].handed_back_because == STORE_OUTAGE
    assert store_down(outcomes) == outcomes[0].reason
