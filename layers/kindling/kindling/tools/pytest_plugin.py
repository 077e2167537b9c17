"""kindling's pytest plugin: fixtures that run an app's own tasks, from eager mode to a worker.

pytest loads it by itself wherever kindling is installed (the ``pytest11`` entry point
``kindling``); ``-p no:kindling`` turns it off. Importing it imports nothing of kindling:
each fixture imports what it uses when a test asks for it.

Fixtures:

* ``kindling_eager``: every job sent in the test runs inline, through the worker's runner,
  with its record in memory (:func:`kindling.tools.testing.eager`); the fixture is the
  :class:`kindling.tools.testing.Eager` (``.records`` by job id).
* ``kindling_moto_worker``: a jobs queue, its dead-letter queue and a results table on moto's
  embedded AWS (a moto server on 127.0.0.1, one per session; ``moto[server,sqs,dynamodb]``
  and boto3 installed), fresh for each test; jobs sent in the test (``task.delay()``,
  ``.client``) go there, and ``.drain()`` runs the local SQS worker on the app's tasks until
  the queue is empty.
* ``kindling_valkey_worker``: the same on a Valkey stream, results kept in Valkey, when a
  server is given (``--kindling-valkey-url URL`` or ``KINDLING_TEST_VALKEY_URL``); skipped
  otherwise. Each test gets a stream of its own.

The app's tasks are the ones its test modules import; the ini option ``kindling_tasks``
(modules or ``.py`` files, as ``kindling worker --tasks`` takes them) imports more before
a worker fixture starts. Retries wait for the queue's redelivery (``kindling_retry_delay``
seconds, default 0: the queue's visibility timeout of 1 s), so a task that keeps failing
is ``dead`` within seconds.
"""

from __future__ import annotations

import os
import uuid

import pytest

VALKEY_URL_ENV = "KINDLING_TEST_VALKEY_URL"


def pytest_addoption(parser):
    group = parser.getgroup("kindling")
    group.addoption("--kindling-valkey-url", default=None, metavar="URL",
                    help=f"a Valkey server for the kindling_valkey_worker fixture (default {VALKEY_URL_ENV}); "
                         "without one, tests using it are skipped")
    parser.addini("kindling_tasks", type="args", default=[],
                  help="task modules or .py files the kindling worker fixtures import first")
    parser.addini("kindling_retry_delay", default="0",
                  help="seconds before a failed job's retry in the worker fixtures (KINDLING_RETRY_DELAY)")


def _load_tasks(config) -> None:
    specs = config.getini("kindling_tasks")
    if specs:
        from kindling.shared.config import load_tasks

        root = str(config.rootpath)
        load_tasks([s if os.path.isabs(s) or not s.endswith(".py") else os.path.join(root, s) for s in specs])


@pytest.fixture
def kindling_eager():
    """Every job sent in this test runs inline through the worker's runner (eager mode)."""
    from kindling.tools.testing import eager

    with eager() as jobs:
        yield jobs


class Deployment:
    """A queue, its dead-letter queue and a result store, as a test sees them.

    ``client`` sends jobs and reads outcomes (``task.delay()`` goes through it too, for the
    test's duration); :meth:`drain` runs a worker on the tasks registered until nothing is
    left to run, and returns its counts."""

    def __init__(self, client, drain, **names):
        self.client = client
        self._drain = drain
        self.__dict__.update(names)

    def drain(self, **kwargs) -> dict[str, int]:
        """Run the worker until the queue is drained; its counts (``succeeded``, ``failed`` ...)."""
        return self._drain(**kwargs)


@pytest.fixture(scope="session")
def kindling_moto():
    """moto's embedded AWS: a server thread on 127.0.0.1 for the session, and the environment
    (endpoint, test credentials, region) that points boto3 and kindling at it."""
    pytest.importorskip("boto3", reason="kindling_moto_worker needs boto3: pip install 'kindling-jobs[client]'")
    pytest.importorskip("moto.server", reason="kindling_moto_worker needs moto's server: "
                                              "pip install 'moto[server,sqs,dynamodb]'")
    from kindling.tools.localcloud import aws_env, start_moto

    saved = {k: os.environ.get(k) for k in aws_env("")}
    dropped = {k: os.environ[k] for k in ("AWS_PROFILE",) if k in os.environ}
    server, endpoint = start_moto()  # points this process's environment at it
    try:
        yield endpoint
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        os.environ.update(dropped)
        server.stop()


@pytest.fixture
def kindling_moto_worker(kindling_moto, request, monkeypatch):
    """A fresh queue, dead-letter queue and results table on moto for this test, with the
    producer pointed at them; ``.drain()`` runs the local SQS worker on the app's tasks."""
    import boto3
    from kindling.producer import dispatch
    from kindling.producer.client import Client
    from kindling.tools.localcloud import create_stack, template_path

    _load_tasks(request.config)
    monkeypatch.setenv("KINDLING_RETRY_DELAY", request.config.getini("kindling_retry_delay"))
    made = create_stack(f"kindling-test-{uuid.uuid4().hex[:12]}", visibility_timeout=1, max_receive_count=100,
                        template=template_path(request.config.rootpath))
    queue, dlq, table = made["queue_url"], made["dlq_url"], made["table"]
    sqs, ddb = boto3.client("sqs"), boto3.client("dynamodb")
    monkeypatch.setenv("KINDLING_QUEUE_URL", queue)
    monkeypatch.setenv("KINDLING_TABLE", table)
    monkeypatch.delenv("KINDLING_EAGER", raising=False)
    client = Client(queue_url=queue, table=table)

    def drain(idle_timeout: float = 30.0) -> dict[str, int]:
        from kindling.triggers.sqs.loop import SqsWorker

        return SqsWorker(queue, table, wait=1, log=None).run(burst=True, idle_timeout=idle_timeout)

    previous = dispatch.set_producer(client)
    try:
        yield Deployment(client, drain, queue_url=queue, dlq_url=dlq, table=table)
    finally:
        dispatch.set_producer(previous)
        for url in (queue, dlq):
            sqs.delete_queue(QueueUrl=url)
        ddb.delete_table(TableName=table)


@pytest.fixture
def kindling_valkey_worker(request, monkeypatch):
    """A stream of this test's own on the Valkey server given (``--kindling-valkey-url`` or
    KINDLING_TEST_VALKEY_URL), results in Valkey; skipped without a server. ``.drain()`` runs
    the stream worker on the app's tasks until the stream is empty."""
    url = request.config.getoption("--kindling-valkey-url") or os.environ.get(VALKEY_URL_ENV)
    if not url:
        pytest.skip(f"no Valkey server: pass --kindling-valkey-url URL or set {VALKEY_URL_ENV}")
    from kindling.producer import dispatch
    from kindling.producer.valkey import StreamProducer
    from kindling.stores.valkey import ValkeyResultStore
    from kindling.triggers.valkey.worker import StreamWorker

    _load_tasks(request.config)
    monkeypatch.setenv("KINDLING_RETRY_DELAY", request.config.getini("kindling_retry_delay"))
    monkeypatch.delenv("KINDLING_EAGER", raising=False)
    stream = f"kindling-test-{uuid.uuid4().hex[:12]}"
    store = ValkeyResultStore(url, 3600)
    producer = StreamProducer(url, stream, reader=store)

    def drain() -> dict[str, int]:
        return StreamWorker(url, store=store, stream=stream, visibility_ms=1000, log=False).run(burst=True)

    previous = dispatch.set_producer(producer)
    try:
        yield Deployment(producer, drain, url=url, stream=stream, store=store)
    finally:
        dispatch.set_producer(previous)
