"""kindling's stream worker draining a stream once, ``worker.run()`` timed in its own process.

    python stream_burst.py URL BATCH MAX_BATCH CONCURRENCY

Results in Valkey db 1 through ``kindling_valkey.py``'s result store, jobs inline (no
threads), as the throughput scenario runs the worker; the tasks are functions/worker/tasks.py.
``MAX_BATCH`` 0 leaves the worker's default (reads grown from ``BATCH``). Prints the seconds
``worker.run(burst=True)`` took (no interpreter start in it), the jobs that succeeded and the
process's peak RSS in KiB (``VmHWM``, read after the run). Run by the ``read_memory``
scenario (scenarios/read_memory.py) and by batch_sizes.py. No argparse or pathlib: the
``read_memory`` scenario measures this process's memory.
"""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FUNCTIONS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "functions/worker")


def main() -> None:
    sys.path[:0] = [HERE, FUNCTIONS]
    import kindling_valkey
    import tasks  # noqa: F401 - registers noop
    from kindling.valkey import StreamWorker, connect

    url, batch, most, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    store = kindling_valkey.ValkeyResultStore(connect(url.rsplit("/", 1)[0] + "/1"))
    worker = StreamWorker(url, store=store, batch=batch, max_batch=most or None, block_ms=200, concurrency=concurrency,
                          threads=0, log=False)
    started = time.perf_counter()
    counts = worker.run(burst=True)
    seconds = time.perf_counter() - started
    with open("/proc/self/status") as status:
        hwm_kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    print(seconds, counts.get("succeeded", 0), hwm_kib)


if __name__ == "__main__":
    main()
