"""The Valkey drain runs from the built layers alone, as the deployed function runs it.

A fresh ``python -S`` (no site-packages: no valkey-py, no boto3) with only the function's
code directory and the layers' python/ (the kindling layer and the Valkey layer, extracted
into one directory as Lambda extracts them into /opt) on sys.path drains a stream on a real valkey-server
into DynamoDB (moto).

Run: .venv/bin/python -m pytest tests/service/test_valkey_lambda_layer.py -q
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.service.test_valkey import _scan

pytestmark = pytest.mark.valkey

ROOT = Path(__file__).resolve().parents[2]

DRAIN = """
import sys
sys.path[:0] = [{code!r}, {layer!r}]
from importlib.util import find_spec
assert find_spec("valkey") is None and find_spec("boto3") is None, "site-packages leaked in"

class Context:
    aws_request_id = "req-layer"
    def get_remaining_time_in_millis(self):
        return 20_000

import app
summary = app.handler({{"kindling": "drain", "stream": {stream!r}}}, Context())
loaded = " ".join(sorted(sys.modules))
import json
print(json.dumps(summary))
print(loaded)
"""


def test_the_drain_runs_from_the_built_layer_alone(valkey_layers_python, valkey_url, table):
    from kindling.valkey import StreamProducer

    stream = f"layer:{uuid.uuid4().hex[:8]}"
    producer = StreamProducer(valkey_url, stream=stream)
    sent = producer.enqueue_many([("echo", [i], {}) for i in range(50)])

    code = DRAIN.format(code=str(ROOT / "functions/worker"), layer=str(valkey_layers_python), stream=stream)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "AWS_LAMBDA", "KINDLING_"))}
    env.update(KINDLING_TABLE=table, KINDLING_VALKEY_URL=valkey_url, KINDLING_VALKEY_STREAMS=stream)
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env,
                          cwd="/", timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    summary_line, modules_line = done.stdout.strip().splitlines()[-2:]
    summary = json.loads(summary_line)
    assert summary["processed"] == 50 and summary["counts"] == {"succeeded": 50}, summary

    loaded = set(modules_line.split())
    assert "kindling.drivers.valkey.client" in loaded
    # kindling's own client on a plain URL: neither valkey-py nor what it drags in
    heavy = {"valkey", "redis", "boto3", "botocore", "ssl", "asyncio", "importlib.metadata",
             # nor what the drain's own parts could drag in: signal.py imports enum (~3 ms)
             "signal", "enum", "threading", "contextlib", "json", "socket", "http.client"}
    assert not loaded & heavy, sorted(loaded & heavy)

    records = _scan(table)
    assert set(records) == {s.id for s in sent}
    assert all(r["status"] == "succeeded" and r["attempts"] == 1 for r in records.values())
    assert records[sent[7].id]["result"] == json.dumps({"args": [7], "kwargs": {}}, separators=(",", ":"))
    assert producer.client.xlen(stream) == 0
