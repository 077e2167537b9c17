"""template.yaml's worker writes the metrics its alarms watch: the error-rate alarm's
namespace and ``service`` dimension are the worker's own POWERTOOLS_* variables."""

from pathlib import Path

from cfnlint.decode import cfn_yaml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = cfn_yaml.load(str(ROOT / "template.yaml"))
RES = TEMPLATE["Resources"]


def _alarm_metrics() -> list[dict]:
    return [m["MetricStat"]["Metric"] for m in RES["JobErrorRateAlarm"]["Properties"]["Metrics"] if "MetricStat" in m]


def test_the_error_rate_alarm_watches_the_service_and_namespace_the_worker_writes():
    env = RES["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    watched = _alarm_metrics()
    assert {m["MetricName"] for m in watched} == {"JobsFailed", "JobsDead", "JobsSucceeded"}
    for metric in watched:
        assert metric["Dimensions"] == [{"Name": "service", "Value": env.get("POWERTOOLS_SERVICE_NAME")}]
        assert metric["Namespace"] == env.get("POWERTOOLS_METRICS_NAMESPACE")


def test_x_ray_active_tracing_is_a_parameter_of_the_worker_with_the_rights_it_needs():
    parameter = TEMPLATE["Parameters"]["Tracing"]
    assert parameter["AllowedValues"] == ["Active", "PassThrough"] and parameter["Default"] == "PassThrough"
    assert RES["WorkerFunction"]["Properties"]["Tracing"] == {"Ref": "Tracing"}
    assert TEMPLATE["Conditions"]["UseActiveTracing"] == {"Fn::Equals": [{"Ref": "Tracing"}, "Active"]}
    # The worker's role is its own (not SAM's), so the write rights SAM would add are added here.
    managed = RES["WorkerRole"]["Properties"]["ManagedPolicyArns"]
    assert {"Fn::If": ["UseActiveTracing",
                       {"Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/AWSXrayWriteOnlyAccess"},
                       {"Ref": "AWS::NoValue"}]} in managed
