"""The LocalStack plugin's ``sqs_bodies_as_sent`` hook, run in LocalStack's own venv against its
real SqsPoller.handle_messages (no server): bodies reach the invocation as sent, and filter
criteria still match on the parsed JSON body, as on AWS."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LS_PYTHON = ROOT / "infra/localstack/.venv/bin/python"
pytestmark = pytest.mark.localstack

PROBE = r"""
import json, sys
from unittest import mock

sys.path.insert(0, sys.argv[1])
from localstack.services.lambda_.event_source_mapping.pollers import sqs_poller
from localstack_host.plugins import sqs_bodies_as_sent


def delivered(bodies, patterns):
    poller = sqs_poller.SqsPoller.__new__(sqs_poller.SqsPoller)
    poller.filter_patterns = patterns
    poller.source_arn = "arn:aws:sqs:us-east-1:000000000000:q"
    poller.aws_region = "us-east-1"
    poller.processor = mock.Mock()
    poller.delete_messages = mock.Mock()
    poller.handle_messages([{"MessageId": str(n), "ReceiptHandle": "r", "Body": b} for n, b in enumerate(bodies)])
    calls = poller.processor.process_events_batch.call_args_list
    return calls[0].args[0] if calls else []


bodies = json.loads(sys.argv[2])
patterns = [{"body": {"k": ["match"]}}]
sqs_bodies_as_sent()
print(json.dumps({
    "all": [e["body"] for e in delivered(bodies, [])],
    "filtered": [e["body"] for e in delivered(bodies, patterns)],
    "keys": sorted(delivered(bodies, [])[0]),
}))
"""

BODIES = [
    ' \n{"k" :\t"match",  "x": "Grüße 東京 ✓"} ',  # spacing and non-ASCII
    '{"k":"match","n":1.0e2}',  # compact, a number json.dumps would write as 100.0
    '"a JSON string"',  # would lose its quotes
    "not JSON at all",
    '{"k": "other"}',
    "[1,2]",
]


def test_bodies_reach_the_function_as_sent_and_filters_still_match_parsed_json(localstack):
    """``localstack`` installs LocalStack's venv (on a fresh machine it does not exist at
    collection time, so a skip condition there would skip this test in CI)."""
    done = subprocess.run([str(LS_PYTHON), "-c", PROBE, str(ROOT / "infra/localstack/plugin"), json.dumps(BODIES)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["all"] == BODIES
    assert out["filtered"] == BODIES[:2]
    assert "_kindling_raw_body" not in out["keys"] and "body" in out["keys"]
