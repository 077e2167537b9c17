"""Send a job to kindling from any Python producer with boto3 alone, without kindling
installed: the envelope is docs/envelope.schema.json, the body compact JSON."""

import base64
import hashlib
import hmac
import json
import os
import time
import uuid

import boto3


def envelope(task: str, args: list, kwargs: dict, *, max_attempts: int | None = None) -> dict:
    """A version 1 envelope: a plain job (no chain, group or S3 payload)."""
    job = {"version": 1, "id": uuid.uuid4().hex, "task": task, "args": args, "kwargs": kwargs,
           "enqueued_at": int(time.time() * 1000)}
    if max_attempts is not None:
        job["max_attempts"] = max_attempts
    return job


def signature(key_id: str, key: bytes, queue_url: str, body: bytes) -> str:
    """Signed jobs: v1:<key id>:<base64 HMAC-SHA256 over the header lines and the exact body>."""
    account, name = queue_url.rstrip("/").split("/")[-2:]
    signed = f"kindling-job-v1\n{key_id}\nsqs:{account}:{name}\n".encode() + body
    return f"v1:{key_id}:{base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()}"


def send(queue_url: str, job: dict, signing: tuple[str, bytes] | None = None) -> str:
    body = json.dumps(job, separators=(",", ":"), ensure_ascii=False).encode()
    extra = {}
    if signing:  # only for a deployment with SigningSecretArn
        extra["MessageAttributes"] = {"kindling_signature": {
            "DataType": "String", "StringValue": signature(*signing, queue_url, body)}}
    boto3.client("sqs").send_message(QueueUrl=queue_url, MessageBody=body.decode(), **extra)
    return job["id"]


if __name__ == "__main__":
    job_id = send(os.environ["KINDLING_QUEUE_URL"], envelope("tasks.resize", ["a.png"], {"width": 64}))
    print(job_id)
