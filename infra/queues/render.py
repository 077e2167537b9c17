#!/usr/bin/env python3
"""Render template.yaml's named queues from one list of names.

    infra/queues/render.py reports bulk:5 thumbnails   # rewrite template.yaml with these three
    infra/queues/render.py --check                     # exit 1 when template.yaml is not its own rendering
    infra/queues/render.py --out build/t.yaml a b c    # write a rendering elsewhere (paths made absolute)
    make queues QUEUES="reports bulk:5"

Each named queue is the jobs queue again under the name ``<stack>-<name>``: its own
dead-letter queue and redrive policy, its queue policy (TLS only; the producer accounts'
SendMessage), an event source mapping on the worker with its own ``MaximumConcurrency``
(parameter ``Queue<Id>MaxConcurrency``; ``name:N`` sets its default, else 2), the two
alarms the jobs queue has under ``Alarms=true``, its place in the worker's role, the
producers' and operators' managed policies, the worker's ``KINDLING_QUEUES`` and
``KINDLING_DLQ_URLS``, and the outputs (``QueueRoutes``, ``Queue<Id>Url``,
``Queue<Id>DeadLetterQueueUrl``).

Why a generator and not ``AWS::LanguageExtensions``' ``Fn::ForEach``: checkov (the pinned
3.3.30) does not expand ``Fn::ForEach``, so every resource made by it escapes the checks
(a queue without encryption inside a loop passes, the same queue outside fails); and a
loop only makes map entries, never list items or joined strings, so the ARN lists of the
role and the managed policies, ``KINDLING_QUEUES`` and ``KINDLING_DLQ_URLS`` could not
follow it. Rendered, every queue is a plain resource that checkov, cfn-lint, SAM and
LocalStack all see; tests/tooling/test_template_queues.py holds template.yaml equal to its
own rendering.

The template marks each place with a pair of comment lines, ``# >>> named queues: <part>``
and ``# <<< named queues: <part>``; what lies between is this script's. The first marker
(``parameters``) carries the list: ``# >>> named queues: parameters [reports, bulk:5]``.
Standard library only.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
NAME = re.compile(r"(?!default$)[A-Za-z0-9_-]{1,40}")  # kindling.core.routing.check_name's rule
DEFAULT_CONCURRENCY = 2
_MARK = re.compile(r"^(?P<indent> *)# >>> named queues: (?P<part>\w+)(?: \[(?P<names>[^\]]*)\])?\s*$")


class QueueSpec:
    """One named queue: its routing name, its logical-id part and its default concurrency."""

    __slots__ = ("name", "id", "concurrency")

    def __init__(self, name: str, concurrency: int = DEFAULT_CONCURRENCY):
        if not NAME.fullmatch(name):
            raise ValueError(f"queue name {name!r}: 1-40 of A-Z a-z 0-9 _ -, not 'default'")
        if not 2 <= concurrency <= 1000:
            raise ValueError(f"queue {name!r}: concurrency {concurrency} is outside Lambda's 2-1000")
        self.name, self.concurrency = name, concurrency
        self.id = "".join(part[:1].upper() + part[1:] for part in re.split(r"[-_]", name) if part)

    def __str__(self) -> str:
        return self.name if self.concurrency == DEFAULT_CONCURRENCY else f"{self.name}:{self.concurrency}"


def parse(specs: list[str]) -> list[QueueSpec]:
    """``["reports", "bulk:5"]`` as specs; refuses a repeated name or two names with one id."""
    out: list[QueueSpec] = []
    for spec in specs:
        name, _, limit = spec.strip().partition(":")
        try:
            concurrency = int(limit) if limit else DEFAULT_CONCURRENCY
        except ValueError:
            raise ValueError(f"queue {spec!r}: the concurrency after ':' must be a number") from None
        out.append(QueueSpec(name, concurrency))
    ids: dict[str, str] = {}
    for q in out:
        if q.id in ids:
            raise ValueError(f"queues {ids[q.id]!r} and {q.name!r} would share the resource names Queue{q.id}*")
        ids[q.id] = q.name
    return out


def _parameters(queues: list[QueueSpec]) -> list[str]:
    lines: list[str] = []
    for q in queues:
        lines += [f"Queue{q.id}MaxConcurrency:",
                  "  Type: Number",
                  f"  Default: {q.concurrency}",
                  "  MinValue: 2",
                  "  MaxValue: 1000",
                  f"  Description: Most concurrent worker invocations the named queue {q.name} may drive "
                  "(its rate limit)."]
    return lines


def _alarm(q: QueueSpec, suffix: str, what: str, metric: str, queue: str, periods: int, threshold: str) -> list[str]:
    return [f"Queue{q.id}{suffix}:",
            "  Type: AWS::CloudWatch::Alarm",
            "  Condition: CreateAlarms",
            "  Properties:",
            f"    AlarmDescription: !Sub \"kindling ${{AWS::StackName}}: {what}\"",
            "    Namespace: AWS/SQS",
            f"    MetricName: {metric}",
            "    Dimensions:",
            f"      - {{Name: QueueName, Value: !GetAtt {queue}.QueueName}}",
            "    Statistic: Maximum",
            "    Period: 60",
            f"    EvaluationPeriods: {periods}",
            f"    Threshold: {threshold}",
            "    ComparisonOperator: GreaterThanThreshold",
            "    TreatMissingData: notBreaching",
            "    AlarmActions: !If [NotifyAlarms, [!Ref AlarmTopicArn], !Ref AWS::NoValue]",
            "    OKActions: !If [NotifyAlarms, [!Ref AlarmTopicArn], !Ref AWS::NoValue]",
            ""]


def _resources(queues: list[QueueSpec]) -> list[str]:
    lines: list[str] = []
    for q in queues:
        queue, dlq = f"Queue{q.id}", f"Queue{q.id}DeadLetterQueue"
        lines += [
            f"{dlq}:",
            "  Type: AWS::SQS::Queue",
            "  Properties:",
            f"    QueueName: !If [UseFifo, !Sub \"${{AWS::StackName}}-{q.name}-dead.fifo\", "
            f"!Sub \"${{AWS::StackName}}-{q.name}-dead\"]",
            "    FifoQueue: !If [UseFifo, true, !Ref AWS::NoValue]",
            "    MessageRetentionPeriod: 1209600",
            "    SqsManagedSseEnabled: !If [UseKms, !Ref AWS::NoValue, true]",
            "    KmsMasterKeyId: !If [UseKms, !Ref KmsKeyArn, !Ref AWS::NoValue]",
            "",
            f"{queue}:",
            "  Type: AWS::SQS::Queue",
            "  Properties:",
            f"    QueueName: !If [UseFifo, !Sub \"${{AWS::StackName}}-{q.name}.fifo\", "
            f"!Sub \"${{AWS::StackName}}-{q.name}\"]",
            "    FifoQueue: !If [UseFifo, true, !Ref AWS::NoValue]",
            "    VisibilityTimeout: !FindInMap [Visibility, !Ref FunctionTimeout, Seconds]",
            "    MessageRetentionPeriod: 1209600",
            "    SqsManagedSseEnabled: !If [UseKms, !Ref AWS::NoValue, true]",
            "    KmsMasterKeyId: !If [UseKms, !Ref KmsKeyArn, !Ref AWS::NoValue]",
            "    RedrivePolicy:",
            f"      deadLetterTargetArn: !GetAtt {dlq}.Arn",
            "      maxReceiveCount: !Ref MaxReceiveCount",
            "",
            f"{queue}Policy:",
            "  Type: AWS::SQS::QueuePolicy",
            "  Properties:",
            f"    Queues: [!Ref {queue}, !Ref {dlq}]",
            "    PolicyDocument:",
            "      Version: \"2012-10-17\"",
            "      Statement:",
            "        - Sid: DenyWithoutTls",
            "          Effect: Deny",
            "          Principal: \"*\"",
            "          Action: \"sqs:*\"",
            f"          Resource: [!GetAtt {queue}.Arn, !GetAtt {dlq}.Arn]",
            "          Condition:",
            "            Bool: {\"aws:SecureTransport\": \"false\"}",
            "        - !If",
            "          - AllowProducerAccounts",
            "          - Sid: ProducerAccountsSend",
            "            Effect: Allow",
            '            Principal: {AWS: !Split [",", !Ref ProducerAccountIds]}',
            "            Action: sqs:SendMessage",
            f"            Resource: !GetAtt {queue}.Arn",
            "          - !Ref AWS::NoValue",
            "",
            f"{queue}Jobs:",
            "  Type: AWS::Lambda::EventSourceMapping",
            "  Properties:",
            f"    EventSourceArn: !GetAtt {queue}.Arn",
            "    FunctionName: !Ref WorkerFunction",
            "    BatchSize: !Ref BatchSize",
            "    MaximumBatchingWindowInSeconds: !If [BatchingWindow, !Ref MaxBatchingWindow, !Ref AWS::NoValue]",
            "    FunctionResponseTypes: [ReportBatchItemFailures]",
            "    ScalingConfig:",
            f"      MaximumConcurrency: !Ref {queue}MaxConcurrency",
            "",
            *_alarm(q, "DeadLetterQueueAlarm", f"jobs in queue {q.name}'s dead-letter queue (kindling dlq peek)",
                    "ApproximateNumberOfMessagesVisible", dlq, 1, "0"),
            *_alarm(q, "OldestMessageAlarm", f"queue {q.name}'s oldest message waits too long",
                    "ApproximateAgeOfOldestMessage", queue, 5, "!Ref OldestMessageAlarmSeconds"),
        ]
    return lines


def _routes(queues: list[QueueSpec]) -> str:
    return "!Join [\",\", [" + ", ".join(f"!Sub \"{q.name}=${{Queue{q.id}}}\"" for q in queues) + "]]"


def _outputs(queues: list[QueueSpec]) -> list[str]:
    if not queues:
        return []
    lines = ["QueueRoutes:",
             "  Description: The named queues, name=url,... (KINDLING_QUEUES for producers)",
             f"  Value: {_routes(queues)}"]
    for q in queues:
        lines += [f"Queue{q.id}Url:",
                  f"  Description: The named queue {q.name}",
                  f"  Value: !Ref Queue{q.id}",
                  f"Queue{q.id}DeadLetterQueueUrl:",
                  f"  Description: Messages whose jobs ended dead on the named queue {q.name}",
                  f"  Value: !Ref Queue{q.id}DeadLetterQueue"]
    return lines


PARTS = {
    "parameters": _parameters,
    "resources": _resources,
    "outputs": _outputs,
    # Items of ARN lists: the queues, their dead-letter queues, or both.
    "queue_arns": lambda qs: [f"- !GetAtt Queue{q.id}.Arn" for q in qs],
    "dlq_arns": lambda qs: [f"- !GetAtt Queue{q.id}DeadLetterQueue.Arn" for q in qs],
    "all_arns": lambda qs: [line for q in qs for line in (f"- !GetAtt Queue{q.id}.Arn",
                                                          f"- !GetAtt Queue{q.id}DeadLetterQueue.Arn")],
    # KINDLING_DLQ_URLS' items after the jobs queue's: each queue's ARN=its own DLQ's URL.
    "dlq_urls": lambda qs: [f"- !Sub \"${{Queue{q.id}.Arn}}=${{Queue{q.id}DeadLetterQueue}}\"" for q in qs],
    # The worker's KINDLING_QUEUES: the same routes as the QueueRoutes output.
    "environment": lambda qs: [f"KINDLING_QUEUES: {_routes(qs)}"] if qs else [],
}


def listed(text: str) -> list[str]:
    """The queue specs the template's ``parameters`` marker carries."""
    for line in text.splitlines():
        m = _MARK.match(line)
        if m and m["part"] == "parameters":
            return [s.strip() for s in (m["names"] or "").split(",") if s.strip()]
    raise ValueError("template.yaml has no '# >>> named queues: parameters [...]' marker")


def render(text: str, specs: list[str]) -> str:
    """``text`` (a template) with every marked part rendered for ``specs``."""
    queues = parse(specs)
    out: list[str] = []
    lines = iter(text.splitlines(keepends=True))
    seen: set[str] = set()
    for line in lines:
        m = _MARK.match(line)
        if not m:
            out.append(line)
            continue
        indent, part = m["indent"], m["part"]
        if part not in PARTS:
            raise ValueError(f"unknown named-queues part {part!r}")
        seen.add(part)
        names = f" [{', '.join(map(str, queues))}]" if part == "parameters" else ""
        out.append(f"{indent}# >>> named queues: {part}{names}\n")
        out += [f"{indent}{body}".rstrip() + "\n" for body in PARTS[part](queues)]
        for rest in lines:  # skip the old rendering up to the closing marker
            if rest.strip() == f"# <<< named queues: {part}":
                out.append(rest)
                break
        else:
            raise ValueError(f"no '# <<< named queues: {part}' after its opening marker")
    if seen != set(PARTS):
        raise ValueError(f"template.yaml lacks the named-queues markers for {sorted(set(PARTS) - seen)}")
    return "".join(out)


def absolute(text: str, root: Path = ROOT) -> str:
    """A rendering to be built from another directory: the code paths made absolute."""
    return re.sub(r"^(\s+(?:CodeUri|ContentUri): )(\S+)$", lambda m: f"{m[1]}{root / m[2]}/", text, flags=re.M)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("queues", nargs="*", metavar="NAME[:CONCURRENCY]")
    ap.add_argument("--check", action="store_true", help="exit 1 when template.yaml is not its own rendering")
    ap.add_argument("--out", type=Path, help="write the rendering here instead of template.yaml")
    ns = ap.parse_args(argv)
    text = TEMPLATE.read_text()
    if ns.check:
        if render(text, listed(text)) != text:
            print("template.yaml differs from its rendering: run infra/queues/render.py", file=sys.stderr)
            return 1
        return 0
    rendered = render(text, [s for arg in ns.queues for s in arg.replace(",", " ").split()])
    if ns.out:
        ns.out.parent.mkdir(parents=True, exist_ok=True)
        ns.out.write_text(absolute(rendered))
    else:
        TEMPLATE.write_text(rendered)
    return 0


if __name__ == "__main__":
    sys.exit(main())
