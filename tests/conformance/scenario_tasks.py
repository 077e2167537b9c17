"""The tasks every conformance scenario runs, in a registry of their own (never the example
worker's): each one does one thing a scenario needs, on every path alike."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time

from kindling import Backoff, Retry, current_job
from kindling.core.registry import Registry

registry = Registry()
task = registry.task

RUNS: dict[str, int] = {}
"""How often each key was run, in this process (every path runs its jobs in-process)."""
_lock = threading.Lock()


def ran(key: str) -> None:
    with _lock:
        RUNS[key] = RUNS.get(key, 0) + 1


@task(name="c.add")
def add(a, b):
    return a + b


@task(name="c.echo")
def echo(value):
    return value


@task(name="c.total")
def total(values: list) -> int:
    return sum(values)


@task(name="c.fail")
def fail(message: str = "always"):
    raise RuntimeError(message)


@task(name="c.flaky")
def flaky(failures: int = 1) -> int:
    """Fails its first ``failures`` attempts, then returns the attempt that succeeded."""
    attempt = current_job().attempt
    if attempt <= failures:
        raise RuntimeError(f"attempt {attempt} fails")
    return attempt


@task(name="c.backoff", backoff=Backoff(base=7, factor=2, max=3600, jitter=False))
def backoff_fail():
    raise RuntimeError("fails with a fixed backoff")


@task(name="c.retry_after")
def retry_after(seconds: int = 42) -> int:
    attempt = current_job().attempt
    if attempt == 1:
        raise Retry(after=seconds)
    return attempt


@task(name="c.retry_on", retry_on=(ConnectionError,))
def retry_on(kind: str) -> int:
    """Raises ``kind`` (``connection`` or ``value``) on the first attempt."""
    attempt = current_job().attempt
    if attempt == 1:
        raise ConnectionError("retried") if kind == "connection" else ValueError("not retried")
    return attempt


@task(name="c.no_retry_on", no_retry_on=(ValueError,))
def no_retry_on():
    raise ValueError("never retried")


@task(name="c.slow", timeout=0.2)
def slow(seconds: float = 1.0) -> None:
    time.sleep(seconds)


@task(name="c.count")
def count(key: str) -> str:
    ran(key)
    return key


@task(name="c.count_again", skip_succeeded=False)
def count_again(key: str) -> str:
    ran(key)
    return key


@task(name="c.size")
def size(data: str) -> int:
    return len(data)


@task(name="c.big")
def big(n: int) -> str:
    return "x" * n


def _deep(levels: int):
    """Arrays nested ``levels`` deep (``[]`` is one level)."""
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


EDGE_VALUES = {
    "nan": lambda: float("nan"),
    "inf": lambda: float("inf"),
    "int_2_64": lambda: 2**64,  # past a 64-bit integer, 20 digits
    "int_2_70": lambda: 2**70,
    "int_minus_2_70": lambda: -(2**70),
    "int_keys": lambda: {1: "a"},
    "datetime": lambda: dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
    "nested_200": lambda: _deep(200),
    "nested_254": lambda: _deep(254),  # kindling.core.codec.MAX_DEPTH: the deepest a result may be
    "nested_255": lambda: _deep(255),
    "nested_2000": lambda: _deep(2000),
}


@task(name="c.make")
def make(kind: str):
    """Returns the edge value named ``kind`` (the results' side of the edges)."""
    return EDGE_VALUES[kind]()


# -- hooks: every call, in order, by job id -----------------------------------------------------

HOOK_CALLS: dict[str, list[tuple]] = {}
"""``{job id: [(hook, attempt, error type or None), ...]}`` in the order the hooks were called."""


def _called(hook: str):
    def record(job, error):
        with _lock:
            HOOK_CALLS.setdefault(job.id, []).append((hook, job.attempt, type(error).__name__ if error else None))
    record.__qualname__ = hook
    return record


def _raises(job, error):
    _called("task.on_success")(job, error)
    raise RuntimeError("the hook's own bug")


class HookInterrupt(BaseException):
    """Not an Exception: as a framework's own interrupt, KeyboardInterrupt or CancelledError."""


def _interrupts(job, error):
    _called("task.on_success")(job, error)
    raise HookInterrupt("the hook's interrupt")


SLOW_HOOK_RELEASE = threading.Event()
"""Set when a scenario is done with its slow hook: a hook the worker abandoned then ends."""


def _slow(job, error):
    _called("task.on_success")(job, error)
    SLOW_HOOK_RELEASE.wait(10)


@registry.on_failure
def _any_failure(job, error):
    _called("on_failure")(job, error)


@registry.on_dead
def _any_dead(job, error):
    _called("on_dead")(job, error)


@registry.on_success
def _any_success(job, error):
    _called("on_success")(job, error)


@task(name="c.hooked", on_success=_called("task.on_success"), on_failure=_called("task.on_failure"),
      on_dead=_called("task.on_dead"))
def hooked(failures: int = 0) -> int:
    """Fails its first ``failures`` attempts, with hooks of its own."""
    attempt = current_job().attempt
    if attempt <= failures:
        raise RuntimeError(f"attempt {attempt} fails")
    return attempt


@task(name="c.hook_raises", on_success=_raises)
def hook_raises() -> str:
    return "done"


@task(name="c.hook_interrupts", on_success=_interrupts)
def hook_interrupts() -> str:
    return "done"


@task(name="c.slow_hook", on_success=_slow)
def slow_hook() -> str:
    return "done"


# -- the results policy (test_results_policy.py) ---------------------------------------------


def _count_and_fail(key: str, failures: int) -> str:
    """Counts its runs; fails its first ``failures`` attempts (as the job's context numbers them)."""
    ran(key)
    if current_job().attempt <= failures:
        raise RuntimeError(f"attempt {current_job().attempt} fails")
    return key


@task(name="c.count_failures", results="failures")
def count_failures(key: str, failures: int = 0) -> str:
    return _count_and_fail(key, failures)


@task(name="c.count_none", results="none")
def count_none(key: str, failures: int = 0) -> str:
    return _count_and_fail(key, failures)


@task(name="c.count_all", results="all")
def count_all(key: str) -> str:
    ran(key)
    return key


@task(name="c.count_fail", max_attempts=1)
def count_fail(key: str) -> None:
    ran(key)
    raise RuntimeError(f"run {RUNS[key]} fails")


@task(name="c.rated", rate_limit="1/h")
def rated(key: str) -> str:
    ran(key)
    return key


with contextlib.suppress(ImportError):  # the deployed stack's function ships no pydantic: not run there
    from conformance.model_tasks import Order, Receipt, place_order  # noqa: F401
