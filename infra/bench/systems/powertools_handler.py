"""The Lambda handler you would write yourself: boto3 + Powertools' BatchProcessor.

Runs the same noop task as functions/worker/tasks.py and writes the same result record
(kindling's shape) with boto3's DynamoDB client (put_item), one item per job. Unlike
kindling it does not check for an earlier success of a redelivered job (one read less).
"""

import json
import os
import time

import boto3
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

processor = BatchProcessor(event_type=EventType.SQS)
dynamodb = boto3.client("dynamodb")
TABLE = os.environ["KINDLING_TABLE"]
TASKS = {"noop": lambda: None}


def record_handler(record):
    job = json.loads(record.body)
    started = time.time_ns() // 1_000_000
    t0 = time.perf_counter()
    value = TASKS[job["task"]](*job["args"], **job["kwargs"])
    duration = (time.perf_counter() - t0) * 1000
    finished = time.time_ns() // 1_000_000
    attempts = int(record.attributes.approximate_receive_count)
    dynamodb.put_item(TableName=TABLE, Item={
        "id": {"S": job["id"]}, "task": {"S": job["task"]}, "status": {"S": "succeeded"},
        "result": {"S": json.dumps(value)}, "attempts": {"N": str(attempts)},
        "enqueued_at": {"N": str(job["enqueued_at"])}, "started_at": {"N": str(started)},
        "finished_at": {"N": str(finished)}, "duration_ms": {"N": repr(duration)},
        "worker": {"M": {"function": {"S": os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "")}}},
        "expires_at": {"N": str(finished // 1000 + 7 * 86400)},
    })
    return value


def handler(event, context):
    return process_partial_response(event=event, record_handler=record_handler, processor=processor,
                                    context=context)
