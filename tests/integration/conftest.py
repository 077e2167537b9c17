"""Fixtures for integration tests against LocalStack running on this host (infra/localstack/ctl)."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCALSTACK_CTL = ROOT / "infra/localstack/ctl"


def _localstack_ctl(*args: str, timeout: float = 900) -> str:
    done = subprocess.run([str(LOCALSTACK_CTL), *args], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"infra/localstack/ctl {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout.strip()


def _localstack_healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_localstack/health", timeout=2) as resp:
            return json.load(resp).get("services", {}).get("dynamodb") in ("available", "running")
    except (OSError, ValueError):
        return False


@pytest.fixture(scope="session")
def localstack() -> dict[str, str]:
    """LocalStack on KINDLING_LOCALSTACK_PORT (default 4566): the AWS_* environment that points
    boto3 at it. Reuses a LocalStack already healthy there; otherwise installs and starts one and
    stops it at the end of the session."""
    port = int(os.environ.get("KINDLING_LOCALSTACK_PORT", "4566"))
    started = False
    if not _localstack_healthy(port):
        _localstack_ctl("install")
        _localstack_ctl("start", timeout=120)
        started = True
    exports = _localstack_ctl("env").removeprefix("export ").split()
    env = dict(item.split("=", 1) for item in exports)
    try:
        yield env
    finally:
        if started:
            _localstack_ctl("stop", timeout=60)


@pytest.fixture(scope="session")
def stack(localstack) -> dict[str, str]:
    """template.yaml deployed into LocalStack (sam build + sam deploy): the stack outputs."""
    import sys

    sys.path.insert(0, str(ROOT / "infra/localstack"))
    from deploy import deploy

    saved = {k: os.environ.get(k) for k in localstack}
    os.environ.update(localstack)
    try:
        yield deploy("kindling-it", {"MaxAttempts": "4", "MaxReceiveCount": "20"})
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
