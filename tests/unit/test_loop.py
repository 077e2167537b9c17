"""The worker outside Lambda (``kindling worker``) against moto: it settles messages as the handler does."""

import uuid

import boto3
from kindling.client import Client
from kindling.loop import SqsWorker


def test_the_local_loop_records_every_outcome_and_moves_dead_jobs_itself(table):
    import tasks  # noqa: F401  the example tasks

    sqs = boto3.client("sqs")
    dlq = sqs.create_queue(QueueName=f"dlq-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = sqs.create_queue(QueueName=f"jobs-{uuid.uuid4().hex[:8]}", Attributes={
        "VisibilityTimeout": "1",
        "RedrivePolicy": f'{{"deadLetterTargetArn": "{dlq_arn}", "maxReceiveCount": "10"}}',
    })["QueueUrl"]
    client = Client(queue_url=url, table=table)
    ok = client.enqueue("echo", 1)
    doomed = client.enqueue("always_fails", "no")
    sqs.send_message(QueueUrl=url, MessageBody="{not json")

    counts = SqsWorker(url, table, wait=1, log=None).run(burst=True, idle_timeout=10)

    assert client.status(ok.id) == "succeeded"
    record = client.record(doomed.id)
    assert record["status"] == "dead" and record["attempts"] == 3  # attempts, not deliveries
    bodies = [m["Body"] for m in sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10)["Messages"]]
    assert len(bodies) == 1 and doomed.id in bodies[0]
    assert counts.get("rejected") == 1
