"""The Valkey-triggered Lambda, deployed: template.yaml in LocalStack with ``ValkeyUrl`` set
to this test's valkey-server and no schedule; the producer wakes the deployed worker
through LocalStack's Lambda API, and the local executor runs it on this host.

Run: .venv/bin/python -m pytest tests/stack/test_valkey_lambda_localstack.py -q
"""

from __future__ import annotations

import time

import pytest
from kindling.core.valkey.keys import derived_keys, flag_key

pytestmark = [pytest.mark.localstack, pytest.mark.valkey, pytest.mark.slow]

STACK = "kindling-valkey-it"
STREAM = "it:jobs"  # the deployed worker drains this stream only (ValkeyStream): an event cannot pick another


def _fresh_stream(url: str) -> str:
    """The stack's stream, emptied of what an earlier test left."""
    from kindling.shared.valkey.connection import connect

    client = connect(url)
    client.delete(STREAM, *derived_keys(STREAM), *(flag_key(STREAM, n) for n in range(16)))
    return STREAM


@pytest.fixture(scope="module")
def valkey_stack(deploy_stack, valkey_url, tmp_path_factory):
    """template.yaml deployed with ValkeyUrl set and DrainSchedule off: the stack outputs.

    Built into a directory of its own (not the repository's .aws-sam), so it does not race
    another build of the same template."""
    import boto3

    cfn = boto3.client("cloudformation")
    _drop_a_stack_with_a_schedule(cfn)
    outputs = deploy_stack(STACK, {"ValkeyUrl": valkey_url, "DrainSchedule": "off", "ValkeyStream": STREAM},
                           build_dir=tmp_path_factory.mktemp("sam"))
    outputs["Resources"] = {r["LogicalResourceId"]
                            for r in cfn.describe_stack_resources(StackName=STACK)["StackResources"]}
    return outputs


def _drop_a_stack_with_a_schedule(cfn) -> None:
    """An earlier deploy of this stack with the schedule on: LocalStack does not remove a
    resource whose condition turned false on update, so start from scratch."""
    try:
        resources = cfn.describe_stack_resources(StackName=STACK)["StackResources"]
    except cfn.exceptions.ClientError:
        return  # no such stack
    if any(r["LogicalResourceId"] == "DrainRule" for r in resources):
        cfn.delete_stack(StackName=STACK)
        cfn.get_waiter("stack_delete_complete").wait(StackName=STACK)


def _records(table: str) -> list[dict]:
    import boto3
    from kindling.stores.results import from_item

    pages = boto3.client("dynamodb").get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
    return [from_item(item) for page in pages for item in page["Items"]]


def test_a_thousand_jobs_wake_the_deployed_worker_and_run_once(valkey_stack, valkey_url):
    from kindling.valkey import StreamProducer

    function = valkey_stack["WorkerFunctionName"]
    table = valkey_stack["ResultsTableName"]
    assert "DrainRule" not in valkey_stack["Resources"]  # no schedule: only the producer's kicks
    import boto3

    arn = boto3.client("lambda").get_function(FunctionName=function)["Configuration"]["FunctionArn"]
    assert boto3.client("events").list_rule_names_by_target(TargetArn=arn)["RuleNames"] == []
    assert "ProducerPolicy" in valkey_stack["Resources"] and valkey_stack["ProducerPolicyArn"].startswith("arn:")

    stream = _fresh_stream(valkey_url)
    producer = StreamProducer(valkey_url, stream=stream, function_name=function, max_drains=3,
                              backlog_per_drain=300)
    t0 = time.monotonic()
    sent = []
    for i in range(100):  # 100 enqueues of 10 jobs: a burst, not 100 invocations
        sent += producer.enqueue_many([("echo", [i, k], {}) for k in range(10)])
    enqueued_s = time.monotonic() - t0
    ids = {s.id for s in sent}
    assert len(ids) == 1000
    kicks = producer.kicker.invocations
    assert producer.kicker.failures == 0, producer.kicker.last_error
    assert 1 <= kicks <= 3, kicks

    mine: list[dict] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        mine = [r for r in _records(table) if r["id"] in ids]
        if len(mine) >= 1000:
            break
        time.sleep(1)
    done_s = time.monotonic() - t0
    print(f"\n[valkey lambda] 1000 jobs enqueued in {enqueued_s:.2f}s with {kicks} invocation(s); "
          f"all recorded after {done_s:.1f}s")
    assert len(mine) == 1000, f"{1000 - len(mine)} of 1000 jobs not recorded after 120 s"
    assert all(r["status"] == "succeeded" and r["attempts"] == 1 for r in mine)
    assert {r["worker"]["function"] for r in mine} == {function}  # run by the deployed function
    assert {r["result"] for r in mine if r["id"] == sent[17].id} == {'{"args":[1,7],"kwargs":{}}'}

    r = producer.client
    deadline = time.monotonic() + 30  # the drains finish: flags released, consumers removed
    while time.monotonic() < deadline and (r.exists(*(flag_key(stream, n) for n in range(3)))
                                           or r.xinfo_consumers(stream, "kindling")):
        time.sleep(0.5)
    assert r.xlen(stream) == 0 and r.xpending(stream, "kindling")["pending"] == 0
    assert r.exists(*(flag_key(stream, n) for n in range(3))) == 0
    assert r.xinfo_consumers(stream, "kindling") == []


def test_a_drain_out_of_time_hands_on_to_a_new_invocation(valkey_stack, valkey_url):
    """40 jobs of 0.5 s for a function with a 10 s timeout and one drain: no invocation can
    run them all, so each hands on to the next (the worker role invokes its own function)."""
    import boto3
    from kindling.valkey import StreamProducer

    table = valkey_stack["ResultsTableName"]
    function = valkey_stack["WorkerFunctionName"]
    stream = _fresh_stream(valkey_url)
    producer = StreamProducer(valkey_url, stream=stream, function_name=function)
    since_ms = int(time.time() * 1000) - 1000
    ids = {s.id for s in producer.enqueue_many([("sleep", [500], {}) for _ in range(40)])}
    assert producer.kicker.invocations == 1
    mine: list[dict] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        mine = [r for r in _records(table) if r["id"] in ids and r["status"] == "succeeded"]
        if len(mine) == 40:
            break
        time.sleep(1)
    assert len(mine) == 40, f"{40 - len(mine)} of 40 jobs not recorded succeeded after 90 s"
    # 20 s of jobs with a 10 s timeout, one kick: later invocations were the drains' own
    span_ms = max(r["finished_at"] for r in mine) - min(r["started_at"] for r in mine)
    assert span_ms > 12_000, span_ms
    assert all(r["attempts"] == 1 for r in mine)
    # ... and they ended well: no timeout or error that Lambda's own retry of the event would explain
    pages = boto3.client("logs").get_paginator("filter_log_events").paginate(
        logGroupName=f"/aws/lambda/{function}", startTime=since_ms)
    lines = [e["message"] for page in pages for e in page["events"]]
    starts = [line for line in lines if line.startswith("START RequestId:")]
    assert len(starts) >= 3, starts
    assert not [line for line in lines if "Task timed out" in line or "Runtime." in line or '"ERROR"' in line]
    assert producer.client.xlen(stream) == 0
