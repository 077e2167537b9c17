"""SQS queues as template.yaml makes them, for tests against moto or LocalStack."""

from __future__ import annotations

import uuid


def fifo_queue_with_dlq(name: str | None = None) -> tuple[str, str]:
    """A FIFO jobs queue and its FIFO dead-letter queue, as FifoQueue=true deploys them:
    (queue URL, dead-letter queue URL). A visibility of 1 s, 10 receives before the DLQ."""
    import boto3

    name = name or f"jobs-{uuid.uuid4().hex[:8]}"
    client = boto3.client("sqs")
    dlq = client.create_queue(QueueName=f"{name}-dead.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    arn = client.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = client.create_queue(QueueName=f"{name}.fifo", Attributes={
        "FifoQueue": "true", "VisibilityTimeout": "1",
        "RedrivePolicy": f'{{"deadLetterTargetArn": "{arn}", "maxReceiveCount": "10"}}'})["QueueUrl"]
    return url, dlq
