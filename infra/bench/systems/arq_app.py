"""The arq peer: the same tasks as functions/worker/tasks.py, queue and results on Valkey.

Runs in the peers' own virtualenv (infra/bench/.venv, made by ``make bench``). Queue and
results: KINDLING_BENCH_VALKEY (db 0; arq keeps both behind one connection), results kept
an hour (arq's default). ``max_jobs`` (ARQ_MAX_JOBS, default 10) is arq's concurrency, as
Celery's threads pool ``-c``. Worker: ``arq arq_app.WorkerSettings`` for the cold start (as
users start it); for throughput ``arq.worker.run_worker`` without the CLI, whose logging
config writes two INFO lines per job and has no quieter level (Celery runs at ``-l warning``).
"""

import asyncio
import hashlib
import os
import time

from arq.connections import RedisSettings

URL = os.environ.get("KINDLING_BENCH_VALKEY", "redis://127.0.0.1:6379/0")


async def noop(ctx):
    return None


async def sleep(ctx, ms=10):
    await asyncio.sleep(ms / 1000)
    return ms


async def stamp(ctx):
    return time.time()


async def cpu_hash(ctx, rounds=1000, size=1024):
    data = b"k" * size
    for _ in range(rounds):
        data = hashlib.sha256(data).digest() * (size // 32)
    return hashlib.sha256(data).hexdigest()


class WorkerSettings:
    functions = [noop, sleep, stamp, cpu_hash]
    redis_settings = RedisSettings.from_dsn(URL)
    max_jobs = int(os.environ.get("ARQ_MAX_JOBS", "10"))
