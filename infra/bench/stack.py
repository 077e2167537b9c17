"""The stack the end-to-end scenarios run against: template.yaml deployed into LocalStack.

One deployment per run, shared by the scenarios that need it (``sqs``, ``lambda_valkey``):
``ValkeyUrl`` is the bench's valkey-server and ``DrainSchedule`` is off, so the one worker
function takes SQS batches through the event source mapping and drains the stream when a
producer kicks it, and nothing but the producers' kicks wakes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STACK = "kindling-bench"
_deployed: dict[int, dict] = {}


def deployed_stack(svc, log) -> dict | None:
    """The stack's outputs (QueueUrl, ResultsTableName, WorkerFunctionName, ...), deployed on
    first use; None (with the reason logged) when it cannot be: no LocalStack, or no dev
    virtualenv with sam."""
    if id(svc) in _deployed:
        return _deployed[id(svc)]
    if not svc.localstack:
        log("stack: not deployed (needs LocalStack: the deployed stack and its event source mapping)")
        return None
    # sam lives in the project's dev venv (make install): its click pin conflicts with Celery's
    dev_python = ROOT / ".venv/bin/python"
    if not dev_python.exists():
        log("stack: not deployed (needs the dev venv with sam: make install)")
        return None
    if not svc.valkey_url:
        raise RuntimeError("stack: the bench's Valkey must be started first (its URL is the stack's ValkeyUrl)")
    t0 = time.perf_counter()
    done = subprocess.run([str(dev_python), str(ROOT / "infra/localstack/deploy.py"), "--stack", STACK,
                           f"ValkeyUrl={svc.valkey_url}", "DrainSchedule=off"],
                          env=dict(os.environ, **svc.aws_env()), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"deploying the stack failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    out = json.loads(done.stdout[done.stdout.index("{"):])
    log(f"stack: deployed in {time.perf_counter() - t0:.0f} s (sam build + sam deploy, ValkeyUrl {svc.valkey_url})")
    _deployed[id(svc)] = out
    return out
