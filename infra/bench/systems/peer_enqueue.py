"""Enqueue jobs for the arq or dramatiq peer (run in the peers' virtualenv); print where results land.

    python peer_enqueue.py arq|dramatiq TASK N [ARGS_JSON]

Prints ``ELAPSED <seconds>`` (the enqueue calls alone, one at a time, connected first), then
one line per job: ``<db> <result key>`` (the key exists once the job's result is stored),
so the harness can wait for it from its own virtualenv.
"""

import asyncio
import json
import sys
import time


def enqueue_arq(task: str, n: int, args: list) -> tuple[float, list[str]]:
    from arq import create_pool
    from arq_app import WorkerSettings

    async def go():
        redis = await create_pool(WorkerSettings.redis_settings)
        await redis.ping()
        t0 = time.perf_counter()
        jobs = [await redis.enqueue_job(task, *args) for _ in range(n)]
        elapsed = time.perf_counter() - t0
        await redis.aclose()
        return elapsed, [f"0 arq:result:{j.job_id}" for j in jobs]

    return asyncio.run(go())


def enqueue_dramatiq(task: str, n: int, args: list) -> tuple[float, list[str]]:
    import dramatiq_app

    actor = getattr(dramatiq_app, task)
    dramatiq_app.broker.client.ping()
    t0 = time.perf_counter()
    messages = [actor.send(*args) for _ in range(n)]
    elapsed = time.perf_counter() - t0
    return elapsed, [f"1 {dramatiq_app.backend.build_message_key(m)}" for m in messages]


def main() -> int:
    kind, task, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    args = json.loads(sys.argv[4]) if len(sys.argv) > 4 else []
    elapsed, lines = (enqueue_arq if kind == "arq" else enqueue_dramatiq)(task, n, args)
    sys.stdout.write(f"ELAPSED {elapsed!r}\n" + "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
