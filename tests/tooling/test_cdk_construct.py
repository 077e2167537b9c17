"""kindling.tools.cdk's KindlingWorker synthesizes what template.yaml deploys: the same parameters
with the same defaults, and for each set of values the same resources of the same types
with the same properties (the table's keys and indexes, the queues' attributes and redrive,
the role's and managed policies' statements, the event source mapping, the alarms...), read
from the SAM translation of template.yaml resolved for those values."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from support import cfn, templates

pytestmark = pytest.mark.slow  # the jsii runtime takes seconds to start and to synthesize

KMS = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:kindling-AbCdEf"
TOPIC = "arn:aws:sns:us-east-1:123456789012:alarms"

# Each a set of template.yaml's parameters, to deploy both ways.
SCENARIOS = {
    "defaults": {},
    "everything optional on SQS": {
        "Alarms": "true", "AlarmTopicArn": TOPIC, "FifoQueue": "true", "PeriodicTasks": "true", "KmsKeyArn": KMS,
        "Tracing": "Active", "TaskIndex": "false", "PointInTimeRecovery": "false", "DeletionProtection": "false",
        "TableWarmReadUnitsPerSecond": 15000, "ProducerAccountIds": "111122223333,444455556666",
        "SigningSecretArn": SECRET, "MaxBatchingWindow": 5, "FunctionTimeout": "60", "ResultsPolicy": "failures",
        "ErrorRateAlarmPercent": 7, "OldestMessageAlarmSeconds": 120, "MetricsService": "billing",
    },
    "Valkey in a VPC with endpoints": {
        "ValkeyUrlSecretArn": SECRET, "SigningSecretArn": SECRET, "VpcSubnetIds": "subnet-1,subnet-2",
        "VpcSecurityGroupIds": "sg-1", "VpcId": "vpc-1", "VpcRouteTableIds": "rtb-1", "Architecture": "arm64",
        "MaxBatchingWindow": 2, "BatchSize": 50, "MaxConcurrency": 20, "MemorySize": 1024, "Alarms": "true",
        "TableWarmWriteUnitsPerSecond": 5000, "ValkeyStream": "a,b", "DrainSchedule": "rate(5 minutes)",
    },
    "Valkey URL through a NAT, no schedule": {
        "ValkeyUrl": "redis://cache.internal:6379", "VpcSubnetIds": "subnet-1", "VpcSecurityGroupIds": "sg-1",
        "VpcEndpoints": "false", "DrainSchedule": "off", "LogRetentionDays": 30, "RetryDelay": 0,
        "SnapStart": "true", "MinimumPollers": 5, "MaximumPollers": 50, "MaxConcurrency": 0, "PeriodicTasks": "true",
    },
}


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def keyword(spec: dict, value) -> object:
    """A template parameter's value as KindlingWorker takes it."""
    if sorted(spec.get("AllowedValues", [])) == ["false", "true"]:
        return value == "true"
    if spec["Type"] == "CommaDelimitedList" or spec.get("AllowedPattern", "").startswith("^([0-9]{12}"):
        return [v for v in str(value).split(",") if v]
    if spec["Type"] == "Number" or spec.get("AllowedValues") and str(spec["AllowedValues"][0]).isdigit():
        return int(value)
    return value


PARAMETERS = templates.template()["Parameters"]


def keywords(parameters: dict) -> dict:
    return {snake(k): keyword(PARAMETERS[k], v) for k, v in parameters.items()}


@pytest.fixture(scope="module")
def aws_cdk():
    """aws-cdk-lib, imported by the tests that use it (not at collection: importing it starts
    the jsii runtime, a Node.js process)."""
    os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
    return pytest.importorskip("aws_cdk", reason="aws-cdk-lib: pip install -e '.[dev]'")


@pytest.fixture(scope="module")
def cdk(aws_cdk):
    from kindling.tools import cdk

    return cdk


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory, aws_cdk, cdk) -> dict[str, dict]:
    """Each scenario's KindlingWorker, synthesized in one app (one jsii runtime)."""
    code = tmp_path_factory.mktemp("code")
    (code / "app.py").write_text("def handler(event, context):\n    return None\n")
    app = aws_cdk.App(outdir=str(tmp_path_factory.mktemp("cdk.out")), analytics_reporting=False,
              context={"aws:cdk:enable-path-metadata": True})
    stacks = {}
    for i, (scenario, parameters) in enumerate(SCENARIOS.items()):
        stack = aws_cdk.Stack(app, f"kindling-{i}")
        cdk.KindlingWorker(stack, "Worker", function_code=code, layer_code=code, valkey_layer_code=code,
                           **keywords(parameters))
        stacks[scenario] = stack.stack_name
    assembly = app.synth()
    return {scenario: assembly.get_stack_by_name(name).template for scenario, name in stacks.items()}


def test_the_construct_takes_the_templates_parameters_with_its_defaults(cdk):
    names = {snake(k): k for k in PARAMETERS}
    assert set(cdk.PARAMETERS) == set(names), "a parameter of template.yaml the construct lacks, or one it added"
    for name, (default, *_) in cdk.PARAMETERS.items():
        spec = PARAMETERS[names[name]]
        assert (list(default) if isinstance(default, tuple) else default) == keyword(spec, spec["Default"]), name


def test_the_construct_refuses_what_the_template_refuses(tmp_path, aws_cdk, cdk):
    stack = aws_cdk.Stack(aws_cdk.App(outdir=str(tmp_path)), "refused")
    for bad in ({"function_timeout": 45}, {"max_concurrency": 1}, {"results_policy": "some"},
                {"producer_account_ids": ["12345"]}, {"alarms": "true"}, {"alarms": 1}, {"memory_size": True},
                {"result_ttl_days": 7}, {"maxattempts": 3}, {"max_concurrency": 1}, {"minimum_pollers": 1},
                {"minimum_pollers": 5}, {"snap_start": "true"}, {"snap_start": True, "runtime": "python3.11"},
                {"runtime": "python3.10"}):
        with pytest.raises((ValueError, TypeError)):
            cdk.KindlingWorker(stack, f"W{len(stack.node.children)}", function_code=tmp_path, layer_code=tmp_path,
                               **bad)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_construct_makes_the_templates_resources(synthesized, scenario):
    expected = cfn.sam_resources(SCENARIOS[scenario])
    got = {k: v for k, v in cfn.cdk_resources(synthesized[scenario]).items() if v["Type"] != "AWS::CDK::Metadata"}
    # Where the code is differs (an S3 location SAM's build makes; a CDK asset); SAM tags its functions.
    expected["WorkerFunction"]["Properties"].pop("Tags")
    for name in ("KindlingLayer", "KindlingValkeyLayer", "WorkerFunction"):
        for which in (expected, got):
            for key in ("Content", "Code"):
                which.get(name, {"Properties": {}})["Properties"].pop(key, None)
    assert {k: v["Type"] for k, v in got.items()} == {k: v["Type"] for k, v in expected.items()}
    for name, resource in expected.items():
        assert got[name] == resource, name


def test_the_valkey_layer_goes_on_top_of_the_kindling_layer_only_with_a_valkey_url(synthesized):
    for scenario, parameters in SCENARIOS.items():
        function = cfn.cdk_resources(synthesized[scenario])["WorkerFunction"]["Properties"]
        valkey = bool(parameters.get("ValkeyUrl") or parameters.get("ValkeyUrlSecretArn"))
        assert len(function["Layers"]) == (2 if valkey else 1), scenario


def test_the_construct_refuses_a_valkey_url_without_the_valkey_layer(tmp_path, aws_cdk, cdk):
    stack = aws_cdk.Stack(aws_cdk.App(outdir=str(tmp_path / "cdk.out")), "no-valkey-layer")
    code = tmp_path / "code"
    code.mkdir()
    with pytest.raises(ValueError, match="valkey_layer_code.*build-KindlingValkeyLayer"):
        cdk.KindlingWorker(stack, "W", function_code=code, layer_code=code, valkey_url="redis://cache:6379")


def test_the_table_keys_indexes_and_redrive_are_the_templates(synthesized):
    """The figures a reader looks for first, spelled out (the comparison above covers them too)."""
    got = cfn.cdk_resources(synthesized["defaults"])
    table = got["ResultsTable"]["Properties"]
    assert table["KeySchema"] == [{"AttributeName": "id", "KeyType": "HASH"}]
    assert [i["IndexName"] for i in table["GlobalSecondaryIndexes"]] == ["by_task", "by_status"]
    jobs = got["JobsQueue"]["Properties"]
    assert jobs["VisibilityTimeout"] == "180" and jobs["MessageRetentionPeriod"] == "1209600"
    assert jobs["RedrivePolicy"] == {"deadLetterTargetArn": "{{JobsDeadLetterQueue.Arn}}", "maxReceiveCount": "100"}
    mapping = got["WorkerFunctionJobs"]["Properties"]
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": "10"}


def test_the_cdk_app_kindling_init_writes_synthesizes_the_worker(tmp_path, monkeypatch, aws_cdk):
    """docs/examples/cdk_app.py is the app.py of ``kindling init --iac cdk``; run as ``cdk
    synth`` runs it, it makes the worker and template.yaml's outputs."""
    import runpy

    from support import ROOT

    example = ROOT / "docs/examples/cdk_app.py"
    assert example.read_text() == (ROOT / "layers/kindling/kindling/scaffold_files/cdk/app.py.tmpl").read_text()
    (tmp_path / ".build/function").mkdir(parents=True)
    (tmp_path / ".build/layer/python").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    app = runpy.run_path(str(example), run_name="__main__")["app"]
    template = app.synth().get_stack_by_name("kindling").template  # the assembly its own synth() made
    function = next(r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function")
    assert function["Properties"]["Environment"]["Variables"]["KINDLING_MAX_ATTEMPTS"] == "3"
    assert function["Properties"]["MemorySize"] == 512
    # Without a Valkey URL: none of the outputs the template makes only with one.
    assert set(template["Outputs"]) == set(templates.template()["Outputs"]) - {"ProducerPolicyArn", "ValkeyLayerArn"}


def test_a_project_made_by_kindling_init_iac_cdk_builds_and_synthesizes_with_make(tmp_path, aws_cdk):
    """The scaffold's own commands: ``make synth`` builds the function and the layer into
    .build/ and runs the CDK CLI (infra/cdk/install's) on app.py; the assets it stages are
    the built function (the tasks, with bytecode) and the kindling layer."""
    import json
    import subprocess
    import sys

    from kindling.tools import cli
    from support import ROOT

    project = tmp_path / "app"
    assert cli.main(["init", str(project), "--iac", "cdk"]) == 0
    subprocess.run([str(ROOT / "infra/cdk/install")], check=True, capture_output=True, timeout=330)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "CDK_DISABLE_VERSION_CHECK": "1"}
    cdk_cli = ROOT / "infra/cdk/node_modules/.bin/cdk"
    done = subprocess.run(["make", "synth", f"PYTHON={sys.executable}", f"CDK={cdk_cli}", "STACK=jobs"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    template = json.loads((project / "cdk.out/jobs.template.json").read_text())
    assert {r["Type"] for r in template["Resources"].values()} >= {
        "AWS::Lambda::Function", "AWS::Lambda::LayerVersion", "AWS::Lambda::EventSourceMapping", "AWS::SQS::Queue",
        "AWS::DynamoDB::Table"}
    assets = [p for p in (project / "cdk.out").glob("asset.*") if p.is_dir()]
    staged = {p.relative_to(a).as_posix() for a in assets for p in a.rglob("*") if p.is_file()}
    assert {"tasks.py", "app.py", "python/kindling/handler.pyc"} <= staged  # the layer: sourceless bytecode
    assert any(name.startswith("__pycache__/tasks.") for name in staged)
