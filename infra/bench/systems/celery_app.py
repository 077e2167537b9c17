"""The Celery baseline: the same tasks as functions/worker/tasks.py, broker and results on Valkey.

Broker: KINDLING_BENCH_VALKEY (db 0); results: the same server, db 1 (``redis://`` backend).
Settings are what a careful user would pick for short tasks (see SETTINGS, reported by the
harness).
"""

import hashlib
import os
import time

from celery import Celery

_url = os.environ.get("KINDLING_BENCH_VALKEY", "redis://127.0.0.1:6379/0")
BROKER = _url
BACKEND = _url.rsplit("/", 1)[0] + "/1"

SETTINGS = {
    # Redelivery if a worker dies mid-task, as kindling's at-least-once delivery.
    "task_acks_late": True,
    "task_reject_on_worker_lost": True,
    # Tasks here take <= 10 ms: the default prefetch (4 per process/thread) keeps the pool
    # fed; 1 is for long tasks and would make the baseline slower than a user would run it.
    "worker_prefetch_multiplier": 4,
    "task_serializer": "json",
    "result_serializer": "json",
    "accept_content": ["json"],
    "broker_connection_retry_on_startup": True,
    "worker_hijack_root_logger": False,
}
# Worker command-line flags the harness adds (startup without cluster chatter, as a careful
# user of a single worker does): --without-gossip --without-mingle --without-heartbeat.
WORKER_FLAGS = ["--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "warning"]

app = Celery("kindling_bench", broker=BROKER, backend=BACKEND)
app.conf.update(SETTINGS)


@app.task(name="noop")
def noop():
    return None


@app.task(name="sleep")
def sleep(ms=10):
    time.sleep(ms / 1000)
    return ms


@app.task(name="stamp")
def stamp():
    """Returns the wall clock when it ran: the latency scenario's enqueue -> start."""
    return time.time()


@app.task(name="cpu_hash")
def cpu_hash(rounds=1000, size=1024):
    data = b"k" * size
    for _ in range(rounds):
        data = hashlib.sha256(data).digest() * (size // 32)
    return hashlib.sha256(data).hexdigest()
