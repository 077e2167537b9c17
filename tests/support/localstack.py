"""LocalStack for the stack and chaos suites: reuse the one answering on
KINDLING_LOCALSTACK_PORT (default 4566), else install and start one, and stop only what was
started here."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
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


BOOT_PID = ROOT / ".state/localstack-boot.pid"  # `make test` installs and starts LocalStack meanwhile


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _wait_for_boot(timeout: float = 900.0) -> bool:
    """Wait for a LocalStack that ``make test`` is installing and starting in the background
    (its pid in :data:`BOOT_PID`) to answer; whether one answers now."""
    try:
        pid = int(BOOT_PID.read_text())
    except (OSError, ValueError):
        return healthy(port())
    deadline = time.monotonic() + timeout
    while not healthy(port()) and _alive(pid) and time.monotonic() < deadline:
        time.sleep(1)
    return healthy(port())


@contextlib.contextmanager
def _start_lock() -> Iterator[None]:
    """One test process at a time decides whether to start LocalStack (pytest-xdist runs
    several)."""
    lock = ROOT / ".state/localstack-start.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def running() -> Iterator[dict[str, str]]:
    """LocalStack on :func:`port`: the AWS_* variables that point boto3 at it (not put in
    os.environ). Reuses one that answers (or that `make test` is starting); else installs and
    starts one, stopped on exit whatever happened inside - except under pytest-xdist, where
    other workers may still use it: the run's end stops it (tests/conftest.py)."""
    worker = bool(os.environ.get("PYTEST_XDIST_WORKER"))
    with _start_lock():
        started = not _wait_for_boot()
        if started:
            if worker:
                STARTED_BY_WORKER.touch()
            try:
                ctl(CTL, "install", timeout=900)
                ctl(CTL, "start", timeout=120)
            except BaseException:  # a start that timed out may have left LocalStack running
                if not worker:
                    ctl(CTL, "stop", timeout=60)
                raise
    try:
        exports = ctl(CTL, "env").removeprefix("export ").split()
        yield dict(item.split("=", 1) for item in exports)
    finally:
        if started and not worker:
            ctl(CTL, "stop", timeout=60)


STARTED_BY_WORKER = ROOT / ".state/localstack-started-by-pytest"


def stop_if_a_worker_started_it() -> None:
    """At the end of an xdist run (the controller): stop the LocalStack a worker started."""
    if STARTED_BY_WORKER.exists():
        STARTED_BY_WORKER.unlink()
        ctl(CTL, "stop", timeout=60)


def env_if_healthy() -> dict[str, str] | None:
    """The AWS_* variables that point boto3 at a LocalStack already healthy on :func:`port`
    (what ``ctl env`` prints), or ``None``: for tests that make their own queues and tables
    and must never start or stop a LocalStack others share."""
    if not healthy(port()):
        return None
    return {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port()}", "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}
