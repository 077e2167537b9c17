"""kindling's stream worker (kindling.valkey.StreamWorker) with results in Valkey, for throughput.

    python kindling_valkey.py --url redis://127.0.0.1:P/0 [--concurrency 100] [--batch 500]

Runs in burst mode (exits when the stream is drained). Results go to a small Valkey result
store defined here (db 1, one key per job, pipelined SETs), so that kindling and Celery both
record results in Valkey: like with like. The tasks are functions/worker/tasks.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PREFIX = "kindling-result:"


class ValkeyResultStore:
    """kindling's ResultStore protocol over Valkey keys (``kindling-result:<id>`` -> JSON)."""

    def __init__(self, client):
        self.client = client

    def get_statuses(self, job_ids):
        ids = list(dict.fromkeys(job_ids))
        if not ids:
            return {}
        values = self.client.mget([PREFIX + i for i in ids])
        return {i: json.loads(v)["status"] for i, v in zip(ids, values, strict=True) if v is not None}

    def write(self, records):
        pipe = self.client.pipeline(transaction=False)
        for r in records:
            pipe.set(PREFIX + r["id"], json.dumps(r))
        pipe.execute()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--concurrency", type=int, default=100)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--forever", action="store_true", help="not burst: run until SIGTERM")
    ns = ap.parse_args()
    sys.path.insert(0, str(ROOT / "functions/worker"))
    import signal
    import time

    import tasks  # noqa: F401
    from kindling import task
    from kindling.valkey import StreamWorker, connect

    @task(name="stamp")
    def stamp() -> float:
        """The latency scenario's probe: the wall clock when it ran."""
        return time.time()

    results = connect(ns.url.rsplit("/", 1)[0] + "/1")
    worker = StreamWorker(ns.url, store=ValkeyResultStore(results), batch=ns.batch, block_ms=200,
                          concurrency=ns.concurrency, log=False)
    signal.signal(signal.SIGTERM, worker.stop)
    signal.signal(signal.SIGINT, worker.stop)
    counts = worker.run(burst=not ns.forever)
    print(" ".join(f"{k}={v}" for k, v in sorted(counts.items())), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
