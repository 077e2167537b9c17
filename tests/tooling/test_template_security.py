"""template.yaml's security settings (read with two named queues rendered in): managed
policies that hold exactly what the client and the operators' tools call, TLS-only queues,
producer accounts allowed to send only when listed, data protection on by default, and an
optional customer-managed key applied everywhere data rests."""

import re
from pathlib import Path

from support.templates import template

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "layers/kindling/kindling"
NAMED = ("Reports", "Bulk")
TEMPLATE = template(["reports", "bulk"])
RES = TEMPLATE["Resources"]
NO_VALUE = {"Ref": "AWS::NoValue"}
OBJECTS = {"Fn::Sub": "${PayloadBucket.Arn}/*"}  # the payload bucket's objects, and nothing else
# boto3 operations whose IAM action has another name.
ACTION_OF = {"SendMessageBatch": "SendMessage", "DeleteMessageBatch": "DeleteMessage",
             "ChangeMessageVisibilityBatch": "ChangeMessageVisibility"}


def _statements(policy: str) -> dict[str, dict]:
    """Sid -> statement, with statements behind a condition unwrapped."""
    found = {}
    for statement in RES[policy]["Properties"]["PolicyDocument"]["Statement"]:
        if "Fn::If" in statement:
            statement = statement["Fn::If"][1]
        found[statement["Sid"]] = statement
    return found


def _named(resource: str) -> list[dict]:
    """The Resource entries of the named queues (or of their ``{}DeadLetterQueue``s)."""
    return [{"Fn::GetAtt": [resource.format(n), "Arn"]} for n in NAMED]


def _allowed(policy: str) -> set[str]:
    actions = set()
    for statement in _statements(policy).values():
        got = statement["Action"]
        actions.update([got] if isinstance(got, str) else got)
    return actions


def _calls(path: Path, client: str) -> set[str]:
    """IAM actions of the boto3 calls a module makes on its sqs / dynamodb client."""
    names = re.findall(rf"\b{client}\.([a-z_]+)\(", path.read_text())
    prefix = {"sqs": "sqs", "dynamodb": "dynamodb"}[client]
    camel = {"".join(part.title() for part in name.split("_")) for name in names}
    return {f"{prefix}:{ACTION_OF.get(name, name)}" for name in camel}


def test_producers_policy_holds_what_the_client_calls_and_no_more():
    producer = [PACKAGE / name for name in ("producer/client.py", "shared/sqs_send.py", "producer/handles.py")]
    needed = set().union(*(_calls(path, c) for path in producer for c in ("sqs", "dynamodb")))
    assert needed == {"sqs:SendMessage", "sqs:GetQueueAttributes", "dynamodb:GetItem"}
    allowed = _allowed("ProducersPolicy")
    assert needed <= allowed
    assert allowed == {"sqs:SendMessage", "sqs:GetQueueUrl", "sqs:GetQueueAttributes", "lambda:InvokeFunction",
                       "dynamodb:GetItem", "dynamodb:BatchGetItem", "kms:Decrypt", "kms:GenerateDataKey",
                       "s3:PutObject", "s3:GetObject", "secretsmanager:GetSecretValue"}
    statements = _statements("ProducersPolicy")
    assert statements["Payloads"]["Resource"] == OBJECTS
    assert statements["SendJobs"]["Resource"] == [{"Fn::GetAtt": ["JobsQueue", "Arn"]}, *_named("Queue{}")]
    assert statements["KickDrains"]["Resource"] == {"Fn::GetAtt": ["WorkerFunction", "Arn"]}
    assert statements["ReadResults"]["Resource"] == {"Fn::GetAtt": ["ResultsTable", "Arn"]}
    assert not any(a.startswith(("dynamodb:Put", "dynamodb:Update", "dynamodb:Delete", "sqs:Receive", "sqs:Delete"))
                   for a in allowed)


def test_operators_policy_holds_every_call_of_the_cli_and_the_dashboard():
    needed = set()
    for module in [*(PACKAGE / "tools/ops").glob("*.py"), *(PACKAGE / "tools/dashboard").glob("*.py")]:
        needed |= _calls(module, "sqs") | _calls(module, "dynamodb")
    assert {"dynamodb:Query", "dynamodb:TransactWriteItems", "dynamodb:UpdateItem",
            "sqs:StartMessageMoveTask"} <= needed
    assert needed <= _allowed("OperatorsPolicy")
    statements = _statements("OperatorsPolicy")
    assert statements["ListJobs"]["Resource"] == {"Fn::Sub": "${ResultsTable.Arn}/index/*"}
    assert statements["RetryAndRedrive"]["Resource"] == [
        {"Fn::GetAtt": ["JobsQueue", "Arn"]}, {"Fn::GetAtt": ["JobsDeadLetterQueue", "Arn"]},
        *[arn for pair in zip(_named("Queue{}"), _named("Queue{}DeadLetterQueue"), strict=True) for arn in pair]]
    assert not any(a in _allowed("OperatorsPolicy") for a in ("dynamodb:Scan", "dynamodb:DeleteItem", "sqs:PurgeQueue"))
    outputs = TEMPLATE["Outputs"]
    assert outputs["ProducersPolicyArn"]["Value"] == {"Ref": "ProducersPolicy"}
    assert outputs["OperatorsPolicyArn"]["Value"] == {"Ref": "OperatorsPolicy"}


def test_every_queue_refuses_requests_without_tls():
    queues = {k for k, v in RES.items() if v["Type"] == "AWS::SQS::Queue"}
    covered = set()
    for policy in (v["Properties"] for v in RES.values() if v["Type"] == "AWS::SQS::QueuePolicy"):
        deny, *others = policy["PolicyDocument"]["Statement"]
        assert deny["Effect"] == "Deny" and deny["Principal"] == "*" and deny["Action"] == "sqs:*"
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        names = [q["Ref"] for q in policy["Queues"]]
        assert deny["Resource"] == [{"Fn::GetAtt": [q, "Arn"]} for q in names]
        assert all("Deny" not in repr(s) for s in others)  # the rest only allow, never widen a Deny
        covered.update(names)
    assert covered == queues and {"JobsQueue", "JobsDeadLetterQueue", "QueueBulkDeadLetterQueue"} <= queues


def test_listed_producer_accounts_may_send_to_each_queue_and_only_send_never_to_a_dlq():
    parameter = TEMPLATE["Parameters"]["ProducerAccountIds"]
    assert parameter["Type"] == "String" and parameter["Default"] == ""
    for ok in ("", "123456789012", "123456789012,210987654321"):
        assert re.fullmatch(parameter["AllowedPattern"], ok)
    for wrong in ("*", "arn:aws:iam::123456789012:root", "12345", "123456789012,", "123456789012, 210987654321"):
        assert not re.fullmatch(parameter["AllowedPattern"], wrong)
    assert TEMPLATE["Conditions"]["AllowProducerAccounts"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "ProducerAccountIds"}, ""]}]}
    sending = {}
    for policy in (v["Properties"] for v in RES.values() if v["Type"] == "AWS::SQS::QueuePolicy"):
        (_, allow) = policy["PolicyDocument"]["Statement"]
        condition, statement, otherwise = allow["Fn::If"]
        assert condition == "AllowProducerAccounts" and otherwise == NO_VALUE
        assert statement["Effect"] == "Allow" and statement["Action"] == "sqs:SendMessage"
        assert statement["Principal"] == {"AWS": {"Fn::Split": [",", {"Ref": "ProducerAccountIds"}]}}
        sending[policy["Queues"][0]["Ref"]] = statement["Resource"]
    assert sending == {q: {"Fn::GetAtt": [q, "Arn"]} for q in ("JobsQueue", *(f"Queue{n}" for n in NAMED))}


def test_results_table_keeps_point_in_time_recovery_and_deletion_protection_by_default():
    params = TEMPLATE["Parameters"]
    assert params["PointInTimeRecovery"]["Default"] == params["DeletionProtection"]["Default"] == "true"
    table = RES["ResultsTable"]["Properties"]
    assert table["PointInTimeRecoverySpecification"] == {
        "PointInTimeRecoveryEnabled": {"Fn::If": ["UsePointInTimeRecovery", True, False]}}
    assert table["DeletionProtectionEnabled"] == {"Fn::If": ["UseDeletionProtection", True, False]}


def test_a_customer_managed_key_encrypts_queues_table_logs_and_environment_when_given():
    assert TEMPLATE["Parameters"]["KmsKeyArn"]["Default"] == ""
    key = {"Ref": "KmsKeyArn"}
    for queue in (k for k, v in RES.items() if v["Type"] == "AWS::SQS::Queue"):
        props = RES[queue]["Properties"]
        assert props["KmsMasterKeyId"] == {"Fn::If": ["UseKms", key, NO_VALUE]}
        assert props["SqsManagedSseEnabled"] == {"Fn::If": ["UseKms", NO_VALUE, True]}
    sse = RES["ResultsTable"]["Properties"]["SSESpecification"]
    assert sse["KMSMasterKeyId"] == {"Fn::If": ["UseKms", key, NO_VALUE]}
    assert sse["SSEType"] == {"Fn::If": ["UseKms", "KMS", NO_VALUE]}
    assert RES["WorkerLogGroup"]["Properties"]["KmsKeyId"] == {"Fn::If": ["UseKms", key, NO_VALUE]}
    assert RES["WorkerFunction"]["Properties"]["KmsKeyArn"] == {"Fn::If": ["UseKms", key, NO_VALUE]}
    worker = RES["WorkerRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    (use_key,) = [s["Fn::If"] for s in worker if "Fn::If" in s and s["Fn::If"][0] == "UseKms"]
    assert use_key[1]["Resource"] == key and use_key[2] == NO_VALUE


def test_the_payload_bucket_is_private_tls_only_encrypted_and_expires_its_objects():
    params = TEMPLATE["Parameters"]["PayloadExpirationDays"]
    assert params["MinValue"] >= 14 and params["Default"] >= 14  # the queues keep messages 14 days
    bucket = RES["PayloadBucket"]["Properties"]
    assert bucket["PublicAccessBlockConfiguration"] == dict.fromkeys(
        ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"), True)
    assert bucket["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    (rule,) = bucket["LifecycleConfiguration"]["Rules"]
    assert rule["Status"] == "Enabled" and rule["ExpirationInDays"] == {"Ref": "PayloadExpirationDays"}
    assert "Prefix" not in rule and "Filter" not in rule  # every object
    (sse,) = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert sse["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": {"Fn::If": ["UseKms", "aws:kms", "AES256"]},
        "KMSMasterKeyID": {"Fn::If": ["UseKms", {"Ref": "KmsKeyArn"}, NO_VALUE]}}
    policy = RES["PayloadBucketTlsOnlyPolicy"]["Properties"]
    assert policy["Bucket"] == {"Ref": "PayloadBucket"}
    (deny,) = policy["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == "*" and deny["Action"] == "s3:*"
    assert deny["Resource"] == [{"Fn::GetAtt": ["PayloadBucket", "Arn"]}, OBJECTS]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_only_kindlings_roles_reach_the_payload_objects_and_the_name_reaches_them():
    worker = {s["Sid"]: s for s in RES["WorkerRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
              if "Sid" in s}
    assert worker["Payloads"]["Action"] == ["s3:GetObject", "s3:PutObject"]
    assert worker["Payloads"]["Resource"] == OBJECTS
    # so that a missing object is NoSuchKey, not AccessDenied: a lost chord member's result fails its chord
    lists = worker["TellLostPayloads"]
    assert (lists["Action"], lists["Resource"]) == ("s3:ListBucket", {"Fn::GetAtt": ["PayloadBucket", "Arn"]})
    every_worker_s3 = [a for s in worker.values() for a in ([s["Action"]] if isinstance(s["Action"], str)
                                                             else s["Action"]) if a.startswith("s3:")]
    assert sorted(every_worker_s3) == ["s3:GetObject", "s3:ListBucket", "s3:PutObject"]  # no deleting
    operators = _statements("OperatorsPolicy")["ReadLargeResults"]
    assert (operators["Action"], operators["Resource"]) == ("s3:GetObject", OBJECTS)
    every_s3 = [a for p in ("ProducersPolicy", "OperatorsPolicy") for a in _allowed(p) if a.startswith("s3:")]
    assert set(every_s3) <= {"s3:GetObject", "s3:PutObject"}  # no listing, no deleting
    env = RES["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    assert env["KINDLING_PAYLOAD_BUCKET"] == {"Ref": "PayloadBucket"}
    assert TEMPLATE["Outputs"]["PayloadBucketName"]["Value"] == {"Ref": "PayloadBucket"}


def _worker_statement(sid: str) -> tuple[str, dict]:
    for statement in RES["WorkerRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]:
        if "Fn::If" in statement and statement["Fn::If"][1].get("Sid") == sid:
            return statement["Fn::If"][0], statement["Fn::If"][1]
    raise AssertionError(f"no worker statement {sid}")


def test_signing_is_off_by_default_and_reads_only_its_own_secret_when_on():
    params = TEMPLATE["Parameters"]
    assert params["SigningSecretArn"]["Default"] == ""
    env = RES["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    assert env["KINDLING_SIGNING_SECRET"] == {"Fn::If": ["UseSigning", {"Ref": "SigningSecretArn"}, NO_VALUE]}
    assert TEMPLATE["Conditions"]["UseSigning"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "SigningSecretArn"}, ""]}]}
    condition, statement = _worker_statement("ReadSigningKeys")
    assert condition == "UseSigning"
    assert statement["Action"] == "secretsmanager:GetSecretValue"
    assert statement["Resource"] == {"Ref": "SigningSecretArn"}
    for policy in ("ProducersPolicy", "ProducerPolicy"):
        read = _statements(policy)["ReadSigningKeys"]
        assert read["Action"] == "secretsmanager:GetSecretValue" and read["Resource"] == {"Ref": "SigningSecretArn"}


def test_the_valkey_url_can_come_from_a_secret_that_only_the_worker_reads():
    params = TEMPLATE["Parameters"]
    assert params["ValkeyUrl"]["NoEcho"] is True  # the one parameter that may still carry a password
    assert params["ValkeyUrlSecretArn"]["Default"] == ""
    env = RES["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    assert env["KINDLING_VALKEY_URL_SECRET"] == {
        "Fn::If": ["UseValkeyUrlSecret", {"Ref": "ValkeyUrlSecretArn"}, NO_VALUE]}
    # with the secret, the URL parameter is not put in the environment
    assert env["KINDLING_VALKEY_URL"] == {"Fn::If": ["UseValkeyUrl", {"Ref": "ValkeyUrl"}, NO_VALUE]}
    assert {"Fn::Not": [{"Condition": "UseValkeyUrlSecret"}]} in TEMPLATE["Conditions"]["UseValkeyUrl"]["Fn::And"]
    condition, statement = _worker_statement("ReadValkeyUrl")
    assert condition == "UseValkeyUrlSecret" and statement["Resource"] == {"Ref": "ValkeyUrlSecretArn"}
    assert set(statement["Action"]) == {"secretsmanager:GetSecretValue", "ssm:GetParameter"}
    for name, param in params.items():  # no other parameter looks like it takes a password
        if any(word in name.lower() for word in ("password", "token", "auth")):
            assert param.get("NoEcho") is True, name
