"""A revived job's generations: an outcome of an older generation never overwrites a newer one.

The race (kindling.tools.ops.revive): a delivery of generation 1 reads the job's record and runs;
meanwhile another delivery records ``dead`` and an operator revives the job (a ``queued``
record of generation 2, and a new message). The stale delivery's ``dead`` or ``failed``
must then be dropped, not written over the ``queued`` record, or the new message would be
bounced to the DLQ as already dead. Against the in-memory store and DynamoDB (moto).
"""

import boto3
import pytest
from kindling.core import codec
from kindling.core.records import build_record
from kindling.core.registry import Registry
from kindling.core.status import DEAD, FAILED, QUEUED, SKIPPED, SUCCEEDED
from kindling.engine.runner import Delivery, Runner
from kindling.stores.results import DynamoResultStore, MemoryResultStore, from_item, to_item
from kindling.tools.ops import Stack
from kindling.tools.ops.revive import revive

registry = Registry()
STATE = {"fail": True, "during": None}


@registry.task(name="race.work", max_attempts=2)
def race_work():
    during, STATE["during"] = STATE["during"], None
    if during is not None:
        during()  # what happens elsewhere while this delivery runs
    if STATE["fail"]:
        raise RuntimeError("still broken")
    return "done"


BODY = codec.dumps({"version": 1, "id": "j", "task": "race.work", "args": [], "kwargs": {},
                    "enqueued_at": 1_700_000_000_000})


class Memory:
    def __init__(self):
        self.store = MemoryResultStore()

    def put(self, record):
        self.store.records[record["id"]] = record

    def get(self, key):
        return self.store.records.get(key)

    def revive(self, key):
        # What kindling.tools.ops.revive writes (its DynamoDB transaction is tested below).
        old = self.get(key)
        assert old["status"] == DEAD
        self.put(build_record(key=key, task=old["task"], status=QUEUED, attempts=0, started_at=5, finished_at=5,
                              generation=(old.get("generation") or 1) + 1))


class Dynamo:
    def __init__(self, table):
        self.table = table
        self.store = DynamoResultStore(table)
        self.ddb = boto3.client("dynamodb")

    def put(self, record):
        self.ddb.put_item(TableName=self.table, Item=to_item(record))

    def get(self, key):
        item = self.ddb.get_item(TableName=self.table, Key={"id": {"S": key}}, ConsistentRead=True).get("Item")
        return from_item(item) if item else None

    def revive(self, key):
        revive(Stack(table=self.table), self.get(key))


@pytest.fixture(params=["memory", "dynamo"])
def side(request):
    STATE.update(fail=True, during=None)
    if request.param == "memory":
        return Memory()
    return Dynamo(request.getfixturevalue("table"))


def record(status, attempts, **extra):
    return build_record(key="j", task="race.work", status=status, attempts=attempts, started_at=1, finished_at=2,
                        **extra)


def dies_elsewhere_and_is_revived(side):
    def during():
        side.put(record(DEAD, 2))  # another delivery's last attempt
        side.revive("j")
    return during


def test_a_stale_dead_is_dropped_and_the_new_generation_runs(side):
    side.put(record(FAILED, 1))
    lines = []
    runner = Runner(registry, side.store, log=lines.append, metrics=False)
    STATE["during"] = dies_elsewhere_and_is_revived(side)
    [stale] = runner.run([Delivery("m1", BODY, attempts=2)])  # read: failed 1, so its attempt 2 (the last)
    assert stale.status == SKIPPED and "generation" in stale.reason
    kept = side.get("j")
    assert kept["status"] == QUEUED and kept["generation"] == 2  # not overwritten by the stale dead
    [line] = [x for x in lines if x.get("kindling") == "stale_generation"]
    assert line["job_id"] == "j" and line["generation"] == 1 and line["outcome"] == DEAD

    STATE["fail"] = False
    [fresh] = runner.run([Delivery("m2", BODY)])  # the revive's message: generation 2, attempt 1
    assert fresh.status == SUCCEEDED and fresh.attempts == 1
    done = side.get("j")
    assert done["status"] == SUCCEEDED and done["generation"] == 2


def test_a_stale_failed_is_dropped_and_the_new_generation_keeps_its_own_count(side):
    runner = Runner(registry, side.store, log=None, metrics=False)
    STATE["during"] = dies_elsewhere_and_is_revived(side)
    [stale] = runner.run([Delivery("m1", BODY)])  # read: no record, so attempt 1 of 2: failed
    assert stale.status == SKIPPED
    assert side.get("j")["status"] == QUEUED

    [first] = runner.run([Delivery("m2", BODY)])
    assert first.status == FAILED and first.attempts == 1
    assert (side.get("j")["status"], side.get("j")["generation"]) == (FAILED, 2)
    [second] = runner.run([Delivery("m2", BODY, attempts=2)])
    assert second.status == DEAD and second.attempts == 2
    assert (side.get("j")["status"], side.get("j")["generation"]) == (DEAD, 2)


def test_a_stale_success_replaces_the_queued_revive_since_the_job_did_succeed(side):
    """``succeeded`` records go out in one unconditional BatchWriteItem (the round-trip
    budget): an old generation's success stands, and the revive's message is then a
    duplicate of a job that succeeded."""
    STATE["fail"] = False
    runner = Runner(registry, side.store, log=None, metrics=False)
    STATE["during"] = dies_elsewhere_and_is_revived(side)
    [stale] = runner.run([Delivery("m1", BODY)])
    assert stale.status == SUCCEEDED and side.get("j")["status"] == SUCCEEDED
    [again] = runner.run([Delivery("m2", BODY)])
    assert again.status == SKIPPED and again.reason.startswith("already succeeded")


def test_a_read_gives_the_generation_of_a_revived_record_only(side):
    side.put(record(FAILED, 1))
    assert side.store.read_states(["j"]) == {"j": (FAILED, 1)}
    side.put(record(QUEUED, 0, generation=3))
    assert side.store.read_states(["j", "none"]) == {"j": (QUEUED, 0, 3)}
