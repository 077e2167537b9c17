"""Example tasks, used by the demo, the tests and the benchmarks."""

import time

from kindling import current_job, task


@task(name="noop")
def noop() -> None:
    """Does nothing: measures the runner's own overhead."""


@task(name="echo")
def echo(*args, **kwargs):
    """Returns its arguments."""
    return {"args": list(args), "kwargs": kwargs}


@task(name="sleep")
def sleep(ms: float = 10) -> float:
    """Blocks for ``ms`` milliseconds (I/O-bound work stands in like this)."""
    time.sleep(ms / 1000)
    return ms


@task(name="async_sleep")
async def async_sleep(ms: float = 10) -> float:
    """Awaits for ``ms`` milliseconds; many of these run concurrently within a batch."""
    import asyncio

    await asyncio.sleep(ms / 1000)
    return ms


@task(name="cpu_hash")
def cpu_hash(rounds: int = 1000, size: int = 1024) -> str:
    """SHA-256 over ``size`` bytes, ``rounds`` times: CPU-bound work."""
    import hashlib
    data = b"k" * size
    for _ in range(rounds):
        data = hashlib.sha256(data).digest() * (size // 32)
    return hashlib.sha256(data).hexdigest()


@task(name="always_fails")
def always_fails(message: str = "this task always fails") -> None:
    """Raises every time: ends ``dead`` after its last attempt, in the DLQ."""
    raise RuntimeError(message)


@task(name="flaky")
def flaky(fails: int = 1) -> int:
    """Fails on its first ``fails`` attempts, then succeeds; returns the attempt number."""
    attempt = current_job().attempt
    if attempt <= fails:
        raise RuntimeError(f"flaky: attempt {attempt} of {fails} planned failures")
    return attempt


# Chains and groups (kindling.producer.canvas): chain(add.s(1, 2), add.s(10)) feeds 3 into add(3, 10);
# group([add.s(i, i) for i in range(10)]).then(total.s()) calls total once with the ten sums.


@task(name="add")
def add(x: float, y: float = 0) -> float:
    """x + y: a chain step (the previous step's result arrives as ``x``)."""
    return x + y


@task(name="total")
def total(values: list, extra: float = 0) -> float:
    """The sum of a group's results (a chord's callback: they arrive as ``values``), plus ``extra``."""
    return sum(values) + extra
