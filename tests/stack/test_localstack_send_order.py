"""On LocalStack's SQS: the producer's send pipeline keeps each FIFO message group in call
order. The same tests as tests/service/test_send_order.py (moto), collected here with this
module's queue (no stack deployed)."""

from __future__ import annotations

import uuid

import pytest
from service.test_send_order import (  # noqa: F401 - collected here, on LocalStack
    test_interleaved_groups_each_reach_the_queue_in_call_order,
    test_two_hundred_jobs_of_one_group_reach_the_queue_in_call_order,
)

pytestmark = pytest.mark.localstack


@pytest.fixture
def fifo_url(aws):
    import boto3

    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=f"order-{uuid.uuid4().hex[:8]}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    yield url
    sqs.delete_queue(QueueUrl=url)
