"""kindling.tools.cdk's KindlingWorker deployed into LocalStack (infra/cdk/deploy.py: ``cdk synth``
of infra/cdk/app.py, its assets uploaded, the stack created by CloudFormation): a job sent to
its queue is run by its function and recorded in its table, a failing one ends dead in its
dead-letter queue, and the function runs kindling from the stack's own layer."""

from __future__ import annotations

import importlib.util
import time

import boto3
import pytest
from kindling.core import codec
from kindling.producer.client import Client

pytestmark = [pytest.mark.localstack, pytest.mark.slow]

STACK = "kindling-cdk-it"


@pytest.fixture(scope="module")
def cdk_stack(deploy_cdk_stack, tmp_path_factory) -> dict[str, str]:
    if importlib.util.find_spec("aws_cdk") is None:  # imported by infra/cdk/app.py, under cdk synth
        pytest.skip("aws-cdk-lib: pip install -e '.[dev]'")
    outputs = deploy_cdk_stack(STACK, {"max_attempts": 2}, tmp_path_factory.mktemp("cdk-build"))
    print(f"\nCDK stack deployed into LocalStack in {outputs['DeploySeconds']} s (assets and CloudFormation)")
    return outputs


@pytest.fixture(scope="module")
def client(cdk_stack) -> Client:
    return Client(queue_url=cdk_stack["QueueUrl"], table=cdk_stack["ResultsTableName"],
                  payload_bucket=cdk_stack["PayloadBucketName"])


def test_a_job_sent_to_the_queue_is_run_by_the_function_and_recorded_in_the_table(client):
    job = client.enqueue("echo", "from cdk", n=1)
    assert job.result(timeout=120) == {"args": ["from cdk"], "kwargs": {"n": 1}}
    record = client.record(job.id)
    assert record["status"] == "succeeded" and record["attempts"] == 1 and record["task"] == "echo"


def test_a_failing_job_ends_dead_after_its_attempts_and_in_the_dead_letter_queue(client, cdk_stack):
    job = client.enqueue("always_fails", "broken under cdk")
    deadline = time.monotonic() + 120
    while (record := client.record(job.id)) is None or record["status"] != "dead":
        assert time.monotonic() < deadline, f"not dead in 120 s: {record}"
        time.sleep(0.5)
    assert record["attempts"] == 2 and record["error"]["message"] == "broken under cdk"
    sqs, bodies = boto3.client("sqs"), []
    while time.monotonic() < deadline and not any(job.id in b for b in bodies):
        received = sqs.receive_message(QueueUrl=cdk_stack["DeadLetterQueueUrl"], MaxNumberOfMessages=10,
                                       WaitTimeSeconds=1)
        bodies += [m["Body"] for m in received.get("Messages", [])]
    assert any(codec.loads(b)["id"] == job.id for b in bodies), "the dead job's message is not in the DLQ"


def test_the_function_runs_from_the_stacks_layer_with_the_constructs_settings(cdk_stack):
    config = boto3.client("lambda").get_function_configuration(FunctionName=cdk_stack["WorkerFunctionName"])
    assert [layer["Arn"] for layer in config["Layers"]] == [cdk_stack["LayerArn"]]
    assert config["FunctionName"] == f"{STACK}-worker" and config["Runtime"] == "python3.13"
    env = config["Environment"]["Variables"]
    assert env["KINDLING_TABLE"] == cdk_stack["ResultsTableName"] and env["KINDLING_MAX_ATTEMPTS"] == "2"
    queue_arn = boto3.client("sqs").get_queue_attributes(QueueUrl=cdk_stack["QueueUrl"],
                                                         AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    mappings = boto3.client("lambda").list_event_source_mappings(EventSourceArn=queue_arn)
    (mapping,) = mappings["EventSourceMappings"]
    assert mapping["FunctionArn"].endswith(f":{STACK}-worker:live")  # the published alias, as SAM's
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": 10}
