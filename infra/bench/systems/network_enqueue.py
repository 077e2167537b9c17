"""Enqueue N noop jobs for the network scenario (bench virtualenv); print ``ELAPSED <seconds>``.

    python network_enqueue.py MODE N

Modes (the Valkey URL is KINDLING_BENCH_VALKEY, the latency proxy's; connected first, outside
the timing):

    kindling-enqueue        StreamProducer.enqueue, one call per job, one after another
    kindling-aenqueue       N concurrent requests, each ``await producer.aenqueue("noop")``
    kindling-sqs-aenqueue   the same with ``await client.aenqueue("noop")`` to SQS (KINDLING_QUEUE_URL,
                            AWS_ENDPOINT_URL: the latency proxy in front of LocalStack)
    celery-delay            Celery's noop.delay(), one after another
    celery-sync-to-async    N concurrent requests, each ``await sync_to_async(noop.delay)()``
                            (asgiref's default, thread_sensitive=True: what a Django async view gets)
    celery-sync-to-async-threads
                            the same with thread_sensitive=False (the loop's default thread pool)
"""

import asyncio
import os
import sys
import time


def main() -> int:
    mode, n = sys.argv[1], int(sys.argv[2])
    url = os.environ["KINDLING_BENCH_VALKEY"]
    if mode == "kindling-sqs-aenqueue":
        from kindling.producer.client import Client

        client = Client(queue_url=os.environ["KINDLING_QUEUE_URL"], table="unused")
        asyncio.run(client.aenqueue("noop"))  # connected, the queue's size limit read, outside the timing

        async def requests():
            await asyncio.gather(*(client.aenqueue("noop") for _ in range(n)))

        t0 = time.perf_counter()
        asyncio.run(requests())
    elif mode.startswith("kindling"):
        from kindling.valkey import StreamProducer

        producer = StreamProducer(url, reader=False)
        producer.client.ping()
        if mode == "kindling-enqueue":
            t0 = time.perf_counter()
            for _ in range(n):
                producer.enqueue("noop")
        else:
            async def requests():
                await asyncio.gather(*(producer.aenqueue("noop") for _ in range(n)))

            asyncio.run(producer.aenqueue("noop"))  # the coalescer's thread started, outside the timing
            t0 = time.perf_counter()
            asyncio.run(requests())
    else:
        import celery_app

        celery_app.noop.delay()  # connected, outside the timing
        if mode == "celery-delay":
            t0 = time.perf_counter()
            for _ in range(n):
                celery_app.noop.delay()
        else:
            from asgiref.sync import sync_to_async

            delay = sync_to_async(celery_app.noop.delay, thread_sensitive=mode == "celery-sync-to-async")

            async def requests():
                await asyncio.gather(*(delay() for _ in range(n)))

            t0 = time.perf_counter()
            asyncio.run(requests())
    print(f"ELAPSED {time.perf_counter() - t0!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
