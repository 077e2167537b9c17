"""The optional alarms in template.yaml: off by default, and watching what kindling emits
(read with two named queues rendered in, each with the jobs queue's two alarms)."""

from kindling.shared import metrics
from support.templates import template

TEMPLATE = template(["reports", "bulk"])
IDS = ("Reports", "Bulk")


def test_alarms_are_off_unless_asked_for():
    assert TEMPLATE["Parameters"]["Alarms"]["Default"] == "false"
    alarms = {k: v for k, v in TEMPLATE["Resources"].items() if v["Type"] == "AWS::CloudWatch::Alarm"}
    named = {f"Queue{n}{a}" for n in IDS for a in ("DeadLetterQueueAlarm", "OldestMessageAlarm")}
    assert set(alarms) == {"DeadLetterQueueAlarm", "OldestMessageAlarm", "WorkerThrottlesAlarm", "JobErrorRateAlarm",
                           *named}
    # A named queue's alarms too: only with Alarms=true.
    assert {a["Condition"] for a in alarms.values()} == {"CreateAlarms"}


def test_the_error_rate_alarm_reads_the_emf_metrics_the_worker_writes(monkeypatch):
    alarm = TEMPLATE["Resources"]["JobErrorRateAlarm"]["Properties"]
    stats = [m["MetricStat"]["Metric"] for m in alarm["Metrics"] if "MetricStat" in m]
    assert {s["MetricName"] for s in stats} == {"JobsFailed", "JobsDead", "JobsSucceeded"}
    assert {s["MetricName"] for s in stats} <= set(metrics._COUNTS.values())
    # The template's defaults are the worker's own when the Powertools variables are unset.
    monkeypatch.delenv("POWERTOOLS_METRICS_NAMESPACE", raising=False)
    monkeypatch.delenv("POWERTOOLS_SERVICE_NAME", raising=False)
    params = TEMPLATE["Parameters"]
    assert params["MetricsNamespace"]["Default"] == metrics.namespace()
    assert params["MetricsService"]["Default"] == metrics.service()
    assert all(s["Namespace"] == {"Ref": "MetricsNamespace"} for s in stats)
    assert all(s["Dimensions"] == [{"Name": "service", "Value": {"Ref": "MetricsService"}}] for s in stats)
    # ... and the totals document carries the service dimension alone.
    totals = metrics.documents([], set(), at_ms=0)[-1]["_aws"]["CloudWatchMetrics"][0]
    assert totals["Dimensions"] == [["service"]]


def test_the_queue_alarms_watch_the_template_queues():
    res = TEMPLATE["Resources"]
    dlq = res["DeadLetterQueueAlarm"]["Properties"]
    assert dlq["MetricName"] == "ApproximateNumberOfMessagesVisible" and dlq["Threshold"] == 0
    assert dlq["Dimensions"][0]["Value"] == {"Fn::GetAtt": ["JobsDeadLetterQueue", "QueueName"]}
    oldest = res["OldestMessageAlarm"]["Properties"]
    assert oldest["MetricName"] == "ApproximateAgeOfOldestMessage"
    assert oldest["Dimensions"][0]["Value"] == {"Fn::GetAtt": ["JobsQueue", "QueueName"]}
    for n in IDS:  # the same two alarms on each named queue, its own DLQ and queue
        props = {k: v for k, v in res[f"Queue{n}DeadLetterQueueAlarm"]["Properties"].items() if k != "AlarmDescription"}
        assert props == {**{k: v for k, v in dlq.items() if k != "AlarmDescription"},
                         "Dimensions": [{"Name": "QueueName",
                                         "Value": {"Fn::GetAtt": [f"Queue{n}DeadLetterQueue", "QueueName"]}}]}
        props = {k: v for k, v in res[f"Queue{n}OldestMessageAlarm"]["Properties"].items() if k != "AlarmDescription"}
        assert props == {**{k: v for k, v in oldest.items() if k != "AlarmDescription"},
                         "Dimensions": [{"Name": "QueueName", "Value": {"Fn::GetAtt": [f"Queue{n}", "QueueName"]}}]}
    assert res["WorkerThrottlesAlarm"]["Properties"]["Dimensions"][0]["Value"] == {"Ref": "WorkerFunction"}
