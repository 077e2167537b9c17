"""template.yaml's start-up and scaling options: SnapStart on a published alias, and the SQS
trigger's provisioned mode (pollers) or its default mode (a concurrency limit), never both.

What SAM makes of the template is read from SAM's own translator (the one `sam deploy`
runs), with the parameters given."""

from __future__ import annotations

import copy

import pytest
from support.templates import template


@pytest.fixture(scope="module")
def committed() -> dict:
    return template()


def translate(base: dict, **parameters) -> dict:
    """The CloudFormation SAM makes of ``base`` with these parameter values."""
    import os

    from samtranslator.translator.transform import transform

    tpl = copy.deepcopy(base)
    for resource in tpl["Resources"].values():  # `sam build` points these at S3 before the transform
        for key in ("CodeUri", "ContentUri"):
            if key in resource.get("Properties", {}):
                resource["Properties"][key] = "s3://bucket/key"
    saved = os.environ.get("AWS_DEFAULT_REGION")
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
    try:
        return transform(tpl, {k: str(v) for k, v in parameters.items()}, None)
    finally:
        if saved is None:
            del os.environ["AWS_DEFAULT_REGION"]
        else:
            os.environ["AWS_DEFAULT_REGION"] = saved


def resolve(value, conditions: dict):
    """``Fn::If`` resolved with the conditions' truth values given."""
    if isinstance(value, dict) and set(value) == {"Fn::If"}:
        name, yes, no = value["Fn::If"]
        return resolve(yes if conditions[name] else no, conditions)
    if isinstance(value, dict):
        resolved = {k: resolve(v, conditions) for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v != {"Ref": "AWS::NoValue"}}
    return value


def the_mapping(cfn: dict) -> dict:
    [mapping] = [r for r in cfn["Resources"].values() if r["Type"] == "AWS::Lambda::EventSourceMapping"]
    return mapping["Properties"]


def test_snapstart_is_a_parameter_off_by_default(committed):
    parameter = committed["Parameters"]["SnapStart"]
    assert parameter["Default"] == "false" and parameter["AllowedValues"] == ["false", "true"]
    worker = committed["Resources"]["WorkerFunction"]["Properties"]
    assert worker["AutoPublishAlias"] == "live"
    assert resolve(worker["SnapStart"], {"UseSnapStart": True}) == {"ApplyOn": "PublishedVersions"}
    assert resolve(worker["SnapStart"], {"UseSnapStart": False}) == {"ApplyOn": "None"}


def test_the_queue_drives_the_published_alias_so_snapstart_applies_to_its_batches(committed):
    cfn = translate(committed, SnapStart="true")
    resources = cfn["Resources"]
    [alias] = [k for k, r in resources.items() if r["Type"] == "AWS::Lambda::Alias"]
    assert resources[alias]["Properties"]["Name"] == "live"
    assert the_mapping(cfn)["FunctionName"] == {"Ref": alias}
    function = resources["WorkerFunction"]["Properties"]
    assert function["SnapStart"]["ApplyOn"] == {"Fn::If": ["UseSnapStart", "PublishedVersions", "None"]}
    # The schedules invoke the function: LocalStack deploys no reference to the alias SAM makes
    # outside the function's own events (a stack with the ticker failed to create).
    for rule in ("DrainRule", "TickRule"):
        assert resources[rule]["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": ["WorkerFunction", "Arn"]}
    for permission in ("DrainPermission", "TickPermission"):
        assert resources[permission]["Properties"]["FunctionName"] == {"Ref": "WorkerFunction"}


def test_provisioned_pollers_are_parameters_off_by_default(committed):
    params = committed["Parameters"]
    assert params["MinimumPollers"]["Default"] == 0
    assert params["MinimumPollers"]["MaxValue"] == 200 and params["MaximumPollers"]["MaxValue"] == 2000
    mapping = committed["Resources"]["WorkerFunction"]["Properties"]["Events"]["Jobs"]["Properties"]
    on = {"UseProvisionedPollers": True, "UseMaxConcurrency": False, "BatchingWindow": False}
    off = {"UseProvisionedPollers": False, "UseMaxConcurrency": True, "BatchingWindow": False}
    assert resolve(mapping, on)["ProvisionedPollerConfig"] == {"MinimumPollers": {"Ref": "MinimumPollers"},
                                                               "MaximumPollers": {"Ref": "MaximumPollers"}}
    assert "ScalingConfig" not in resolve(mapping, on)
    assert "ProvisionedPollerConfig" not in resolve(mapping, off)
    assert resolve(mapping, off)["ScalingConfig"] == {"MaximumConcurrency": {"Ref": "MaxConcurrency"}}


def test_provisioned_pollers_with_a_concurrency_limit_are_refused_at_deploy(committed):
    """Lambda cannot combine them: the template's rule refuses the stack before anything is made."""
    [rule] = [r for r in committed["Rules"].values()
              if r.get("RuleCondition") == {"Fn::Not": [{"Fn::Equals": [{"Ref": "MinimumPollers"}, "0"]}]}]
    [assertion] = rule["Assertions"]
    assert assertion["Assert"] == {"Fn::Equals": [{"Ref": "MaxConcurrency"}, "0"]}
    assert "MaxConcurrency=0" in assertion["AssertDescription"]


def test_the_translated_mapping_carries_the_pollers(committed):
    mapping = the_mapping(translate(committed, MinimumPollers=5, MaximumPollers=50, MaxConcurrency=0))
    assert mapping["ProvisionedPollerConfig"] == {
        "Fn::If": ["UseProvisionedPollers", {"MinimumPollers": {"Ref": "MinimumPollers"},
                                             "MaximumPollers": {"Ref": "MaximumPollers"}}, {"Ref": "AWS::NoValue"}]}


def test_snapstart_on_python_3_11_is_refused_at_deploy(committed):
    """Lambda offers SnapStart from Python 3.12: the rule refuses the stack, as the construct does."""
    rule = committed["Rules"]["SnapStartRuntime"]
    assert rule["RuleCondition"] == {"Fn::Equals": [{"Ref": "SnapStart"}, "true"]}
    [assertion] = rule["Assertions"]
    assert assertion["Assert"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "Runtime"}, "python3.11"]}]}
