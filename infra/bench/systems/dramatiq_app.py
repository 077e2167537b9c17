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

# The network scenario's fixed run: DRAMATIQ_BENCH_MAX_CONNECTIONS bounds both pools, and a
# thread past the bound waits for a connection instead of failing (redis-py's blocking pool).
MAX_CONNECTIONS = int(os.environ.get("DRAMATIQ_BENCH_MAX_CONNECTIONS", "0"))
if MAX_CONNECTIONS:
    import redis

    broker = RedisBroker(connection_pool=redis.BlockingConnectionPool.from_url(URL, max_connections=MAX_CONNECTIONS))
    backend = RedisBackend(client=redis.Redis(connection_pool=redis.BlockingConnectionPool.from_url(
        RESULTS_URL, max_connections=MAX_CONNECTIONS)))
else:
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
