"""Tasks only the benchmarks use."""

import time

from kindling import task


@task(name="stamp")
def stamp() -> dict:
    """Returns the wall clock when it ran, for latency measurements."""
    now = time.time()
    return {"start": now, "end": time.time()}
