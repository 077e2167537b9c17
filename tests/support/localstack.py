"""LocalStack for the integration and chaos suites: reuse the one answering on
KINDLING_LOCALSTACK_PORT (default 4566), else install and start one, and stop only what was
started here."""

from __future__ import annotations

import contextlib
import json
import os
import urllib.request
from collections.abc import Iterator

from support import ROOT, ctl

CTL = ROOT / "infra/localstack/ctl"


def port() -> int:
    return int(os.environ.get("KINDLING_LOCALSTACK_PORT", "4566"))


def healthy(port: int) -> bool:
    """LocalStack answers on ``port`` with DynamoDB up (the last of its services to come up)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_localstack/health", timeout=2) as resp:
            return json.load(resp).get("services", {}).get("dynamodb") in ("available", "running")
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def running() -> Iterator[dict[str, str]]:
    """LocalStack on :func:`port`: the AWS_* variables that point boto3 at it (not put in
    os.environ). One started here is stopped on exit, whatever happened inside."""
    started = not healthy(port())
    if started:
        ctl(CTL, "install", timeout=900)
    try:
        if started:  # inside the try: a start that timed out may have left LocalStack running
            ctl(CTL, "start", timeout=120)
        exports = ctl(CTL, "env").removeprefix("export ").split()
        yield dict(item.split("=", 1) for item in exports)
    finally:
        if started:
            ctl(CTL, "stop", timeout=60)


def env_if_healthy() -> dict[str, str] | None:
    """The AWS_* variables that point boto3 at a LocalStack already healthy on :func:`port`
    (what ``ctl env`` prints), or ``None``: for tests that make their own queues and tables
    and must never start or stop a LocalStack others share."""
    if not healthy(port()):
        return None
    return {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port()}", "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}
