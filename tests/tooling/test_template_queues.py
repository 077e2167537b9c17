"""template.yaml's named queues, rendered from one list by infra/queues/render.py: each a copy
of the jobs queue with its own dead-letter queue, policy, trigger, concurrency limit and
alarms, in the worker's environment, the role, the managed policies and the outputs
producers read; template.yaml is its own rendering."""

import json
import re
import sys
from pathlib import Path

import pytest
from cfnlint.decode import cfn_yaml
from kindling.core import routing

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "infra/queues"))
import render  # noqa: E402

NAMES = ["reports", "bulk_2", "a-b:3", "thumbnails", "emails"]
IDS = ["Reports", "Bulk2", "AB", "Thumbnails", "Emails"]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """template.yaml rendered with five named queues, parsed as CloudFormation reads it."""
    path = tmp_path_factory.mktemp("queues") / "template.yaml"
    path.write_text(render.render((ROOT / "template.yaml").read_text(), NAMES))
    return cfn_yaml.load(str(path))


def _without(props: dict, *keys: str) -> dict:
    return {k: v for k, v in props.items() if k not in keys}


def _statements(policy: dict) -> dict:
    return {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"] if "Sid" in s}


def test_template_yaml_is_its_own_rendering_of_the_list_it_carries():
    text = (ROOT / "template.yaml").read_text()
    assert render.render(text, render.listed(text)) == text
    assert render.main(["--check"]) == 0


def test_rendering_twice_or_over_another_list_gives_the_same_template():
    text = (ROOT / "template.yaml").read_text()
    five = render.render(text, NAMES)
    assert render.render(five, NAMES) == five
    assert render.render(render.render(text, ["x", "y"]), NAMES) == five
    assert render.render(five, render.listed(text)) == text
    assert render.listed(five) == ["reports", "bulk_2", "a-b:3", "thumbnails", "emails"]


@pytest.mark.parametrize("n", range(5))
def test_a_named_queue_is_the_jobs_queue_with_its_own_name_and_dead_letter_queue(rendered, n):
    res, qid, name = rendered["Resources"], IDS[n], NAMES[n].split(":")[0]
    queue, dlq = res[f"Queue{qid}"], res[f"Queue{qid}DeadLetterQueue"]
    jobs = res["JobsQueue"]["Properties"]
    assert _without(queue["Properties"], "QueueName", "RedrivePolicy") == _without(jobs, "QueueName", "RedrivePolicy")
    assert queue["Properties"]["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [f"Queue{qid}DeadLetterQueue", "Arn"]},
        "maxReceiveCount": {"Ref": "MaxReceiveCount"}}
    assert _without(dlq["Properties"], "QueueName") == _without(res["JobsDeadLetterQueue"]["Properties"], "QueueName")
    # Named after the stack and the routing name, .fifo when the jobs queue is.
    assert queue["Properties"]["QueueName"] == {"Fn::If": [
        "UseFifo", {"Fn::Sub": f"${{AWS::StackName}}-{name}.fifo"}, {"Fn::Sub": f"${{AWS::StackName}}-{name}"}]}


@pytest.mark.parametrize("n", range(5))
def test_a_named_queue_triggers_the_worker_as_the_jobs_queue_does_with_its_own_concurrency(rendered, n):
    qid = IDS[n]
    props = rendered["Resources"][f"Queue{qid}Jobs"]["Properties"]
    jobs = rendered["Resources"]["WorkerFunction"]["Properties"]["Events"]["Jobs"]["Properties"]
    assert props["EventSourceArn"] == {"Fn::GetAtt": [f"Queue{qid}", "Arn"]}
    assert props["FunctionName"] == {"Ref": "WorkerFunction"}
    assert props["ScalingConfig"] == {"MaximumConcurrency": {"Ref": f"Queue{qid}MaxConcurrency"}}
    # Provisioned pollers (MinimumPollers) are the jobs queue's; a named queue keeps its own limit.
    assert _without(props, "EventSourceArn", "FunctionName", "ScalingConfig") == _without(
        jobs, "Queue", "ScalingConfig", "ProvisionedPollerConfig")
    limit = rendered["Parameters"][f"Queue{qid}MaxConcurrency"]
    assert (limit["MinValue"], limit["MaxValue"]) == (2, 1000)  # Lambda's own bounds for MaximumConcurrency
    assert limit["Default"] == (3 if NAMES[n].endswith(":3") else 2)


@pytest.mark.parametrize("n", range(5))
def test_a_named_queue_has_the_jobs_queues_policy_and_alarms(rendered, n):
    res, qid = rendered["Resources"], IDS[n]
    jobs_policy = res["QueuesTlsOnlyPolicy"]["Properties"]
    policy = res[f"Queue{qid}Policy"]["Properties"]
    assert policy["Queues"] == [{"Ref": f"Queue{qid}"}, {"Ref": f"Queue{qid}DeadLetterQueue"}]
    # The jobs queue's statements (TLS only, the producer accounts' SendMessage) over this queue.
    as_named = json.dumps(jobs_policy["PolicyDocument"]).replace('"JobsQueue"', f'"Queue{qid}"').replace(
        '"JobsDeadLetterQueue"', f'"Queue{qid}DeadLetterQueue"')
    assert policy["PolicyDocument"] == json.loads(as_named)
    for kind, jobs_alarm, target in (("DeadLetterQueueAlarm", "DeadLetterQueueAlarm", f"Queue{qid}DeadLetterQueue"),
                                     ("OldestMessageAlarm", "OldestMessageAlarm", f"Queue{qid}")):
        alarm, base = res[f"Queue{qid}{kind}"], res[jobs_alarm]
        assert alarm["Condition"] == base["Condition"] == "CreateAlarms"
        props = alarm["Properties"]
        assert props["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [target, "QueueName"]}}]
        assert _without(props, "Dimensions", "AlarmDescription") == _without(base["Properties"], "Dimensions",
                                                                             "AlarmDescription")


def test_the_worker_reads_consumes_and_dead_letters_every_named_queue(rendered):
    res = rendered["Resources"]
    statements = _statements(res["WorkerRole"]["Properties"]["Policies"][0])
    queues = [{"Fn::GetAtt": [f"Queue{q}", "Arn"]} for q in IDS]
    dlqs = [{"Fn::GetAtt": [f"Queue{q}DeadLetterQueue", "Arn"]} for q in IDS]
    assert statements["ConsumeJobs"]["Resource"] == [{"Fn::GetAtt": ["JobsQueue", "Arn"]}, *queues]
    assert statements["EnqueueJobs"]["Resource"] == [{"Fn::GetAtt": ["JobsQueue", "Arn"]}, *queues]
    assert statements["MoveDeadJobs"]["Resource"] == [{"Fn::GetAtt": ["JobsDeadLetterQueue", "Arn"]}, *dlqs]
    assert _statements(res["ProducersPolicy"]["Properties"])["SendJobs"]["Resource"] == [
        {"Fn::GetAtt": ["JobsQueue", "Arn"]}, *queues]
    both = [arn for pair in zip(queues, dlqs, strict=True) for arn in pair]
    assert _statements(res["OperatorsPolicy"]["Properties"])["RetryAndRedrive"]["Resource"] == [
        {"Fn::GetAtt": ["JobsQueue", "Arn"]}, {"Fn::GetAtt": ["JobsDeadLetterQueue", "Arn"]}, *both]


def test_the_worker_maps_each_source_queue_to_its_own_dead_letter_queue(rendered):
    env = rendered["Resources"]["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    separator, items = env["KINDLING_DLQ_URLS"]["Fn::Join"]
    assert separator == ","
    assert items == [{"Fn::Sub": "${JobsQueue.Arn}=${JobsDeadLetterQueue}"}] + [
        {"Fn::Sub": f"${{Queue{q}.Arn}}=${{Queue{q}DeadLetterQueue}}"} for q in IDS]


def test_producers_and_the_worker_get_the_same_routes(rendered):
    routes = rendered["Outputs"]["QueueRoutes"]["Value"]
    env = rendered["Resources"]["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    assert env["KINDLING_QUEUES"] == routes
    assert routes == {"Fn::Join": [",", [{"Fn::Sub": f"{name.split(':')[0]}=${{Queue{q}}}"}
                                         for name, q in zip(NAMES, IDS, strict=True)]]}
    for q in IDS:
        assert rendered["Outputs"][f"Queue{q}Url"]["Value"] == {"Ref": f"Queue{q}"}
        assert rendered["Outputs"][f"Queue{q}DeadLetterQueueUrl"]["Value"] == {"Ref": f"Queue{q}DeadLetterQueue"}


def test_without_named_queues_the_template_has_none_and_no_routes():
    template = cfn_yaml.load(str(ROOT / "template.yaml"))
    assert render.listed((ROOT / "template.yaml").read_text()) == []
    assert "QueueRoutes" not in template["Outputs"]
    assert "KINDLING_QUEUES" not in template["Resources"]["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    assert {k for k, v in template["Resources"].items() if v["Type"] == "AWS::SQS::Queue"} == {
        "JobsQueue", "JobsDeadLetterQueue"}


def test_the_rendered_template_passes_cfn_lint(tmp_path):
    from cfnlint.api import lint_all

    path = tmp_path / "template.yaml"
    path.write_text(render.render((ROOT / "template.yaml").read_text(), NAMES))
    # Errors and warnings, as `sam validate --lint` (make validate) reports them.
    found = [str(m) for m in lint_all(path.read_text()) if m.rule.id[0] in "EW"]
    assert found == []


@pytest.mark.parametrize("name", ["reports", "bulk_2", "a-b", "x" * 40, "defaults"])
def test_the_renderer_takes_every_name_the_producer_can_route(name):
    assert routing.check_name(name) is None
    assert render.parse([name])[0].name == name


@pytest.mark.parametrize("name", ["", "default", "bad.name", "has space", "x" * 41])
def test_the_renderer_refuses_a_name_the_producer_cannot_route(name):
    assert name == "" or name == routing.DEFAULT or routing.check_name(name) is not None
    with pytest.raises(ValueError):
        render.QueueSpec(name)


@pytest.mark.parametrize("specs, problem", [(["a-b", "a_b"], "share"), (["x", "x"], "share"),
                                            (["x:1"], "2-1000"), (["x:many"], "number")])
def test_the_renderer_refuses_names_that_would_collide_and_limits_lambda_refuses(specs, problem):
    with pytest.raises(ValueError, match=problem):
        render.parse(specs)


def test_a_rendering_built_elsewhere_points_at_the_repositorys_code():
    text = render.absolute(render.render((ROOT / "template.yaml").read_text(), ["reports"]))
    uris = re.findall(r"^\s+(?:CodeUri|ContentUri): (\S+)$", text, re.M)
    assert uris and all(Path(u).is_absolute() and Path(u).is_dir() for u in uris)
