"""Request units per job, counted from the calls the worker makes: the Lambda handler runs a
batch of 10 no-op jobs against a fake DynamoDB that charges each call as DynamoDB does
(ReturnConsumedCapacity=TOTAL's arithmetic, the table's indexes included), for every
results policy and with the ``by_task`` index on and off. The cost model
(infra/bench/costmodel.py) prices what is counted here, so its figures follow the calls."""

import importlib.util
import math
import uuid
from pathlib import Path

import pytest
from kindling.core.envelope import encode_job, new_job
from kindling.core.registry import Registry
from kindling.stores.dynamo import DynamoResultStore
from kindling.triggers.sqs.handler import LambdaWorker

_PATH = Path(__file__).resolve().parents[2] / "infra/bench/costmodel.py"
_spec = importlib.util.spec_from_file_location("costmodel", _PATH)
cm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cm)

JOBS = 10
# template.yaml's ResultsTable: each index's hash key (by_task only with TaskIndex=true)
BY_TASK, BY_STATUS = "task_shard", "status_shard"


def _size(value: dict) -> int:
    """An attribute value's size as DynamoDB counts it (names and values, UTF-8)."""
    (kind, v), = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        return len(v.lstrip("-").replace(".", "")) // 2 + 2
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + _size(x) + 1 for k, x in v.items())
    if kind == "L":
        return 3 + sum(_size(x) + 1 for x in v)
    raise AssertionError(f"unexpected attribute type {kind}")


def item_size(item: dict) -> int:
    return sum(len(name.encode()) + _size(value) for name, value in item.items())


class ChargingDynamo:
    """DynamoDB's table and its charges: a put is ceil(size / 1 KB) write units on the table
    plus one per index entry it makes (an item with that index's key attribute), a
    strongly consistent read of a key is ceil(size / 4 KB) read units, at least one whether
    or not the item exists."""

    def __init__(self, indexes: tuple[str, ...]):
        self.indexes = indexes
        self.items: dict[str, dict] = {}
        self.wru = self.rru = 0
        self.calls: list[str] = []

    def call(self, operation: str, payload: dict, deadline=None) -> dict:
        self.calls.append(operation)
        if operation == "BatchGetItem":
            (table, request), = payload["RequestItems"].items()
            assert request.get("ConsistentRead") is True
            found = []
            for key in request["Keys"]:
                item = self.items.get(key["id"]["S"])
                self.rru += max(1, math.ceil(item_size(item) / 4096)) if item else 1
                if item:
                    found.append(item)
            return {"Responses": {table: found}}
        if operation == "BatchWriteItem":
            (_, requests), = payload["RequestItems"].items()
            for request in requests:
                self._put(request["PutRequest"]["Item"])
            return {}
        if operation == "PutItem":
            self._put(payload["Item"])
            return {}
        raise AssertionError(f"unexpected call {operation}")

    def start(self, operation: str, payload: dict, deadline=None):
        """A call sent now and read later (the duplicate check's): charged when made."""
        reply = self.call(operation, payload, deadline)

        class Pending:
            @staticmethod
            def result() -> dict:
                return reply

        return Pending()

    def _put(self, item: dict) -> None:
        units = math.ceil(item_size(item) / 1024)
        self.wru += units + sum(1 for index in self.indexes if index in item)
        self.items[item["id"]["S"]] = item


def run_batch(monkeypatch, results: str, task_index: bool) -> ChargingDynamo:
    monkeypatch.setenv("KINDLING_RESULTS_POLICY", results)
    monkeypatch.setenv("KINDLING_TASK_INDEX", "1" if task_index else "0")
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    dynamo = ChargingDynamo((BY_TASK, BY_STATUS) if task_index else (BY_STATUS,))
    registry = Registry()
    registry.task(name="noop")(lambda: None)
    worker = LambdaWorker(registry, store=DynamoResultStore("results", dynamo), log=None, metrics=False)
    event = {"Records": [{"messageId": str(uuid.uuid4()), "receiptHandle": "r", "body": encode_job(
        new_job("noop")).decode(), "attributes": {"ApproximateReceiveCount": "1"},
        "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:0:jobs"} for _ in range(JOBS)]}
    assert worker(event) == {"batchItemFailures": []}
    return dynamo


COMBINATIONS = [(results, index) for results in ("all", "failures", "none") for index in (True, False)]


@pytest.mark.parametrize(("results", "task_index"), COMBINATIONS)
def test_request_units_per_noop_job_are_what_the_cost_model_prices(monkeypatch, results, task_index):
    dynamo = run_batch(monkeypatch, results, task_index)
    counted = (dynamo.wru / JOBS, dynamo.rru / JOBS)
    assert counted == cm.units_per_job(results, task_index)


def test_the_counts_themselves(monkeypatch):
    """By hand: the default pays the record, its by_task entry and the duplicate check;
    without the index, the record and the check; results="failures" or "none", nothing."""
    counted = {}
    for results, task_index in COMBINATIONS:
        dynamo = run_batch(monkeypatch, results, task_index)
        counted[results, task_index] = (dynamo.wru, dynamo.rru, dynamo.calls)
    assert counted["all", True] == (20, 10, ["BatchGetItem", "BatchWriteItem"])
    assert counted["all", False] == (10, 10, ["BatchGetItem", "BatchWriteItem"])
    for results in ("failures", "none"):
        for task_index in (True, False):
            assert counted[results, task_index] == (0, 0, [])
