"""An unchanged Celery 5 producer (``celery[sqs]``: kombu's SQS transport) sending to a queue a
kindling worker serves: the worker runs the registered tasks its messages name and records
their outcomes; what kindling cannot honour (a ``link`` callback) and unknown task names are
``rejected`` with the reason, never run.

The producer runs in a venv of its own with Celery installed (``.state/celery/venv``, made
on first use with pip), as a separate process: the producer's code knows nothing of kindling."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import boto3
import pytest
from kindling.core.registry import Registry
from kindling.producer.client import Client
from kindling.triggers.sqs.loop import SqsWorker
from support import ROOT, create_results_table

pytestmark = pytest.mark.localstack

VENV = ROOT / ".state" / "celery" / "venv"

PRODUCER = r"""
import json, sys
from celery import Celery

queue_url, endpoint = sys.argv[1], sys.argv[2]
host, port = endpoint.split("//")[1].split(":")
app = Celery("shop", broker=f"sqs://test:test@{host}:{port}")
app.conf.broker_transport_options = {"region": "us-east-1", "is_secure": False,
                                     "predefined_queues": {"celery": {"url": queue_url}}}
app.conf.task_default_queue = "celery"


@app.task(name="bridge.add")
def add(a, b):
    return a + b


@app.task(name="bridge.notify")
def notify(value):
    return value


ids = {
    "send_task": app.send_task("bridge.add", args=[2, 3]).id,
    "delay": add.delay(4, b=6).id,
    "countdown": add.apply_async((1, 1), countdown=2).id,
    "link": add.apply_async((1, 2), link=notify.s()).id,
    "unknown": app.send_task("bridge.unknown", args=[1]).id,
}
print(json.dumps(ids))
"""


@pytest.fixture(scope="module")
def celery_python() -> str:
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "celery[sqs]>=5,<6"], check=True, timeout=600)
    return str(python)


@pytest.fixture
def queue_and_table(localstack, monkeypatch):
    for key, value in localstack.items():
        monkeypatch.setenv(key, value)
    suffix = uuid.uuid4().hex[:8]
    sqs, ddb = boto3.client("sqs"), boto3.client("dynamodb")
    url = sqs.create_queue(QueueName=f"celery-bridge-{suffix}")["QueueUrl"]
    table = f"celery-bridge-{suffix}"
    create_results_table(ddb, table)
    ddb.get_waiter("table_exists").wait(TableName=table)
    yield url, table, localstack
    sqs.delete_queue(QueueUrl=url)
    ddb.delete_table(TableName=table)


def test_a_celery_producer_s_messages_run_on_a_kindling_worker(celery_python, queue_and_table):
    url, table, env = queue_and_table
    endpoint = env["AWS_ENDPOINT_URL"]
    done = subprocess.run([celery_python, "-c", PRODUCER, url, endpoint], capture_output=True, text=True,
                          timeout=120, env={**env, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    ids = json.loads(done.stdout.strip().splitlines()[-1])

    registry = Registry()
    ran = []

    @registry.task(name="bridge.add")
    def add(a, b):
        ran.append((a, b))
        return a + b

    @registry.task(name="bridge.notify")
    def notify(value):
        ran.append(("notify", value))
        return value

    SqsWorker(url, table, registry, wait=1, log=None, metrics=False).run(burst=True, idle_timeout=15)
    client = Client(queue_url=url, table=table)
    records = {name: client.record(job_id) for name, job_id in ids.items()}

    assert client.result(ids["send_task"], timeout=5) == 5
    assert client.result(ids["delay"], timeout=5) == 10
    assert client.result(ids["countdown"], timeout=5) == 2
    # A message kindling cannot honour is rejected under the Celery task id it names.
    link = records["link"]
    assert link["status"] == "rejected" and "link callbacks cannot be honoured" in link["error"]["message"]
    assert records["unknown"]["status"] == "rejected"
    assert "unknown task 'bridge.unknown'" in records["unknown"]["error"]["message"]
    assert sorted(ran) == [(1, 1), (2, 3), (4, 6)]  # each once; the linked call never ran

