"""template.yaml deployed into LocalStack; LocalStack's SQS event source mapping invokes the
worker (a local python3.13 process with the layer on its path) and results land in
DynamoDB Local. Local parameters: FunctionTimeout 10 s, RetryDelay 1 s, MaxAttempts 4,
MaxReceiveCount 20, SnapStart true, MaxConcurrency 0, MinimumPollers 2, MaximumPollers 10.
"""

import io
import time
import urllib.request
import uuid
import zipfile

import boto3
import pytest
from kindling.core import codec
from kindling.core.envelope import encode_job, new_job
from kindling.core.status import FINAL
from kindling.producer.client import Call, Client
from kindling.stores.results import from_item

pytestmark = pytest.mark.localstack


@pytest.fixture(scope="module")
def client(stack):
    return Client(queue_url=stack["QueueUrl"], table=stack["ResultsTableName"])


def records(client, ids, *, until=FINAL, timeout=120.0) -> dict[str, dict]:
    """Poll (BatchGetItem, consistent) until every id has a record whose status is in ``until``."""
    ddb = boto3.client("dynamodb")
    found: dict[str, dict] = {}
    deadline = time.monotonic() + timeout
    while True:
        missing = [i for i in ids if found.get(i, {}).get("status") not in until]
        if not missing:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(missing)} of {len(ids)} jobs not final after {timeout}s, e.g. {missing[:3]}: "
                                 f"{[found.get(i, {}).get('status') for i in missing[:3]]}")
        for start in range(0, len(missing), 100):
            keys = [{"id": {"S": i}} for i in missing[start:start + 100]]
            resp = ddb.batch_get_item(RequestItems={client.table: {"Keys": keys, "ConsistentRead": True}})
            for item in resp["Responses"][client.table]:
                found[item["id"]["S"]] = from_item(item)
        time.sleep(0.3)


def queue_depth(url: str) -> int:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
             "ApproximateNumberOfMessagesDelayed"]
    attrs = boto3.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attrs[n]) for n in names)


def wait_drained(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while queue_depth(url) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert queue_depth(url) == 0


def test_a_thousand_jobs_each_succeed_exactly_once_and_the_queue_drains(client, stack):
    t0 = time.perf_counter()
    handles = client.enqueue_many([("noop", [], {})] * 1000)
    got = records(client, [h.id for h in handles], timeout=300)
    elapsed = time.perf_counter() - t0
    assert [r["status"] for r in got.values()].count("succeeded") == 1000
    assert {r["attempts"] for r in got.values()} == {1}  # none ran twice
    wait_drained(stack["QueueUrl"])
    print(f"\n1,000 noop jobs through LocalStack's event source mapping in {elapsed:.1f}s "
          f"({1000 / elapsed:.0f} jobs/s, enqueue to last result seen)")


def test_a_task_that_always_raises_ends_dead_and_in_the_dlq(client, stack):
    job = client.enqueue("always_fails", "still broken")
    rec = records(client, [job.id], timeout=90)[job.id]
    assert rec["status"] == "dead" and rec["attempts"] == 4
    assert rec["error"]["type"] == "RuntimeError" and rec["error"]["message"] == "still broken"
    sqs = boto3.client("sqs")
    deadline = time.monotonic() + 30
    bodies = []
    while time.monotonic() < deadline and not any(job.id in b for b in bodies):
        msgs = sqs.receive_message(QueueUrl=stack["DeadLetterQueueUrl"], MaxNumberOfMessages=10,
                                   WaitTimeSeconds=1).get("Messages", [])
        bodies += [m["Body"] for m in msgs]
    assert any(codec.loads(b)["id"] == job.id for b in bodies), "dead job's message not in the DLQ"


def test_a_flaky_task_succeeds_on_a_later_attempt(client):
    job = client.enqueue("flaky", fails=2)
    assert job.result(timeout=60) == 3
    assert client.record(job.id)["attempts"] == 3


def test_malformed_messages_are_rejected_with_their_body_and_the_rest_succeed(client, stack):
    sqs = boto3.client("sqs")
    not_json = sqs.send_message(QueueUrl=stack["QueueUrl"], MessageBody="{this is not json")["MessageId"]
    unknown = new_job("no_such_task")
    bad_args = new_job("sleep", [1, 2, 3])
    raw = {unknown.id: encode_job(unknown).decode(), bad_args.id: encode_job(bad_args).decode()}
    sqs.send_message_batch(QueueUrl=stack["QueueUrl"], Entries=[
        {"Id": str(i), "MessageBody": body} for i, body in enumerate(raw.values())])
    good = client.enqueue_many([("echo", [i], {}) for i in range(5)])
    got = records(client, [f"rejected#{not_json}", unknown.id, bad_args.id, *(h.id for h in good)])
    assert got[f"rejected#{not_json}"]["raw"] == "{this is not json"
    assert "not JSON" in got[f"rejected#{not_json}"]["error"]["message"]
    # The body as sent, byte for byte (the LocalStack plugin's sqs_bodies_as_sent, as on AWS).
    assert got[unknown.id]["status"] == "rejected"
    assert got[unknown.id]["raw"] == raw[unknown.id]
    assert got[unknown.id]["error"]["message"] == "unknown task 'no_such_task'"
    assert got[bad_args.id]["status"] == "rejected" and "bad arguments" in got[bad_args.id]["error"]["message"]
    assert [codec.loads(got[h.id]["result"])["args"] for h in good] == [[i] for i in range(5)]


def test_a_job_sent_twice_with_the_same_id_runs_once(client, stack):
    job_id = f"dup-{uuid.uuid4().hex}"
    client.send(Call("echo", ["once"], job_id=job_id))
    first = records(client, [job_id])[job_id]
    client.enqueue_many([Call("echo", ["once"], job_id=job_id), Call("echo", ["once"], job_id=job_id)])
    time.sleep(1.0)
    wait_drained(stack["QueueUrl"])
    assert client.record(job_id) == first  # never rewritten: the duplicates did not run


def test_a_batch_that_outlasts_the_function_timeout_is_finished_by_redelivery(client, stack):
    """Four 4 s jobs in one 10 s invocation: what does not fit is handed back and completes."""
    handles = client.enqueue_many([("sleep", [4000], {})] * 4)
    got = records(client, [h.id for h in handles], timeout=120)
    assert [r["status"] for r in got.values()] == ["succeeded"] * 4
    # Jobs handed back unstarted use no attempt; one stopped by the invocation's end used one.
    assert {r["attempts"] for r in got.values()} <= {1, 2}
    wait_drained(stack["QueueUrl"])


def test_the_worker_runs_kindling_from_its_layer(stack):
    fn = boto3.client("lambda").get_function(FunctionName=stack["WorkerFunctionName"])
    assert [layer["Arn"] for layer in fn["Configuration"]["Layers"]] == [stack["LayerArn"]]
    with urllib.request.urlopen(fn["Code"]["Location"]) as resp:
        names = zipfile.ZipFile(io.BytesIO(resp.read())).namelist()
    assert "app.py" in names and "tasks.py" in names
    assert not [n for n in names if n.startswith(("kindling", "orjson"))], names


def test_the_stack_deploys_with_snapstart_and_provisioned_pollers_and_its_jobs_run_through_the_alias(client, stack):
    """The session's stack is deployed with SnapStart=true, MaxConcurrency=0 and 2 to 10
    provisioned pollers: the jobs queue's trigger invokes the published "live" alias, whose
    version has SnapStart on, in provisioned mode with no concurrency limit."""
    lam = boto3.client("lambda")
    name = stack["WorkerFunctionName"]
    alias = lam.get_alias(FunctionName=name, Name="live")
    version = lam.get_function_configuration(FunctionName=name, Qualifier=alias["FunctionVersion"])
    assert alias["FunctionVersion"] != "$LATEST"
    assert version["SnapStart"] == {"ApplyOn": "PublishedVersions", "OptimizationStatus": "On"}
    queue_arn = boto3.client("sqs").get_queue_attributes(
        QueueUrl=stack["QueueUrl"], AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    [mapping] = [m for m in lam.list_event_source_mappings(FunctionName=name)["EventSourceMappings"]
                 if m["EventSourceArn"] == queue_arn]
    assert mapping["FunctionArn"] == alias["AliasArn"]
    assert mapping["ProvisionedPollerConfig"] == {"MinimumPollers": 2, "MaximumPollers": 10}
    assert not mapping.get("ScalingConfig", {}).get("MaximumConcurrency")
    job = client.enqueue("echo", "through the alias")
    assert records(client, [job.id])[job.id]["status"] == "succeeded"
