"""@task(redact=True): arguments and results of sensitive tasks never reach a record or a log line."""

import hashlib
import io

from kindling.core import codec
from kindling.core.envelope import encode_job, new_job
from kindling.core.registry import Registry
from kindling.engine.runner import Delivery, Runner
from kindling.shared import logs
from kindling.stores.results import MemoryResultStore

SECRET = "4111-1111-1111-1111"


def test_a_redacted_tasks_records_and_log_lines_carry_no_argument_or_result():
    reg = Registry()
    reg.task(name="card.mask", redact=True)(lambda number: number[-4:] + SECRET)
    reg.task(name="card.charge", redact=True)(lambda number: (_ for _ in ()).throw(ValueError(f"declined {number}")))
    store, buf = MemoryResultStore(), io.StringIO()
    bodies = [encode_job(new_job(name, [SECRET])).decode() for name in ("card.mask", "card.charge")]
    bodies.append(codec.dumps({"version": 1, "id": "bad-args", "task": "card.mask", "args": [SECRET, SECRET],
                               "kwargs": {}, "enqueued_at": 1_700_000_000_000}))
    outcomes = Runner(reg, store, log=logs.LogSink(buf), metrics=False).run(
        [Delivery(f"m{i}", b, 1) for i, b in enumerate(bodies)])
    assert [o.status for o in outcomes] == ["succeeded", "failed", "rejected"]
    text = codec.dumps(store.records) + buf.getvalue() + " ".join(o.reason or "" for o in outcomes)
    assert SECRET not in text
    masked = store.records[outcomes[0].job_id]
    expected = codec.dumps("1111" + SECRET)
    assert masked["redacted"]["result"] == {"sha256": hashlib.sha256(expected.encode()).hexdigest(),
                                            "bytes": len(expected)}
    failed = store.records[outcomes[1].job_id]
    assert failed["error"] == {"type": "ValueError", "message": "[redacted]", "traceback": ""}
    assert failed["redacted"]["error"]["bytes"] == len(f"declined {SECRET}")
    assert "raw" not in store.records["bad-args"] and "raw" in store.records["bad-args"]["redacted"]


def test_other_tasks_are_recorded_as_before():
    reg = Registry()
    reg.task(name="echo")(lambda x: x)
    store = MemoryResultStore()
    body = encode_job(new_job("echo", ["hi"])).decode()
    (o,) = Runner(reg, store, log=None, metrics=False).run([Delivery("m", body)])
    assert store.records[o.job_id]["result"] == '"hi"' and "redacted" not in store.records[o.job_id]
