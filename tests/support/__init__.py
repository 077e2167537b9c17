"""What the test suites share beyond fixtures: the repository's root, free loopback ports, the
infra/*/ctl scripts, and the services they start (valkey.py, localstack.py).

pytest puts tests/ on sys.path when it imports tests/conftest.py (tests/ is no package), so
these import as ``support`` and ``support.valkey`` from any conftest or test module.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def create_results_table(ddb, name: str, **parameters: str) -> str:
    """The results table ``name``, made with ``ddb`` (a boto3 DynamoDB client) as template.yaml
    deploys it: its keys and indexes read from the template, with its parameters' defaults or
    these (``TaskIndex="false"``)."""
    from kindling.tools.localcloud import results_table_schema

    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     **results_table_schema(ROOT / "template.yaml", parameters))
    return name


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ctl(path: Path, *args: str, timeout: float = 300) -> str:
    """Run an infra/*/ctl script; its stdout, or RuntimeError with everything it said."""
    done = subprocess.run([str(path), *args], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{path.relative_to(ROOT)} {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout.strip()


def examples(thorough: int) -> int:
    """Hypothesis examples for a property: ``thorough`` in a thorough run
    (``KINDLING_THOROUGH=1``: nightly, or before a release), an eighth of it (at least 25) on
    every push, where the suite's time is what the inner loop pays."""
    import os

    return thorough if os.environ.get("KINDLING_THOROUGH") == "1" else max(25, thorough // 8)


def wait_until(predicate, timeout: float, what: str, step: float = 0.05):
    """Poll ``predicate`` until it returns something truthy, and return that; an
    AssertionError naming ``what`` after ``timeout`` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
