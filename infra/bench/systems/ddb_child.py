"""Results in DynamoDB, in one warm process: the table's own write rate against kindling's.

    python -S ddb_child.py batchwrite --layer DIR --table T --n N [--connections 1]
    python -S ddb_child.py storecalls --layer DIR --table T --n N [--batch 500] [--connections 4]
    python -S ddb_child.py handler --layer DIR --table T --n N [--batch 10]
    python ddb_child.py stream --layer DIR --table T --n N --url redis://... [--batch 500] [--connections 4]

``batchwrite``: N result records (the StreamWorker's own, :func:`stream_worker_record`) written with BatchWriteItem, 25
per call, through kindling's own client on ``--connections`` kept-alive connections (one
thread each): what the table accepts with nothing else going on. ``storecalls``: the calls
the StreamWorker makes for N jobs and nothing else (no Valkey, no jobs): through kindling's
DynamoResultStore, per batch of ``--batch`` the duplicate check (BatchGetItem of 100 keys,
on connections of its own) sent while the previous batch's write (BatchWriteItem of 25)
is in flight, as the worker pipelines them. ``handler``: the Lambda handler
(functions/worker/app.py) called with synthetic SQS events of ``--batch`` noop jobs, as
the event source mapping would call a warm function: dedupe read, run, write. ``stream``:
the Valkey stream worker (burst mode) over N noop jobs already queued, with its default
store, DynamoDB (needs site-packages for valkey-py, so no -S). Each prints
``SPAN <seconds>`` for the busy loop alone (for batchwrite and handler one untimed warm-up
call takes the imports and the first connection; for stream, from the first dedupe read
to the end of the last write) and exits. Every mode opens its connections before its span.
"""

import sys
import time

ROOT = __file__.rsplit("/infra/", 1)[0]


def main(argv: list[str]) -> int:
    mode = argv[0]
    opts = dict(zip(argv[1::2], argv[2::2], strict=True))
    import os

    # the worker function as run.py built it (with its bytecode), else the source
    sys.path[:0] = [os.environ.get("KINDLING_BENCH_FUNCTION") or ROOT + "/functions/worker", opts["--layer"]]

    os.environ["KINDLING_TABLE"] = table = opts["--table"]
    n, batch = int(opts["--n"]), int(opts.get("--batch", "10"))
    from kindling.core.envelope import encode_job, new_job

    if mode == "batchwrite":
        from kindling.drivers.aws import dynamodb
        from kindling.stores.results import to_item

        client = dynamodb()
        # n, and one per warm-up call
        records = [stream_worker_record(f"bw-{i:08d}") for i in range(n + 1 + int(opts.get("--connections", "1")))]

        def write(ids: range, via=client) -> None:
            requests = [{"PutRequest": {"Item": to_item(records[i])}} for i in ids]
            pending = {table: requests}
            while pending:
                pending = via.call("BatchWriteItem", {"RequestItems": pending}).get("UnprocessedItems") or {}

        write(range(n, n + 1))  # warm-up: connection, first request (an extra item, not counted)
        chunks = [range(start, min(start + 25, n)) for start in range(0, n, 25)]
        connections = int(opts.get("--connections", "1"))
        if connections == 1:
            t0 = time.perf_counter()
            for chunk in chunks:
                write(chunk)
        else:
            import threading
            from concurrent.futures import ThreadPoolExecutor

            from kindling.drivers.aws import JsonClient

            local = threading.local()

            def write_on_own_connection(ids: range) -> None:
                if not hasattr(local, "client"):
                    local.client = JsonClient("dynamodb", "DynamoDB_20120810")
                write(ids, local.client)

            with ThreadPoolExecutor(connections) as pool:
                list(pool.map(write_on_own_connection, [range(n + 1 + i, n + 2 + i) for i in range(connections)]))
                t0 = time.perf_counter()  # all connections open and warm
                list(pool.map(write_on_own_connection, chunks))
    elif mode == "storecalls":
        from kindling.stores.results import DynamoResultStore

        store = DynamoResultStore(table, concurrency=int(opts.get("--connections", "4")))
        _warm(store)
        batch = int(opts.get("--batch", "500"))
        batches = [[stream_worker_record(f"sc-{i:08d}") for i in range(start, min(start + batch, n))]
                   for start in range(0, n, batch)]
        t0 = time.perf_counter()
        read = store.begin_read([r["id"] for r in batches[0]])
        in_flight = None
        for k, records in enumerate(batches):
            read()
            if k + 1 < len(batches):  # the next batch's check goes out while this write is in flight
                read = store.begin_read([r["id"] for r in batches[k + 1]])
            if in_flight is not None:
                in_flight()
            in_flight = store.begin_write(records)
        in_flight()
    elif mode == "handler":
        import app

        def event(count: int) -> dict:
            return {"Records": [{"messageId": f"m{i}", "receiptHandle": "rh", "eventSource": "aws:sqs",
                                 "body": encode_job(new_job("noop")).decode(),
                                 "attributes": {"ApproximateReceiveCount": "1"}} for i in range(count)]}

        app.handler(event(1), None)  # warm-up: imports, connection (one job, not counted)
        events = [event(min(batch, n - start)) for start in range(0, n, batch)]
        t0 = time.perf_counter()
        for e in events:
            failures = app.handler(e, None)["batchItemFailures"]
            if failures:
                raise SystemExit(f"handler reported failures: {failures[:3]}")
    elif mode == "stream":
        import tasks  # noqa: F401  the example tasks, as the Lambda function has them
        from kindling.stores.results import DynamoResultStore
        from kindling.valkey import StreamWorker

        span: list[float] = []

        class TimedStore(DynamoResultStore):
            """From the first duplicate check sent to the last write read back."""

            def _started(self) -> None:
                if not span:
                    span.append(time.perf_counter())

            def read_states(self, job_ids, **kwargs):
                self._started()
                return super().read_states(job_ids, **kwargs)

            def begin_read(self, job_ids, **kwargs):
                self._started()
                return super().begin_read(job_ids, **kwargs)

            def begin_write(self, records, **kwargs):
                collect = super().begin_write(records, **kwargs)

                def timed():
                    refused = collect()
                    span[1:] = [time.perf_counter()]
                    return refused

                return timed

        store = TimedStore(table, concurrency=int(opts.get("--connections", "4")))
        _warm(store)
        worker = StreamWorker(opts["--url"], store=store, batch=int(opts.get("--batch", "500")),
                              block_ms=200, concurrency=100, log=False)
        worker.run(burst=True)
        t0 = span[0]
        print("SPAN", repr(span[1] - t0), flush=True)
        return 0
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print("SPAN", repr(time.perf_counter() - t0), flush=True)
    return 0


def stream_worker_record(key: str) -> dict:
    """The record the StreamWorker writes for a no-op job, attribute for attribute (its
    worker and consumer, the job's enqueued_at, the results' TTL), so that the baselines
    write the same items as the worker they are set against."""
    from kindling.core.envelope import new_job
    from kindling.core.records import build_record
    from kindling.engine.runner import DAY_S
    from kindling.shared.valkey.connection import default_consumer

    now = time.time_ns() // 1_000_000
    return build_record(key=key, task="noop", status="succeeded", attempts=1, started_at=now, finished_at=now,
                        duration_ms=0.012, job=new_job("noop"), result="null",
                        worker={"function": "kindling-valkey", "consumer": default_consumer()}, ttl_s=14 * DAY_S)


def _warm(store) -> None:
    """Open every connection of the store's two pools (reads of ids that have no record),
    as the baseline's warm-up does, so that no span pays for connecting."""
    from kindling.stores.results import DynamoResultStore

    ids = [f"warm-{i}" for i in range(100 * store.concurrency)]
    # DynamoResultStore's own methods: a timed subclass starts its clock on its own.
    DynamoResultStore.read_states(store, ids)  # 100 keys per call, on the write pool
    DynamoResultStore.begin_read(store, ids)()  # the read pool


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
