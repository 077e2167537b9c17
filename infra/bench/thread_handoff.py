"""What a thread per batch costs the async producer (kindling.producer.coalesce): the median round trip of
``loop.run_in_executor`` for a no-op, against one turn of the event loop.

    python infra/bench/thread_handoff.py
"""

import asyncio
import statistics
import time
from concurrent.futures import ThreadPoolExecutor


async def main():
    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(1)
    await loop.run_in_executor(pool, lambda: None)
    hand, plain = [], []
    for _ in range(3000):
        t0 = time.perf_counter()
        await loop.run_in_executor(pool, lambda: None)
        hand.append((time.perf_counter() - t0) * 1e6)
        t0 = time.perf_counter()
        await asyncio.sleep(0)
        plain.append((time.perf_counter() - t0) * 1e6)
    print(f"thread hand-off per batch: median {statistics.median(hand):.1f} us, p90 "
          f"{statistics.quantiles(hand, n=10)[-1]:.1f} us; "
          f"one event-loop turn: median {statistics.median(plain):.1f} us")


if __name__ == "__main__":
    asyncio.run(main())
