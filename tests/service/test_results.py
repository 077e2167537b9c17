"""DynamoResultStore against moto: chunking, concurrency, and the store being down."""

import pytest
from kindling.core.errors import StoreUnavailable
from kindling.stores.results import DynamoResultStore, from_item


def record(i: int, status: str = "succeeded") -> dict:
    return {"id": f"job-{i:04d}", "task": "echo", "status": status, "result": f"[{i}]", "attempts": 1}


@pytest.mark.parametrize("concurrency", [1, 4])
def test_writes_and_reads_back_across_many_chunks(table, concurrency):
    import boto3

    store = DynamoResultStore(table, concurrency=concurrency)
    records = [record(i, "failed" if i % 7 == 0 else "succeeded") for i in range(260)]  # 11 writes, 3 reads
    store.write(records + [record(3, "dead")])  # a later record of the same id wins
    statuses = store.get_statuses([r["id"] for r in records] + ["job-9999"])
    assert len(statuses) == 260 and "job-9999" not in statuses
    assert statuses["job-0003"] == "dead" and statuses["job-0007"] == "failed" and statuses["job-0001"] == "succeeded"
    item = boto3.client("dynamodb").get_item(TableName=table, Key={"id": {"S": "job-0042"}})["Item"]
    assert from_item(item)["result"] == "[42]"
    store.close()


class Calls(list):
    client = None


@pytest.fixture
def calls(monkeypatch):
    """Every DynamoDB call a store makes, as it is made: (thread, client, operation, payload).
    The store's chunk threads build their clients from ``kindling.drivers.aws.JsonClient``, recorded here."""
    import threading

    from kindling.drivers import aws

    made = Calls()

    class Recording(aws.JsonClient):
        def call(self, operation, payload, **options):
            made.append((threading.get_ident(), id(self), operation, payload))
            return super().call(operation, payload, **options)

    monkeypatch.setattr(aws, "JsonClient", Recording)
    made.client = lambda: Recording("dynamodb", "DynamoDB_20120810")
    return made


def test_concurrent_chunks_use_one_connection_each(table, calls):
    base = calls.client()
    store = DynamoResultStore(table, client=base, concurrency=3)
    store.write([record(i) for i in range(200)])  # 8 chunks over 3 threads
    threads_of: dict[int, set] = {}
    for thread, client, operation, _ in calls:
        assert operation == "BatchWriteItem"
        threads_of.setdefault(client, set()).add(thread)
    assert len(calls) == 8 and id(base) not in threads_of  # every chunk on a thread's own connection
    assert all(len(threads) == 1 for threads in threads_of.values())  # a connection is never shared
    store.close()


def test_a_table_that_does_not_exist_is_store_unavailable(moto_endpoint):
    store = DynamoResultStore("no-such-table", concurrency=4)
    with pytest.raises(StoreUnavailable, match="no-such-table"):
        store.write([record(i) for i in range(60)])
    with pytest.raises(StoreUnavailable, match="BatchGetItem"):
        store.get_statuses(["a", "b"])
    store.close()


def test_concurrency_must_be_positive():
    with pytest.raises(ValueError, match="concurrency"):
        DynamoResultStore("t", concurrency=0)


def test_a_read_sent_now_and_collected_later_sees_what_read_states_sees(table):
    store = DynamoResultStore(table)
    store.write([record(i, "failed" if i % 2 else "succeeded") for i in range(10)])
    collect = store.begin_read([f"job-{i:04d}" for i in range(12)])
    assert collect() == store.read_states([f"job-{i:04d}" for i in range(12)])


def test_a_read_sent_to_a_missing_table_fails_as_store_unavailable(moto_endpoint):
    collect = DynamoResultStore("no-such-table").begin_read(["a"])
    with pytest.raises(StoreUnavailable, match="BatchGetItem"):
        collect()


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_write_sent_now_and_collected_later_records_what_write_records(table, concurrency):
    store = DynamoResultStore(table, concurrency=concurrency)
    store.write([record(1, "succeeded")])
    collect = store.begin_write([record(i, "failed" if i < 2 else "succeeded") for i in range(60)])
    assert collect() == {"job-0001": "succeeded"}  # a failed record never replaces a success
    statuses = store.get_statuses([f"job-{i:04d}" for i in range(60)])
    assert statuses["job-0000"] == "failed" and statuses["job-0001"] == "succeeded"
    assert [statuses[f"job-{i:04d}"] for i in range(2, 60)] == ["succeeded"] * 58
    store.close()


def test_with_several_connections_a_write_and_a_read_go_out_before_either_is_collected(table, calls):
    """What lets a long-lived worker check its next batch while this one is written: both are
    on the wire (the table holds the records) before anything is collected."""
    import time

    import boto3

    store = DynamoResultStore(table, concurrency=4)
    write = store.begin_write([record(i) for i in range(60)])  # 3 BatchWriteItem calls
    ddb = boto3.client("dynamodb")
    deadline = time.monotonic() + 10
    while ddb.scan(TableName=table, Select="COUNT", ConsistentRead=True)["Count"] < 60:
        assert time.monotonic() < deadline, "the write was not sent before it was collected"
        time.sleep(0.02)
    read = store.begin_read([f"job-{i:04d}" for i in range(150)])  # 2 BatchGetItem calls
    deadline = time.monotonic() + 10
    while sorted(len(p["RequestItems"][table]["Keys"]) for *_, op, p in calls if op == "BatchGetItem") != [50, 100]:
        assert time.monotonic() < deadline, "the read was not sent before it was collected"
        time.sleep(0.02)
    assert write() == {} and len(read()) == 60
    store.close()


def test_a_write_sent_to_a_missing_table_fails_as_store_unavailable_when_collected(moto_endpoint):
    for concurrency in (1, 4):
        store = DynamoResultStore("no-such-table", concurrency=concurrency)
        collect = store.begin_write([record(i) for i in range(30)])
        with pytest.raises(StoreUnavailable, match="BatchWriteItem"):
            collect()
        store.close()
