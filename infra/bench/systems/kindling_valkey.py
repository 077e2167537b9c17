"""kindling's stream worker (kindling.valkey.StreamWorker) with results in Valkey, for throughput.

    python kindling_valkey.py --url redis://127.0.0.1:P/0 [--concurrency 100] [--threads 0] [--batch 500] [--forever]

Runs in burst mode (exits when the stream is drained). Results go to a small Valkey result
store defined here (db 1, one key per job, pipelined SETs), so that kindling and Celery both
record results in Valkey: like with like. The tasks are functions/worker/tasks.py.
``--concurrency``: async jobs at once; ``--threads``: sync jobs at once, in threads (0: one
after another on the main thread).
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PREFIX = "kindling-result:"


class ValkeyResultStore:
    """kindling's ResultStore protocol over Valkey keys (``kindling-result:<id>`` -> JSON),
    encoded with kindling's codec as its own stores encode records (orjson once the worker
    has switched to it)."""

    def __init__(self, client):
        from kindling.core import codec

        self.client = client
        self.codec = codec  # its dumps/loads are rebound by codec.use_orjson()

    def read_states(self, job_ids, **_):
        ids = list(dict.fromkeys(job_ids))
        if not ids:
            return {}
        values = self.client.mget([PREFIX + i for i in ids])
        return {i: (r["status"], r.get("attempts", 0)) for i, v in zip(ids, values, strict=True)
                if v is not None and (r := self.codec.loads(v))}

    def write(self, records, **_):
        # The benchmark's jobs all succeed: plain SETs, as kindling's own store writes successes.
        pipe = self.client.pipeline(transaction=False)
        for r in records:
            pipe.set(PREFIX + r["id"], self.codec.dumps(r))
        pipe.execute()
        return {}

    # The runner sends its read and write through begin_* (the ResultStore protocol): made at
    # once here, as kindling's own Valkey store makes them.
    def begin_read(self, job_ids, **options):
        states = self.read_states(job_ids, **options)
        return lambda: states

    def begin_write(self, records, **options):
        refused = self.write(records, **options)
        return lambda: refused


def parse_args(argv: list[str]) -> dict:
    """The options above. No argparse or pathlib: this process's peak RSS is measured, and they add
    ~0.4 MiB to it (infra/bench calls it with well-formed arguments)."""
    opts: dict = {"url": None, "concurrency": 100, "threads": 0, "batch": 500, "forever": False}
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=")
        key = name[2:]
        if name == "--forever" and not eq:
            opts["forever"] = True
        elif name in ("--url", "--concurrency", "--threads", "--batch"):
            value = value if eq else next(args, None)
            if value is None:
                raise SystemExit(f"kindling_valkey.py: {name} needs a value")
            opts[key] = value if key == "url" else int(value)
        else:
            raise SystemExit(f"kindling_valkey.py: unknown argument {arg!r}\n{__doc__}")
    if not opts["url"]:
        raise SystemExit(f"kindling_valkey.py: --url is required\n{__doc__}")
    return opts


def main() -> int:
    ns = parse_args(sys.argv[1:])
    sys.path.insert(0, os.path.join(ROOT, "functions/worker"))
    import signal
    import time

    import tasks  # noqa: F401
    from kindling import task
    from kindling.valkey import StreamWorker, connect

    @task(name="stamp")
    def stamp() -> float:
        """The latency scenario's probe: the wall clock when it ran."""
        return time.time()

    results = connect(ns["url"].rsplit("/", 1)[0] + "/1")
    worker = StreamWorker(ns["url"], store=ValkeyResultStore(results), batch=ns["batch"], block_ms=200,
                          concurrency=ns["concurrency"], threads=ns["threads"], log=False)
    signal.signal(signal.SIGTERM, worker.stop)
    signal.signal(signal.SIGINT, worker.stop)
    counts = worker.run(burst=not ns["forever"])
    print(" ".join(f"{k}={v}" for k, v in sorted(counts.items())), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
