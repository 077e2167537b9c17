"""The request-unit count of tests/unit/test_request_units.py, checked against moto: the
worker's real calls, each sent with ReturnConsumedCapacity=TOTAL to a table shaped as
template.yaml's. moto (5.2) charges reads as DynamoDB does (a unit per strongly consistent
key, found or not), so the read units are moto's sum; it charges a BatchWriteItem a flat 1.0
whatever it holds and no index writes at all, so the table's write units are the items put
(each under 1 KB: one unit, as the unit test's charging fake computes from their size), and
the index's unit is the unit test's alone."""

import importlib.util
import uuid
from pathlib import Path

import boto3
import pytest
from kindling.core.envelope import encode_job, new_job
from kindling.core.registry import Registry
from kindling.stores.dynamo import DynamoResultStore
from kindling.triggers.sqs.handler import LambdaWorker
from support import create_results_table

_PATH = Path(__file__).resolve().parents[2] / "infra/bench/costmodel.py"
_spec = importlib.util.spec_from_file_location("costmodel", _PATH)
cm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cm)

JOBS = 10
COMBINATIONS = [(results, index) for results in ("all", "failures", "none") for index in (True, False)]


class Charged:
    """kindling's DynamoDB client, asking each call for its consumed capacity and adding it up."""

    def __init__(self, client):
        self.client, self.units = client, {"BatchGetItem": 0.0, "BatchWriteItem": 0.0, "PutItem": 0.0}
        self.items_put = 0

    def _add(self, operation: str, reply: dict) -> dict:
        consumed = reply.get("ConsumedCapacity") or []
        for c in consumed if isinstance(consumed, list) else [consumed]:
            self.units[operation] += c["CapacityUnits"]
        return reply

    def call(self, operation, payload, deadline=None):
        if operation == "BatchWriteItem":
            self.items_put += sum(len(requests) for requests in payload["RequestItems"].values())
        elif operation == "PutItem":
            self.items_put += 1
        return self._add(operation, self.client.call(operation, dict(payload, ReturnConsumedCapacity="TOTAL"),
                                                     deadline=deadline))

    def start(self, operation, payload, deadline=None):
        pending, add = self.client.start(operation, dict(payload, ReturnConsumedCapacity="TOTAL"),
                                         deadline=deadline), self._add

        class Pending:
            @staticmethod
            def result():
                return add(operation, pending.result())

        return Pending()


def _table(task_index: bool) -> str:
    """template.yaml's results table, with its by_task index or (TaskIndex=false) without."""
    return create_results_table(boto3.client("dynamodb"), f"results-{uuid.uuid4().hex[:8]}",
                                TaskIndex=str(task_index).lower())


@pytest.mark.parametrize(("results", "task_index"), COMBINATIONS)
def test_moto_charges_the_worker_what_the_cost_model_prices_for_the_table(moto_endpoint, monkeypatch, results,
                                                                          task_index):
    from kindling.drivers import aws

    monkeypatch.setenv("KINDLING_RESULTS_POLICY", results)
    monkeypatch.setenv("KINDLING_TASK_INDEX", "1" if task_index else "0")
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    charged = Charged(aws.dynamodb())
    registry = Registry()
    registry.task(name="noop")(lambda: None)
    worker = LambdaWorker(registry, store=DynamoResultStore(_table(task_index), charged), log=None, metrics=False)
    event = {"Records": [{"messageId": str(uuid.uuid4()), "receiptHandle": "r", "body": encode_job(
        new_job("noop")).decode(), "attributes": {"ApproximateReceiveCount": "1"}, "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:0:jobs"} for _ in range(JOBS)]}
    assert worker(event) == {"batchItemFailures": []}
    wru, rru = cm.units_per_job(results, task_index)
    index_wru = cm.INDEX_WRU_PER_JOB if (results == "all" and task_index) else 0
    assert charged.units["BatchGetItem"] / JOBS == rru
    assert charged.items_put / JOBS == wru - index_wru
    assert (charged.units["BatchWriteItem"] > 0) == (wru > 0)  # a write was made, or none
