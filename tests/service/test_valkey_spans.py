"""A stream job's span names its stream, read through a real Valkey (kindling.shared.otel)."""

import uuid

from kindling.core.envelope import encode_job, new_job
from kindling.core.registry import Registry
from kindling.shared.valkey.connection import FIELD
from kindling.stores.memory import MemoryResultStore
from kindling.valkey import StreamWorker, connect


def test_a_stream_jobs_span_follows_the_messaging_conventions(valkey_url, spans, monkeypatch):
    monkeypatch.setenv("KINDLING_OTEL", "1")
    stream = f"spans:{uuid.uuid4().hex[:8]}"
    reg = Registry()
    reg.task(name="ok")(lambda: 1)
    job = new_job("ok")
    entry = connect(valkey_url).xadd(stream, {FIELD: encode_job(job)})
    worker = StreamWorker(valkey_url, None, reg, store=MemoryResultStore(), stream=stream, consumer="c1", batch=10,
                          block_ms=100, log=False, metrics=False)
    deliveries = worker.fetch(None)
    assert [d.stream for d in deliveries] == [stream]
    worker.process(deliveries)
    (span,) = spans.get_finished_spans()
    a = span.attributes
    assert (a["kindling.job.id"], a["messaging.system"], a["messaging.destination.name"]) == (job.id, "valkey", stream)
    assert a["messaging.operation.type"] == "process" and a["messaging.message.id"] == entry.decode()
