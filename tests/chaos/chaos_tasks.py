"""The chaos suite's task, loaded by the workers it starts (``--tasks tests/chaos/chaos_tasks.py``).

``chaos.ledger`` appends one line per execution to the file named by ``KINDLING_CHAOS_LEDGER``
(``<job id> <attempt> <worker pid> <unix time>``) before doing its work, so the test can count the side
effects of every job, including runs whose outcome a crash kept from being recorded. One
``write`` on an ``O_APPEND`` descriptor: lines from concurrent threads and processes never
interleave.
"""

import os
import time

from kindling import current_job, task


@task(name="chaos.ledger")
def ledger(ms: float = 0) -> str:
    job = current_job()
    fd = os.open(os.environ["KINDLING_CHAOS_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{job.id} {job.attempt} {os.getpid()} {time.time():.3f}\n".encode())
    finally:
        os.close(fd)
    if ms:
        time.sleep(ms / 1000)
    return job.id
