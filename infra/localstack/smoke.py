"""Smoke check of the local cloud: DynamoDB, a python3.13 Lambda with a layer, and LocalStack's
own SQS event source mapping (with ReportBatchItemFailures) invoking it.

    eval "$(infra/localstack/ctl env)"; .venv/bin/python infra/localstack/smoke.py [--json]

Needs boto3 (the project venv or LocalStack's venv has it) and a running LocalStack
(infra/localstack/ctl start). Creates uniquely named resources and deletes them afterwards.
Prints what it measured; with --json, the last line is a JSON object of the figures.
"""

import io
import json
import os
import sys
import time
import uuid
import zipfile

import boto3

LAYER_CODE = """
import os

def where():
    return os.path.dirname(os.path.abspath(__file__))
"""

FUNCTION_CODE = """
import json
import os

import boto3
import mylayer

TABLE = os.environ["TABLE"]
ddb = boto3.client("dynamodb")


def handler(event, context):
    failures = []
    for record in event.get("Records", []):
        job = json.loads(record["body"])
        if job.get("fail"):
            failures.append({"itemIdentifier": record["messageId"]})
            continue
        ddb.put_item(TableName=TABLE, Item={
            "id": {"S": job["id"]},
            "layer_dir": {"S": mylayer.where()},
            "request_id": {"S": context.aws_request_id},
            "function_name": {"S": context.function_name},
            "remaining_ms": {"N": str(context.get_remaining_time_in_millis())},
        })
    print(f"processed {len(event.get('Records', []))} record(s), {len(failures)} failed")
    return {"batchItemFailures": failures}
"""


def zip_bytes(files):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return buf.getvalue()


def wait_until(what, check, timeout=60.0, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def run_smoke(log=print):
    endpoint = os.environ.get("AWS_ENDPOINT_URL") or "http://127.0.0.1:{}".format(
        os.environ.get("KINDLING_LOCALSTACK_PORT", "4566")
    )
    session = boto3.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1")
    ddb, lam, sqs, iam = (
        session.client(s, endpoint_url=endpoint) for s in ("dynamodb", "lambda", "sqs", "iam")
    )
    run_id = uuid.uuid4().hex[:8]
    name = f"kindling-smoke-{run_id}"
    figures = {}
    cleanup = []
    try:
        # -- DynamoDB
        t = time.monotonic()
        ddb.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        )
        cleanup.append(lambda: ddb.delete_table(TableName=name))
        ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.2})
        ddb.put_item(TableName=name, Item={"id": {"S": "probe"}, "v": {"N": "1"}})
        item = ddb.get_item(TableName=name, Key={"id": {"S": "probe"}}, ConsistentRead=True)
        assert item["Item"]["v"] == {"N": "1"}, item
        figures["dynamodb_table_put_get_s"] = time.monotonic() - t
        log(f"dynamodb: table + put/get ok in {figures['dynamodb_table_put_get_s']:.2f} s")

        # -- layer and function
        layer = lam.publish_layer_version(
            LayerName=name,
            CompatibleRuntimes=["python3.13"],
            Content={"ZipFile": zip_bytes({"python/mylayer.py": LAYER_CODE})},
        )
        cleanup.append(lambda: lam.delete_layer_version(LayerName=name, VersionNumber=layer["Version"]))
        role = iam.create_role(
            RoleName=name,
            AssumeRolePolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Action": "sts:AssumeRole",
                            "Principal": {"Service": "lambda.amazonaws.com"},
                        }
                    ],
                }
            ),
        )["Role"]["Arn"]
        cleanup.append(lambda: iam.delete_role(RoleName=name))
        t = time.monotonic()
        lam.create_function(
            FunctionName=name,
            Runtime="python3.13",
            Handler="app.handler",
            Role=role,
            Code={"ZipFile": zip_bytes({"app.py": FUNCTION_CODE})},
            Timeout=10,
            Layers=[layer["LayerVersionArn"]],
            Environment={"Variables": {"TABLE": name}},
        )
        cleanup.append(lambda: lam.delete_function(FunctionName=name))
        lam.get_waiter("function_active_v2").wait(FunctionName=name, WaiterConfig={"Delay": 0.2})
        figures["function_create_s"] = time.monotonic() - t
        log(f"lambda: layer + function active in {figures['function_create_s']:.2f} s")

        # -- direct invocations: the first one starts the execution environment (cold)
        for kind in ("cold", "warm"):
            event = {"Records": [{"messageId": f"m-{kind}", "body": json.dumps({"id": kind})}]}
            t = time.monotonic()
            resp = lam.invoke(FunctionName=name, Payload=json.dumps(event), LogType="Tail")
            figures[f"{kind}_invoke_s"] = time.monotonic() - t
            payload = json.loads(resp["Payload"].read())
            tail = __import__("base64").b64decode(resp.get("LogResult", "")).decode()
            assert "FunctionError" not in resp, (payload, tail)
            assert payload == {"batchItemFailures": []}, payload
            report = next((line for line in tail.splitlines() if line.startswith("REPORT")), "")
            if "Init Duration" in report:
                figures["init_duration_ms"] = float(report.split("Init Duration: ")[1].split()[0])
            log(f"lambda: {kind} invoke {figures[f'{kind}_invoke_s'] * 1000:.0f} ms  [{report}]")
        got = ddb.get_item(TableName=name, Key={"id": {"S": "cold"}}, ConsistentRead=True)["Item"]
        assert got["layer_dir"]["S"].endswith("/python"), got  # mylayer came from the layer
        assert got["function_name"]["S"] == name, got

        # -- SQS -> event source mapping -> function, with a partial batch failure
        dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
        cleanup.append(lambda: sqs.delete_queue(QueueUrl=dlq))
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        queue = sqs.create_queue(
            QueueName=name,
            Attributes={
                "VisibilityTimeout": "2",
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2}),
            },
        )["QueueUrl"]
        cleanup.append(lambda: sqs.delete_queue(QueueUrl=queue))
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        t = time.monotonic()
        esm = lam.create_event_source_mapping(
            FunctionName=name,
            EventSourceArn=queue_arn,
            BatchSize=10,
            FunctionResponseTypes=["ReportBatchItemFailures"],
        )
        cleanup.append(lambda: lam.delete_event_source_mapping(UUID=esm["UUID"]))
        wait_until(
            "the event source mapping to be enabled",
            lambda: lam.get_event_source_mapping(UUID=esm["UUID"])["State"] == "Enabled",
        )
        figures["esm_enable_s"] = time.monotonic() - t

        ids = [f"job-{i}" for i in range(20)]
        t = time.monotonic()
        for start in range(0, len(ids), 10):
            sqs.send_message_batch(
                QueueUrl=queue,
                Entries=[
                    {"Id": str(i), "MessageBody": json.dumps({"id": job})}
                    for i, job in enumerate(ids[start : start + 10])
                ],
            )
        sqs.send_message(QueueUrl=queue, MessageBody=json.dumps({"id": "poison", "fail": True}))

        def all_written():
            keys = [{"id": {"S": i}} for i in ids]
            found = 0
            for start in range(0, len(keys), 100):
                resp = ddb.batch_get_item(
                    RequestItems={
                        name: {
                            "Keys": keys[start : start + 100],
                            "ConsistentRead": True,
                            "ProjectionExpression": "id",
                        }
                    }
                )
                found += len(resp["Responses"][name])
            return found == len(ids)

        wait_until("the SQS messages to be processed into DynamoDB", all_written)
        figures["sqs_to_dynamodb_20_jobs_s"] = time.monotonic() - t
        log(f"esm: 20 jobs from SQS written to DynamoDB in {figures['sqs_to_dynamodb_20_jobs_s']:.2f} s")

        def poison_in_dlq():
            msgs = sqs.receive_message(QueueUrl=dlq, WaitTimeSeconds=1).get("Messages", [])
            return [m for m in msgs if json.loads(m["Body"]).get("id") == "poison"]

        wait_until("the failed message to reach the DLQ", poison_in_dlq, timeout=60)
        figures["failed_message_to_dlq_s"] = time.monotonic() - t
        assert not ddb.get_item(TableName=name, Key={"id": {"S": "poison"}}).get("Item")
        log(
            f"esm: reported batch item failure retried and moved to the DLQ in "
            f"{figures['failed_message_to_dlq_s']:.2f} s"
        )
    finally:
        for undo in reversed(cleanup):
            try:
                undo()
            except Exception as e:  # cleanup is best effort; the check's result stands
                log(f"cleanup: {e}")
    return figures


def main(argv):
    figures = run_smoke()
    print("smoke: OK")
    if "--json" in argv:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
