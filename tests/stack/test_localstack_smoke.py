"""The local cloud works end to end: DynamoDB, a python3.13 Lambda with a layer run by the local
runtime executor, and LocalStack's SQS event source mapping with ReportBatchItemFailures.

Run: .venv/bin/pytest tests/stack
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.localstack

SMOKE = Path(__file__).resolve().parents[2] / "infra/localstack/smoke.py"


def test_smoke_path(localstack, record_property):
    done = subprocess.run(
        [sys.executable, str(SMOKE), "--json"],
        env={**os.environ, **localstack},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    for name, value in figures.items():
        record_property(name, value)
    print(done.stdout)
    # every stage ran and was timed (smoke.py itself asserts what each stage must produce)
    assert {"cold_invoke_s", "init_duration_ms", "sqs_to_dynamodb_20_jobs_s", "failed_message_to_dlq_s"} <= set(figures)
