"""The "bare batched consumer" reference: the least a Valkey job consumer can do.

    python bare_consumer.py --url redis://127.0.0.1:P/0 [--threads 100]

BLMPOP up to 500 (--batch) bodies from the list ``bare:jobs`` (one round trip), run them (in a thread
pool when --threads > 1), write all results with one pipelined round trip of SETs to db 1,
repeat; exit when the list stays empty for 0.2 s (unless --forever). No acks, retries, visibility or records
beyond {id, status, result}: a lower bound, not a competitor. Producer: :func:`enqueue`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

import valkey

LIST = "bare:jobs"
PREFIX = "bare-result:"


def _cpu_hash(rounds=1000, size=1024):
    data = b"k" * size
    for _ in range(rounds):
        data = hashlib.sha256(data).digest() * (size // 32)
    return hashlib.sha256(data).hexdigest()


def _sleep(ms=10):
    time.sleep(ms / 1000)
    return ms


TASKS = {"noop": lambda: None, "sleep": _sleep, "cpu_hash": _cpu_hash, "stamp": time.time}


def enqueue(client, jobs: list[dict], chunk: int = 500) -> None:
    for i in range(0, len(jobs), chunk):
        client.rpush(LIST, *[json.dumps(j) for j in jobs[i : i + chunk]])


def _run(body: bytes) -> tuple[str, str]:
    job = json.loads(body)
    value = TASKS[job["task"]](*job["args"], **job["kwargs"])
    return job["id"], json.dumps({"status": "succeeded", "result": value})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=500, help="BLMPOP count")
    ap.add_argument("--forever", action="store_true", help="do not exit when the list is empty")
    ns = ap.parse_args()
    src = valkey.Valkey.from_url(ns.url)
    dst = valkey.Valkey.from_url(ns.url.rsplit("/", 1)[0] + "/1")
    pool = None
    if ns.threads > 1:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(ns.threads)
    while True:
        got = src.blmpop(0.2, 1, LIST, direction="LEFT", count=ns.batch)
        if not got:
            if ns.forever:
                continue
            return 0
        bodies = got[1]
        done = list(pool.map(_run, bodies)) if pool else [_run(b) for b in bodies]
        pipe = dst.pipeline(transaction=False)
        for job_id, value in done:
            pipe.set(PREFIX + job_id, value)
        pipe.execute()


if __name__ == "__main__":
    raise SystemExit(main())
