"""The Valkey URL kept in Secrets Manager (or SSM): read at first use, never at import, and
never on a command line or in a log line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import boto3
import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHONPATH = f"{ROOT / 'layers/kindling'}:{ROOT / 'functions/worker'}"


def _secret(value: str) -> str:
    return boto3.client("secretsmanager").create_secret(Name=f"valkey-{uuid.uuid4().hex[:8]}",
                                                        SecretString=value)["ARN"]


@pytest.fixture(autouse=True)
def _fresh_cache():
    from kindling.shared.valkey import connection

    connection._secret_urls.clear()
    yield
    connection._secret_urls.clear()


def test_importing_the_worker_and_the_cli_reads_no_secret():
    """With KINDLING_VALKEY_URL_SECRET set, importing the handler, the drain, the stream worker
    and the CLI opens no socket and loads neither kindling.drivers.secrets nor the AWS client."""
    probe = """
import sys
events = []
sys.addaudithook(lambda event, args: events.append(event) if event.startswith("socket.") else None)
import app
import kindling.triggers.valkey.lambda_drain, kindling.triggers.valkey.worker, kindling.tools.cli
print(" ".join(events))
print(" ".join(m for m in ("kindling.drivers.secrets", "kindling.drivers.aws") if m in sys.modules))
"""
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, AWS_ENDPOINT_URL="http://127.0.0.1:9", AWS_REGION="us-east-1",
               KINDLING_VALKEY_URL_SECRET="arn:aws:secretsmanager:us-east-1:000000000000:secret:valkey-AbCdEf")
    env.pop("KINDLING_VALKEY_URL", None)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    events, loaded = (out.stdout.split("\n") + ["", ""])[:2]
    assert events == "" and loaded == ""


def test_the_url_is_read_at_the_first_call_and_kept(moto_endpoint, monkeypatch):
    from kindling.drivers import secrets
    from kindling.shared.valkey.connection import configured_url

    arn = _secret("redis://:pw@127.0.0.1:6390/0")
    reads = []
    real = secrets.read
    monkeypatch.setattr(secrets, "read", lambda ref, **kw: reads.append(ref) or real(ref, **kw))
    monkeypatch.delenv("KINDLING_VALKEY_URL", raising=False)
    monkeypatch.setenv("KINDLING_VALKEY_URL_SECRET", arn)
    assert reads == []
    assert configured_url() == "redis://:pw@127.0.0.1:6390/0"
    assert configured_url() == "redis://:pw@127.0.0.1:6390/0"
    assert reads == [arn]
    # Secrets Manager's key/value form
    monkeypatch.setenv("KINDLING_VALKEY_URL_SECRET", _secret(json.dumps({"url": "rediss://u:p@10.0.0.1:6379/0"})))
    assert configured_url() == "rediss://u:p@10.0.0.1:6379/0"


@pytest.mark.parametrize("value", ["hunter2-not-a-url", json.dumps({"password": "hunter2-not-a-url"})])
def test_a_secret_without_a_url_is_refused_without_echoing_it(moto_endpoint, value):
    from kindling.core.errors import KindlingError
    from kindling.shared.valkey.connection import url_from_secret

    arn = _secret(value)
    with pytest.raises(KindlingError, match="does not hold a Valkey URL") as info:
        url_from_secret(arn)
    assert "hunter2" not in str(info.value)


def test_a_missing_secret_names_the_reference_and_the_error_code(moto_endpoint):
    from kindling.drivers.secrets import SecretUnavailable, read

    with pytest.raises(SecretUnavailable, match="ResourceNotFoundException"):
        read("arn:aws:secretsmanager:us-east-1:123456789012:secret:nope-AbCdEf")


@pytest.mark.valkey
def test_a_drain_reads_the_url_from_its_secret_and_logs_none_of_it(valkey_url, table, monkeypatch, capsys):
    """The Lambda worker's drain with only KINDLING_VALKEY_URL_SECRET: the URL is read at the
    first drain, and no log line (stdout: what Lambda sends to CloudWatch) carries it."""
    import tasks  # noqa: F401  the example tasks
    from kindling.triggers.sqs.handler import LambdaWorker
    from kindling.valkey import StreamProducer

    stream = f"sec:{uuid.uuid4().hex[:8]}"
    StreamProducer(valkey_url, stream=stream, signing="").enqueue("echo", 1)
    StreamProducer(valkey_url, stream=stream, signing="").enqueue("always_fails")  # a failure's log line
    monkeypatch.delenv("KINDLING_VALKEY_URL", raising=False)
    monkeypatch.setenv("KINDLING_VALKEY_URL_SECRET", _secret(valkey_url))
    monkeypatch.setenv("KINDLING_TABLE", table)
    monkeypatch.setenv("KINDLING_VALKEY_STREAMS", stream)
    worker = LambdaWorker()
    capsys.readouterr()
    summary = worker({"kindling": "drain", "stream": stream}, None)
    out, err = capsys.readouterr()
    assert summary["counts"].get("succeeded") == 1, summary
    assert out  # it did log
    address = valkey_url.split("://", 1)[1]
    assert address not in out + err and address not in json.dumps(summary)


@pytest.mark.valkey
def test_the_cli_worker_takes_a_secret_and_never_shows_the_url(valkey_url, moto_endpoint, table):
    stream = f"cli:{uuid.uuid4().hex[:8]}"
    from kindling.valkey import StreamProducer

    StreamProducer(valkey_url, stream=stream, signing="").enqueue("echo", 2)
    arn = _secret(valkey_url)
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, KINDLING_TABLE=table)
    env.pop("KINDLING_VALKEY_URL", None)
    argv = [sys.executable, "-m", "kindling.tools.cli", "worker", "--valkey-url-secret", arn, "--stream", stream,
            "--tasks", "tasks", "--burst"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, cwd=ROOT / "functions/worker")
    assert done.returncode == 0, done.stderr
    assert "succeeded=1" in done.stdout
    address = valkey_url.split("://", 1)[1]
    assert address not in done.stdout + done.stderr and not any(address in a for a in argv)
    # the same through the environment, and a secret that cannot be read: a clear error, no value
    env["KINDLING_VALKEY_URL_SECRET"] = arn + "-missing"
    argv = argv[:4] + argv[6:]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, cwd=ROOT / "functions/worker")
    assert done.returncode != 0 and "ResourceNotFoundException" in done.stderr and address not in done.stderr
