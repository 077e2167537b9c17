"""Operating the Valkey trigger against a real valkey-server (infra/valkey/ctl): spans per job
on the stream worker, and the dead stream through ``kindling dlq peek|redrive --valkey``.

Run: .venv/bin/pytest tests/integration/test_valkey_ops.py -q -m valkey
"""

from __future__ import annotations

import socket
import subprocess
import uuid
from pathlib import Path

import pytest
from kindling.registry import Registry
from kindling.results import MemoryResultStore
from kindling.valkey import StreamProducer, StreamWorker
from kindling.valkey.connection import connect

pytestmark = pytest.mark.valkey

ROOT = Path(__file__).resolve().parents[2]
CTL = ROOT / "infra/valkey/ctl"
PRODUCER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"


def _ctl(*args: str) -> str:
    done = subprocess.run([str(CTL), *args], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"ctl {' '.join(args)} failed: {done.stdout}{done.stderr}")
    return done.stdout.strip()


@pytest.fixture(scope="module")
def url():
    _ctl("install")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _ctl("start", str(port))
    yield _ctl("url", str(port))
    _ctl("stop", str(port))


@pytest.fixture
def stream() -> str:
    return f"ops:{uuid.uuid4().hex[:8]}"


def registry() -> Registry:
    reg = Registry()

    @reg.task(name="ok")
    def ok(x):
        return x

    @reg.task(name="doomed", max_attempts=1)
    def doomed(x):
        raise RuntimeError(f"doomed {x}")

    return reg


# -- spans ----------------------------------------------------------------------------------


def test_the_stream_worker_opens_a_span_per_job_with_the_producers_trace(url, stream, spans, monkeypatch):
    monkeypatch.setenv("_X_AMZN_TRACE_ID", PRODUCER)
    sent = StreamProducer(url, stream).enqueue_many([("ok", (1,), {}), ("doomed", (2,), {})])
    monkeypatch.delenv("_X_AMZN_TRACE_ID")
    fields = connect(url).xrange(stream)[0][1]
    assert fields[b"trace"] == PRODUCER.encode()
    worker = StreamWorker(url, registry=registry(), store=MemoryResultStore(), stream=stream, log=False,
                          heartbeat=False, otel=True)
    counts = worker.run(burst=True)
    assert counts == {"succeeded": 1, "dead": 1}
    got = {s.name: s for s in spans.get_finished_spans()}
    assert sorted(got) == ["doomed", "ok"]
    for sent_job in sent:
        span = got[sent_job.task]
        assert span.attributes["kindling.job.id"] == sent_job.id
        assert span.attributes["messaging.message.id"] == sent_job.entry
        assert span.attributes["kindling.xray_trace_id"] == "1-5759e988-bd862e3fe1be46a994272793"
        assert span.context.trace_id == 0x5759E988BD862E3FE1BE46A994272793
    assert got["ok"].attributes["kindling.job.status"] == "succeeded"
    assert got["doomed"].attributes["kindling.job.status"] == "dead"
    assert got["doomed"].events[0].attributes["exception.message"] == "doomed 2"
    # the dead stream keeps the trace, for a redrive
    (_, dead), = connect(url).xrange(f"{stream}:dead")
    assert dead[b"trace"] == PRODUCER.encode()


def test_without_a_trace_the_entry_has_only_its_job(url, stream, monkeypatch):
    monkeypatch.delenv("_X_AMZN_TRACE_ID", raising=False)
    StreamProducer(url, stream).enqueue("ok", 1)
    assert set(connect(url).xrange(stream)[0][1]) == {b"job"}
