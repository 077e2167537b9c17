"""``KindlingWorker``: template.yaml as an AWS CDK construct, for applications written in CDK.

    from aws_cdk import App, Stack
    from kindling.tools.cdk import KindlingWorker, add_outputs

    app = App()
    stack = Stack(app, "myapp")
    worker = KindlingWorker(stack, "Worker", function_code="functions/worker",
                            layer_code=".layer", alarms=True)
    add_outputs(worker)
    app.synth()

The same resources with the same properties as template.yaml (queue and dead-letter queue,
results table, payload bucket, layer, worker function with its published version and
"live" alias and the event source mapping on that alias, role,
log group, managed policies for producers and operators, schedules, VPC endpoints and
alarms), and the same parameters as keyword arguments in snake_case (``MaxAttempts`` is
``max_attempts``; a "true"/"false" parameter is a bool, a list parameter a list). Where
the template chooses with a Condition, the construct chooses in Python, so the synthesized
template holds only what the arguments ask for.

``function_code`` is the function's code directory (the handler and the tasks) and
``layer_code`` a built layer directory (``python/`` inside: ``make -C layers/kindling
build-KindlingLayer ARTIFACTS_DIR=...``), or either as any ``aws_lambda.Code``. With a Valkey
URL (``valkey_url`` or ``valkey_url_secret_arn``), ``valkey_layer_code`` is the Valkey stream
support's layer (``make -C layers/kindling build-KindlingValkeyLayer ARTIFACTS_DIR=...``),
which the function carries on top of the kindling layer, as template.yaml's
KindlingValkeyLayer; without a Valkey URL it is not deployed.

Outside Lambda only: this module is not in the layer and nothing in the worker imports it.
aws-cdk-lib comes with the ``cdk`` extra: ``pip install "kindling-jobs[cdk]"``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

try:
    from aws_cdk import Aws, CfnOutput, CfnResource, RemovalPolicy, Token
    from aws_cdk import aws_lambda as lambda_
    from constructs import Construct
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError('kindling.tools.cdk needs aws-cdk-lib: pip install "kindling-jobs[cdk]"') from exc

__all__ = ["KindlingWorker", "add_outputs", "PARAMETERS"]

RUNTIMES = ("python3.11", "python3.12", "python3.13")
FUNCTION_TIMEOUTS = (10, 15, 30, 60, 120, 300, 600, 900)
LOG_RETENTIONS = (1, 3, 5, 7, 14, 30, 60, 90, 180, 365)

# template.yaml's parameters by their keyword argument here, each with its default and its
# constraint: (default, allowed values or None, least, most).
PARAMETERS: dict[str, tuple[Any, tuple | None, float | None, float | None]] = {
    "runtime": ("python3.13", RUNTIMES, None, None),
    "architecture": ("x86_64", ("x86_64", "arm64"), None, None),
    "memory_size": (512, None, 128, 10240),
    "function_timeout": (30, FUNCTION_TIMEOUTS, None, None),
    "batch_size": (10, None, 1, 10000),
    "max_batching_window": (0, None, 0, 300),
    "max_concurrency": (10, None, 0, 1000),
    "minimum_pollers": (0, None, 0, 200),
    "maximum_pollers": (200, None, 2, 2000),
    "snap_start": (False, (True, False), None, None),
    "max_attempts": (3, None, 1, 1000),
    "max_receive_count": (100, None, 2, 1000),
    "retry_delay": (5, None, 0, None),
    "result_ttl_days": (14, None, 14, None),
    "results_policy": ("all", ("all", "failures", "none"), None, None),
    "task_index": (True, (True, False), None, None),
    "payload_expiration_days": (14, None, 14, None),
    "log_retention_days": (14, LOG_RETENTIONS, None, None),
    "periodic_tasks": (False, (True, False), None, None),
    "fifo_queue": (False, (True, False), None, None),
    "producer_account_ids": ((), None, None, None),
    "status_index_shards": (4, None, 1, 100),
    "table_warm_read_units_per_second": (0, None, 0, None),
    "table_warm_write_units_per_second": (0, None, 0, None),
    "valkey_url": ("", None, None, None),
    "valkey_url_secret_arn": ("", None, None, None),
    "signing_secret_arn": ("", None, None, None),
    "valkey_stream": ("kindling:jobs", None, None, None),
    "drain_schedule": ("rate(10 minutes)", None, None, None),
    "vpc_subnet_ids": ((), None, None, None),
    "vpc_security_group_ids": ((), None, None, None),
    "vpc_id": ("", None, None, None),
    "vpc_route_table_ids": ((), None, None, None),
    "vpc_endpoints": (True, (True, False), None, None),
    "alarms": (False, (True, False), None, None),
    "alarm_topic_arn": ("", None, None, None),
    "oldest_message_alarm_seconds": (900, None, 60, None),
    "error_rate_alarm_percent": (5, None, 0, 100),
    "metrics_namespace": ("kindling", None, None, None),
    "metrics_service": ("service_undefined", None, None, None),
    "tracing": ("PassThrough", ("Active", "PassThrough"), None, None),
    "point_in_time_recovery": (True, (True, False), None, None),
    "deletion_protection": (True, (True, False), None, None),
    "kms_key_arn": ("", None, None, None),
}


def _settings(given: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments over :data:`PARAMETERS`' defaults, each checked against the
    template's constraint (a ValueError names the first that is not)."""
    unknown = sorted(set(given) - set(PARAMETERS))
    if unknown:
        raise TypeError(f"KindlingWorker: unknown parameter(s) {', '.join(unknown)}")
    values = {name: given.get(name, default) for name, (default, *_) in PARAMETERS.items()}
    for name, (_, allowed, least, most) in PARAMETERS.items():
        value = values[name]
        flag = allowed == (True, False)
        if flag != isinstance(value, bool):
            raise ValueError(f"KindlingWorker: {name}={value!r}: {'True or False' if flag else 'not a bool'}")
        if allowed is not None and value not in allowed:
            raise ValueError(f"KindlingWorker: {name}={value!r}: one of {', '.join(map(repr, allowed or ()))}")
        if (least is not None or most is not None) and not isinstance(value, int | float):
            raise ValueError(f"KindlingWorker: {name}={value!r} is not a number")
        if least is not None and value < least or most is not None and value > most:
            raise ValueError(f"KindlingWorker: {name}={value!r} is outside [{least}, {most if most else ''}]")
    # The template's Rules.
    if values["max_concurrency"] == 1:
        raise ValueError("KindlingWorker: max_concurrency is 0 (no limit) or 2 to 1000")
    if values["minimum_pollers"] == 1:
        raise ValueError("KindlingWorker: minimum_pollers is 0 (default mode) or 2 to 200, SQS's least")
    if values["minimum_pollers"] and values["max_concurrency"]:
        raise ValueError("KindlingWorker: provisioned pollers (minimum_pollers > 0) cannot be combined with a "
                         "concurrency limit: max_concurrency=0")
    if values["snap_start"] and values["runtime"] == "python3.11":
        raise ValueError("KindlingWorker: snap_start needs runtime python3.12 or python3.13")
    ids = values["producer_account_ids"]
    if any(not (isinstance(i, str) and len(i) == 12 and i.isdigit()) for i in ids):
        raise ValueError(f"KindlingWorker: producer_account_ids={ids!r}: 12-digit account ids")
    return values


def _code(code: str | Path | lambda_.Code) -> lambda_.Code:
    """A directory as an asset, relative to this process's working directory (the jsii
    runtime's own may differ), or a ``Code`` as it is."""
    return code if isinstance(code, lambda_.Code) else lambda_.Code.from_asset(str(Path(code).resolve()))


def _arn(resource: CfnResource) -> str:
    return Token.as_string(resource.get_att("Arn"))


class KindlingWorker(Construct):
    """template.yaml's resources under one construct. Each resource's construct id is the
    template's logical id (``JobsQueue``, ``ResultsTable``, ``WorkerFunction`` ...); the
    attributes named after them (``jobs_queue``, ``results_table`` ...) are the
    ``CfnResource`` objects, for references and escape hatches.

    ``name``: the prefix of the names the template derives from the stack's name (the
    function ``<name>-worker``, its log group, the layer, FIFO queues); by default the
    stack's name, so two workers in one stack need a name each."""

    def __init__(self, scope: Construct, construct_id: str, *, function_code: str | Path | lambda_.Code,
                 layer_code: str | Path | lambda_.Code, handler: str = "app.handler", name: str | None = None,
                 valkey_layer_code: str | Path | lambda_.Code | None = None, **parameters: Any) -> None:
        super().__init__(scope, construct_id)
        p = self.settings = _settings(parameters)
        name = name or Aws.STACK_NAME
        self.name = name
        fifo, kms, valkey_secret = p["fifo_queue"], p["kms_key_arn"], p["valkey_url_secret_arn"]
        use_valkey_url = bool(p["valkey_url"]) and not valkey_secret
        use_valkey = use_valkey_url or bool(valkey_secret)
        if use_valkey and valkey_layer_code is None:
            raise ValueError("KindlingWorker: a Valkey URL needs valkey_layer_code, the Valkey stream support's "
                             "layer (make -C layers/kindling build-KindlingValkeyLayer ARTIFACTS_DIR=...)")
        use_vpc = bool(p["vpc_subnet_ids"])
        endpoints = use_valkey and use_vpc and p["vpc_endpoints"]
        signing = p["signing_secret_arn"]
        drain = use_valkey and p["drain_schedule"] not in ("", "off")
        batching = p["max_batching_window"] != 0 and not fifo

        def res(cid: str, kind: str, props: dict, condition: bool = True) -> CfnResource | None:
            return CfnResource(self, cid, type=kind, properties=props) if condition else None

        def when(cond: Any, value: Any, otherwise: Any = None) -> Any:
            return value if cond else otherwise

        layer_cfg = _code(layer_code).bind(Construct(self, "LayerCode"))
        self.layer = res("KindlingLayer", "AWS::Lambda::LayerVersion", {
            "LayerName": f"{name}-kindling",
            "Description": "kindling's runtime and orjson",
            "Content": {"S3Bucket": layer_cfg.s3_location.bucket_name, "S3Key": layer_cfg.s3_location.object_key},
            "CompatibleRuntimes": [p["runtime"]],
            "CompatibleArchitectures": [p["architecture"]],
        })
        # The Valkey stream support, on top of the kindling layer: only a worker with a Valkey URL carries it.
        valkey_layer_cfg = _code(valkey_layer_code).bind(Construct(self, "ValkeyLayerCode")) if use_valkey else None
        self.valkey_layer = res("KindlingValkeyLayer", "AWS::Lambda::LayerVersion", {
            "LayerName": f"{name}-kindling-valkey",
            "Description": "kindling's Valkey stream support",
            "Content": {"S3Bucket": valkey_layer_cfg.s3_location.bucket_name,
                        "S3Key": valkey_layer_cfg.s3_location.object_key},
            "CompatibleRuntimes": [p["runtime"]],
            "CompatibleArchitectures": [p["architecture"]],
        } if use_valkey else {}, use_valkey)
        queue_common = {
            "MessageRetentionPeriod": 1209600,
            "SqsManagedSseEnabled": when(not kms, True),
            "KmsMasterKeyId": when(kms, kms),
        }
        self.dead_letter_queue = dlq = res("JobsDeadLetterQueue", "AWS::SQS::Queue", {
            "QueueName": when(fifo, f"{name}-dead.fifo"), "FifoQueue": when(fifo, True), **queue_common})
        self.jobs_queue = jobs = res("JobsQueue", "AWS::SQS::Queue", {
            "QueueName": when(fifo, f"{name}-jobs.fifo"), "FifoQueue": when(fifo, True),
            "VisibilityTimeout": 6 * p["function_timeout"], **queue_common,
            "RedrivePolicy": {"deadLetterTargetArn": _arn(dlq), "maxReceiveCount": p["max_receive_count"]},
        })
        tls_only = {"Sid": "DenyWithoutTls", "Effect": "Deny", "Principal": "*", "Action": "sqs:*",
                    "Resource": [_arn(jobs), _arn(dlq)], "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
        producers = {"Sid": "ProducerAccountsSend", "Effect": "Allow",
                     "Principal": {"AWS": list(p["producer_account_ids"])}, "Action": "sqs:SendMessage",
                     "Resource": _arn(jobs)}
        res("QueuesTlsOnlyPolicy", "AWS::SQS::QueuePolicy", {
            "Queues": [jobs.ref, dlq.ref],
            "PolicyDocument": {"Version": "2012-10-17",
                               "Statement": [tls_only, *([producers] if p["producer_account_ids"] else [])]},
        })
        task_index = p["task_index"]
        listed = ["task", "status", "attempts", "enqueued_at", "started_at", "duration_ms"]
        warm_reads, warm_writes = p["table_warm_read_units_per_second"], p["table_warm_write_units_per_second"]
        self.results_table = table = res("ResultsTable", "AWS::DynamoDB::Table", {
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [
                {"AttributeName": "id", "AttributeType": "S"},
                *([{"AttributeName": "task_shard", "AttributeType": "S"}] if task_index else []),
                {"AttributeName": "status_shard", "AttributeType": "S"},
                {"AttributeName": "finished_at", "AttributeType": "N"},
            ],
            "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
            "GlobalSecondaryIndexes": [
                *([{"IndexName": "by_task",
                    "KeySchema": [{"AttributeName": "task_shard", "KeyType": "HASH"},
                                  {"AttributeName": "finished_at", "KeyType": "RANGE"}],
                    "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": listed}}] if task_index else []),
                {"IndexName": "by_status",
                 "KeySchema": [{"AttributeName": "status_shard", "KeyType": "HASH"},
                               {"AttributeName": "finished_at", "KeyType": "RANGE"}],
                 "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": [*listed, "error"]}},
            ],
            "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": p["point_in_time_recovery"]},
            "DeletionProtectionEnabled": p["deletion_protection"],
            "SSESpecification": {"SSEEnabled": True, "SSEType": when(kms, "KMS"), "KMSMasterKeyId": when(kms, kms)},
            "WarmThroughput": when(warm_reads or warm_writes, {"ReadUnitsPerSecond": warm_reads or 12000,
                                                               "WriteUnitsPerSecond": warm_writes or 4000}),
        })
        self.payload_bucket = bucket = res("PayloadBucket", "AWS::S3::Bucket", {
            "BucketEncryption": {"ServerSideEncryptionConfiguration": [{
                "ServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms" if kms else "AES256",
                                                  "KMSMasterKeyID": when(kms, kms)},
                "BucketKeyEnabled": when(kms, True)}]},
            "PublicAccessBlockConfiguration": {"BlockPublicAcls": True, "BlockPublicPolicy": True,
                                               "IgnorePublicAcls": True, "RestrictPublicBuckets": True},
            "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
            "LifecycleConfiguration": {"Rules": [{
                "Id": "ExpirePayloads", "Status": "Enabled", "ExpirationInDays": p["payload_expiration_days"],
                "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}]},
        })
        objects = f"{_arn(bucket)}/*"
        res("PayloadBucketTlsOnlyPolicy", "AWS::S3::BucketPolicy", {
            "Bucket": bucket.ref,
            "PolicyDocument": {"Version": "2012-10-17", "Statement": [{
                "Sid": "DenyWithoutTls", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
                "Resource": [_arn(bucket), objects], "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]},
        })
        self.log_group = log_group = res("WorkerLogGroup", "AWS::Logs::LogGroup", {
            "LogGroupName": f"/aws/lambda/{name}-worker", "RetentionInDays": p["log_retention_days"],
            "KmsKeyId": when(kms, kms)})

        def allow(sid: str, action: str | list[str], resource: Any) -> dict:
            return {"Sid": sid, "Effect": "Allow", "Action": action, "Resource": resource}

        kms_statement = [allow("UseDataKey", ["kms:Decrypt", "kms:GenerateDataKey"], kms)] if kms else []
        signing_statement = [allow("ReadSigningKeys", "secretsmanager:GetSecretValue", signing)] if signing else []
        worker_arn = f"arn:{Aws.PARTITION}:lambda:{Aws.REGION}:{Aws.ACCOUNT_ID}:function:{name}-worker"
        self.role = role = res("WorkerRole", "AWS::IAM::Role", {
            "ManagedPolicyArns": [f"arn:{Aws.PARTITION}:iam::aws:policy/{managed}" for managed, wanted in (
                ("service-role/AWSLambdaVPCAccessExecutionRole", use_vpc),
                ("AWSXrayWriteOnlyAccess", p["tracing"] == "Active")) if wanted],
            "AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]},
            "Policies": [{"PolicyName": "kindling-worker", "PolicyDocument": {"Version": "2012-10-17", "Statement": [
                allow("Logs", ["logs:CreateLogStream", "logs:PutLogEvents"], _arn(log_group)),
                allow("ConsumeJobs", ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility",
                                      "sqs:GetQueueAttributes"], [_arn(jobs)]),
                allow("MoveDeadJobs", "sqs:SendMessage", [_arn(dlq)]),
                allow("EnqueueJobs", "sqs:SendMessage", [_arn(jobs)]),
                allow("RecordResults", ["dynamodb:BatchGetItem", "dynamodb:BatchWriteItem", "dynamodb:PutItem",
                                        "dynamodb:UpdateItem"], _arn(table)),
                allow("Payloads", ["s3:GetObject", "s3:PutObject"], objects),
                allow("TellLostPayloads", "s3:ListBucket", _arn(bucket)),
                *kms_statement, *signing_statement,
                *([allow("ReadValkeyUrl", ["secretsmanager:GetSecretValue", "ssm:GetParameter"], valkey_secret)]
                  if valkey_secret else []),
                *([allow("HandOnDrains", "lambda:InvokeFunction", worker_arn)] if use_valkey else []),
            ]}}],
        })
        function_cfg = _code(function_code).bind(Construct(self, "FunctionCode"))
        self.function = function = res("WorkerFunction", "AWS::Lambda::Function", {
            "FunctionName": f"{name}-worker",
            "Description": "Runs kindling jobs from the jobs queue",
            "Code": {"S3Bucket": function_cfg.s3_location.bucket_name, "S3Key": function_cfg.s3_location.object_key},
            "Handler": handler,
            "Runtime": p["runtime"],
            "SnapStart": {"ApplyOn": "PublishedVersions" if p["snap_start"] else "None"},
            "Architectures": [p["architecture"]],
            "MemorySize": p["memory_size"],
            "Timeout": p["function_timeout"],
            "TracingConfig": {"Mode": p["tracing"]},
            "Role": _arn(role),
            "KmsKeyArn": when(kms, kms),
            "Layers": [self.layer.ref, *([self.valkey_layer.ref] if use_valkey else [])],
            "VpcConfig": when(use_vpc, {"SubnetIds": list(p["vpc_subnet_ids"]),
                                        "SecurityGroupIds": list(p["vpc_security_group_ids"])}),
            "Environment": {"Variables": {
                "KINDLING_TABLE": table.ref,
                "KINDLING_QUEUE_URL": jobs.ref,
                "KINDLING_VALKEY_URL": when(use_valkey_url, p["valkey_url"]),
                "KINDLING_VALKEY_URL_SECRET": when(valkey_secret, valkey_secret),
                "KINDLING_VALKEY_STREAMS": when(use_valkey, p["valkey_stream"]),
                "KINDLING_SIGNING_SECRET": when(signing, signing),
                "KINDLING_MAX_ATTEMPTS": str(p["max_attempts"]),
                "KINDLING_MAX_RECEIVES": str(p["max_receive_count"]),
                "KINDLING_DLQ_URL": dlq.ref,
                "KINDLING_DLQ_URLS": f"{_arn(jobs)}={dlq.ref}",
                "KINDLING_RESULT_TTL_DAYS": str(p["result_ttl_days"]),
                "KINDLING_RESULTS_POLICY": p["results_policy"],
                "KINDLING_TASK_INDEX": "1" if task_index else "0",
                "KINDLING_PERIODIC_TASKS": "true" if p["periodic_tasks"] else "false",
                "KINDLING_RETRY_DELAY": str(p["retry_delay"]),
                "KINDLING_PAYLOAD_BUCKET": bucket.ref,
                "KINDLING_STATUS_SHARDS": str(p["status_index_shards"]),
                "POWERTOOLS_SERVICE_NAME": p["metrics_service"],
                "POWERTOOLS_METRICS_NAMESPACE": p["metrics_namespace"],
            }},
        })
        function.add_resource_dependency(log_group)
        # Each deploy publishes a version and points the "live" alias at it (SAM's
        # AutoPublishAlias): the queue's trigger invokes the alias (the schedules the function), so
        # SnapStart (on published versions) applies to its batches. A version is immutable: its id
        # changes with what it publishes, so a changed function gets a new one.
        published = json.dumps([function_cfg.s3_location.object_key, layer_cfg.s3_location.object_key,
                                valkey_layer_cfg and valkey_layer_cfg.s3_location.object_key, handler,
                                {k: v for k, v in p.items() if isinstance(v, str | int | float | bool | tuple)}],
                               sort_keys=True, default=list)
        version = res(f"WorkerFunctionVersion{hashlib.sha256(published.encode()).hexdigest()[:10]}",
                      "AWS::Lambda::Version", {"FunctionName": function.ref})
        version.apply_removal_policy(RemovalPolicy.RETAIN)  # as SAM's: an old version stays for rollbacks
        self.version = version
        self.alias = alias = res("WorkerFunctionAliaslive", "AWS::Lambda::Alias", {
            "Name": "live", "FunctionName": function.ref,
            "FunctionVersion": Token.as_string(version.get_att("Version"))})
        self.event_source_mapping = res("WorkerFunctionJobs", "AWS::Lambda::EventSourceMapping", {
            "EventSourceArn": _arn(jobs),
            "FunctionName": alias.ref,
            "BatchSize": p["batch_size"],
            "MaximumBatchingWindowInSeconds": when(batching, p["max_batching_window"]),
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "ScalingConfig": when(p["max_concurrency"], {"MaximumConcurrency": p["max_concurrency"]}),
            "ProvisionedPollerConfig": when(p["minimum_pollers"], {"MinimumPollers": p["minimum_pollers"],
                                                                   "MaximumPollers": p["maximum_pollers"]}),
        })
        self._schedules(res, drain, p)
        self._policies(res, use_valkey, kms_statement, signing_statement, objects)
        self._endpoints(res, endpoints, signing or valkey_secret, p)
        self._alarms(res, p)

    def _schedules(self, res, drain: bool, p: dict) -> None:
        fn = self.function.ref  # the function, as template.yaml's rules: not the alias (see there)
        for cid, on, schedule, event in (
                ("Drain", drain, p["drain_schedule"], f'{{"kindling": "drain", "stream": "{p["valkey_stream"]}"}}'),
                ("Tick", p["periodic_tasks"], "rate(1 minute)", '{"kindling": "tick"}')):
            rule = res(f"{cid}Rule", "AWS::Events::Rule", {"ScheduleExpression": schedule, "Targets": [
                {"Id": cid.lower(), "Arn": _arn(self.function), "Input": event}]}, on)
            res(f"{cid}Permission", "AWS::Lambda::Permission", {
                "Action": "lambda:InvokeFunction", "FunctionName": fn,
                "Principal": "events.amazonaws.com", "SourceArn": _arn(rule)} if rule else {}, on)

    def _policies(self, res, use_valkey: bool, kms_statement: list, signing_statement: list, objects: str) -> None:
        name, fn, table = self.name, _arn(self.function), _arn(self.results_table)
        jobs, dlq = _arn(self.jobs_queue), _arn(self.dead_letter_queue)

        def policy(cid: str, description: str, statements: list, condition: bool = True) -> CfnResource | None:
            return res(cid, "AWS::IAM::ManagedPolicy", {
                "Description": f"kindling {name}: {description}",
                "PolicyDocument": {"Version": "2012-10-17", "Statement": statements}}, condition)

        def allow(sid: str, action: str | list[str], resource: Any) -> dict:
            return {"Sid": sid, "Effect": "Allow", "Action": action, "Resource": resource}

        self.producer_policy = policy(
            "ProducerPolicy", "wake the worker after adding jobs to the Valkey stream",
            [allow("KickDrains", "lambda:InvokeFunction", fn), *signing_statement], use_valkey)
        self.producers_policy = policy("ProducersPolicy", "enqueue jobs, kick the worker, read results", [
            allow("SendJobs", ["sqs:SendMessage", "sqs:GetQueueUrl", "sqs:GetQueueAttributes"], [jobs]),
            allow("KickDrains", "lambda:InvokeFunction", fn),
            allow("ReadResults", ["dynamodb:GetItem", "dynamodb:BatchGetItem"], table),
            allow("Payloads", ["s3:PutObject", "s3:GetObject"], objects),
            *signing_statement, *kms_statement])
        self.operators_policy = policy(
            "OperatorsPolicy", "list, read, retry and redrive jobs (CLI and dashboard)", [
                allow("ListJobs", "dynamodb:Query", f"{table}/index/*"),
                allow("ReadAndReviveJobs", ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem",
                                            "dynamodb:UpdateItem", "dynamodb:TransactWriteItems"], table),
                allow("ReadLargeResults", "s3:GetObject", objects),
                allow("RetryAndRedrive", ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility",
                                          "sqs:SendMessage", "sqs:GetQueueUrl", "sqs:GetQueueAttributes",
                                          "sqs:StartMessageMoveTask", "sqs:ListMessageMoveTasks"], [jobs, dlq]),
                *signing_statement, *kms_statement])

    def _endpoints(self, res, endpoints: bool, secrets: bool, p: dict) -> None:
        if not endpoints:
            return
        group = res("EndpointSecurityGroup", "AWS::EC2::SecurityGroup", {
            "GroupDescription": f"kindling {self.name}: HTTPS from the worker to the interface endpoints",
            "VpcId": p["vpc_id"],
            "SecurityGroupIngress": [{"IpProtocol": "tcp", "Description": "HTTPS from the worker's security group",
                                      "FromPort": 443, "ToPort": 443,
                                      "SourceSecurityGroupId": p["vpc_security_group_ids"][0]}]})
        for cid, service in (("DynamoDbEndpoint", "dynamodb"), ("S3Endpoint", "s3")):
            res(cid, "AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Gateway",
                                               "ServiceName": f"com.amazonaws.{Aws.REGION}.{service}",
                                               "VpcId": p["vpc_id"], "RouteTableIds": list(p["vpc_route_table_ids"])})
        interfaces = [("SqsEndpoint", "sqs"), ("LambdaEndpoint", "lambda")]
        for cid, service in [*interfaces, *([("SecretsManagerEndpoint", "secretsmanager")] if secrets else [])]:
            res(cid, "AWS::EC2::VPCEndpoint", {
                "VpcEndpointType": "Interface", "ServiceName": f"com.amazonaws.{Aws.REGION}.{service}",
                "VpcId": p["vpc_id"], "SubnetIds": list(p["vpc_subnet_ids"]), "SecurityGroupIds": [group.ref],
                "PrivateDnsEnabled": True})

    def _alarms(self, res, p: dict) -> None:
        if not p["alarms"]:
            return
        topic = p["alarm_topic_arn"]
        actions = {"AlarmActions": [topic] if topic else None, "OKActions": [topic] if topic else None}
        common = {"ComparisonOperator": "GreaterThanThreshold", "TreatMissingData": "notBreaching", **actions}
        name = self.name

        def watch(cid: str, description: str, namespace: str, metric: str, dimension: dict, statistic: str,
                  periods: int, threshold: Any, **extra: Any) -> None:
            res(cid, "AWS::CloudWatch::Alarm", {
                "AlarmDescription": f"kindling {name}: {description}", "Namespace": namespace, "MetricName": metric,
                "Dimensions": [dimension], "Statistic": statistic, "Period": 60, "EvaluationPeriods": periods,
                **extra, "Threshold": threshold, **common})

        queue_name = lambda q: Token.as_string(q.get_att("QueueName"))  # noqa: E731
        watch("DeadLetterQueueAlarm", "jobs in the dead-letter queue (kindling dlq peek)", "AWS/SQS",
              "ApproximateNumberOfMessagesVisible", {"Name": "QueueName", "Value": queue_name(self.dead_letter_queue)},
              "Maximum", 1, 0)
        watch("OldestMessageAlarm", "the jobs queue's oldest message waits too long", "AWS/SQS",
              "ApproximateAgeOfOldestMessage", {"Name": "QueueName", "Value": queue_name(self.jobs_queue)},
              "Maximum", 5, p["oldest_message_alarm_seconds"])
        watch("WorkerThrottlesAlarm", "the worker function is throttled", "AWS/Lambda", "Throttles",
              {"Name": "FunctionName", "Value": self.function.ref}, "Sum", 5, 0, DatapointsToAlarm=3)

        def runs(metric_id: str, metric: str) -> dict:
            return {"Id": metric_id, "ReturnData": False, "MetricStat": {
                "Metric": {"Namespace": p["metrics_namespace"], "MetricName": metric,
                           "Dimensions": [{"Name": "service", "Value": p["metrics_service"]}]},
                "Period": 300, "Stat": "Sum"}}

        runs_sum = "FILL(failed, 0) + FILL(dead, 0) + FILL(ok, 0)"
        res("JobErrorRateAlarm", "AWS::CloudWatch::Alarm", {
            "AlarmDescription": f"kindling {name}: failed and dead runs above {p['error_rate_alarm_percent']}% of runs",
            "EvaluationPeriods": 1, "Threshold": p["error_rate_alarm_percent"], **common,
            "Metrics": [
                {"Id": "rate", "Label": "error rate (%)", "ReturnData": True,
                 "Expression": f"IF(({runs_sum}) > 0, 100 * (FILL(failed, 0) + FILL(dead, 0)) / ({runs_sum}), 0)"},
                runs("failed", "JobsFailed"), runs("dead", "JobsDead"), runs("ok", "JobsSucceeded"),
            ]})


def add_outputs(worker: KindlingWorker) -> dict[str, CfnOutput]:
    """template.yaml's outputs (QueueUrl, ResultsTableName, ...) for ``worker``, under the
    same keys: one worker's outputs per stack."""
    values = {
        "QueueUrl": worker.jobs_queue.ref, "DeadLetterQueueUrl": worker.dead_letter_queue.ref,
        "ResultsTableName": worker.results_table.ref, "PayloadBucketName": worker.payload_bucket.ref,
        "LayerArn": worker.layer.ref, "WorkerFunctionName": worker.function.ref,
        "ProducersPolicyArn": worker.producers_policy.ref, "OperatorsPolicyArn": worker.operators_policy.ref,
    }
    if worker.producer_policy is not None:
        values["ProducerPolicyArn"] = worker.producer_policy.ref
    if worker.valkey_layer is not None:
        values["ValkeyLayerArn"] = worker.valkey_layer.ref
    outputs = {}
    for key, value in values.items():
        output = outputs[key] = CfnOutput(worker, key, value=value)
        output.override_logical_id(key)
    return outputs
