"""The dramatiq peer: the same tasks as functions/worker/tasks.py, broker and results on Valkey.

Runs in the peers' own virtualenv (infra/bench/.venv, made by ``make bench``). Broker:
KINDLING_BENCH_VALKEY (db 0); results: the Results middleware's Redis backend on db 1, as
Celery's. Worker: ``dramatiq dramatiq_app --processes 1 --threads 10``.
"""

import hashlib
import os
import time

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.results import Results
from dramatiq.results.backends import RedisBackend

URL = os.environ.get("KINDLING_BENCH_VALKEY", "redis://127.0.0.1:6379/0")
RESULTS_URL = URL.rsplit("/", 1)[0] + "/1"

broker = RedisBroker(url=URL)
backend = RedisBackend(url=RESULTS_URL)
broker.add_middleware(Results(backend=backend))
dramatiq.set_broker(broker)


@dramatiq.actor(store_results=True, max_retries=2)
def noop():
    return None


@dramatiq.actor(store_results=True, max_retries=2)
def sleep(ms=10):
    time.sleep(ms / 1000)
    return ms


@dramatiq.actor(store_results=True, max_retries=2)
def stamp():
    return time.time()


@dramatiq.actor(store_results=True, max_retries=2)
def cpu_hash(rounds=1000, size=1024):
    data = b"k" * size
    for _ in range(rounds):
        data = hashlib.sha256(data).digest() * (size // 32)
    return hashlib.sha256(data).hexdigest()
