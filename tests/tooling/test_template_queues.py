"""template.yaml's named queues (Queue1Name, Queue2Name): each a copy of the jobs queue with
its own dead-letter queue, trigger and concurrency limit, in the worker's environment, the
role and the outputs producers read."""

import re
from pathlib import Path

import pytest
from cfnlint.decode import cfn_yaml
from kindling import routing

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = cfn_yaml.load(str(ROOT / "template.yaml"))
RES = TEMPLATE["Resources"]
NO_VALUE = {"Ref": "AWS::NoValue"}
SLOTS = (1, 2)


def _without(props: dict, *keys: str) -> dict:
    return {k: v for k, v in props.items() if k not in keys}


@pytest.mark.parametrize("n", SLOTS)
def test_a_named_queue_is_the_jobs_queue_with_its_own_name_and_dead_letter_queue(n):
    queue, dlq = RES[f"Queue{n}"], RES[f"Queue{n}DeadLetterQueue"]
    assert queue["Condition"] == dlq["Condition"] == f"HasQueue{n}"
    jobs = RES["JobsQueue"]["Properties"]
    assert _without(queue["Properties"], "QueueName", "RedrivePolicy") == _without(jobs, "QueueName", "RedrivePolicy")
    assert queue["Properties"]["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [f"Queue{n}DeadLetterQueue", "Arn"]},
        "maxReceiveCount": {"Ref": "MaxReceiveCount"}}
    assert _without(dlq["Properties"], "QueueName") == _without(RES["JobsDeadLetterQueue"]["Properties"], "QueueName")
    # Named after the stack and the routing name, .fifo when the jobs queue is.
    assert queue["Properties"]["QueueName"] == {"Fn::If": [
        "UseFifo", {"Fn::Sub": f"${{AWS::StackName}}-${{Queue{n}Name}}.fifo"},
        {"Fn::Sub": f"${{AWS::StackName}}-${{Queue{n}Name}}"}]}


@pytest.mark.parametrize("n", SLOTS)
def test_a_named_queue_triggers_the_worker_as_the_jobs_queue_does_with_its_own_concurrency(n):
    mapping = RES[f"Queue{n}Jobs"]
    assert mapping["Type"] == "AWS::Lambda::EventSourceMapping" and mapping["Condition"] == f"HasQueue{n}"
    props = mapping["Properties"]
    jobs = RES["WorkerFunction"]["Properties"]["Events"]["Jobs"]["Properties"]
    assert props["EventSourceArn"] == {"Fn::GetAtt": [f"Queue{n}", "Arn"]}
    assert props["FunctionName"] == {"Ref": "WorkerFunction"}
    assert props["ScalingConfig"] == {"MaximumConcurrency": {"Ref": f"Queue{n}MaxConcurrency"}}
    assert _without(props, "EventSourceArn", "FunctionName", "ScalingConfig") == _without(jobs, "Queue",
                                                                                          "ScalingConfig")
    limit = TEMPLATE["Parameters"][f"Queue{n}MaxConcurrency"]
    assert (limit["MinValue"], limit["MaxValue"]) == (2, 1000)  # Lambda's own bounds for MaximumConcurrency


def test_the_worker_reads_consumes_and_dead_letters_every_deployed_queue():
    statements = {s["Sid"]: s for s in RES["WorkerRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
                  if "Sid" in s}
    named = [{"Fn::If": [f"HasQueue{n}", {"Fn::GetAtt": [f"Queue{n}", "Arn"]}, NO_VALUE]} for n in SLOTS]
    named_dlqs = [{"Fn::If": [f"HasQueue{n}", {"Fn::GetAtt": [f"Queue{n}DeadLetterQueue", "Arn"]}, NO_VALUE]}
                  for n in SLOTS]
    assert statements["ConsumeJobs"]["Resource"] == [{"Fn::GetAtt": ["JobsQueue", "Arn"]}, *named]
    assert statements["MoveDeadJobs"]["Resource"] == [{"Fn::GetAtt": ["JobsDeadLetterQueue", "Arn"]}, *named_dlqs]


def test_the_worker_maps_each_source_queue_to_its_own_dead_letter_queue():
    env = RES["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    separator, items = env["KINDLING_DLQ_URLS"]["Fn::Join"]
    assert separator == ","
    assert items[0] == {"Fn::Sub": "${JobsQueue.Arn}=${JobsDeadLetterQueue}"}
    assert items[1:] == [{"Fn::If": [f"HasQueue{n}", {"Fn::Sub": f"${{Queue{n}.Arn}}=${{Queue{n}DeadLetterQueue}}"},
                                     NO_VALUE]} for n in SLOTS]


def test_producers_and_the_worker_get_the_same_routes():
    routes = TEMPLATE["Outputs"]["QueueRoutes"]
    assert routes["Condition"] == "HasNamedQueues"
    assert TEMPLATE["Conditions"]["HasNamedQueues"] == {"Fn::Or": [{"Condition": f"HasQueue{n}"} for n in SLOTS]}
    env = RES["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    assert env["KINDLING_QUEUES"] == {"Fn::If": ["HasNamedQueues", routes["Value"], NO_VALUE]}
    assert routes["Value"] == {"Fn::Join": [",", [
        {"Fn::If": [f"HasQueue{n}", {"Fn::Sub": f"${{Queue{n}Name}}=${{Queue{n}}}"}, NO_VALUE]} for n in SLOTS]]}
    for n in SLOTS:
        assert TEMPLATE["Outputs"][f"Queue{n}Url"] == {"Condition": f"HasQueue{n}", "Value": {"Ref": f"Queue{n}"},
                                                      "Description": f"The named queue Queue{n}Name"}


@pytest.mark.parametrize("name", ["", "reports", "bulk_2", "a-b", "x" * 40, "default", "defaults", "bad.name",
                                  "has space", "x" * 41])
def test_the_template_takes_exactly_the_names_the_producer_can_route(name):
    pattern = TEMPLATE["Parameters"]["Queue1Name"]["AllowedPattern"]
    assert TEMPLATE["Parameters"]["Queue2Name"]["AllowedPattern"] == pattern
    deployable = re.fullmatch(pattern, name) is not None
    routable = name != "" and name != routing.DEFAULT and routing.check_name(name) is None
    assert deployable == (routable or name == "")  # "": the slot is empty
