"""One jittered exponential backoff for everything in kindling that waits before retrying.

Full jitter (the AWS Architecture Blog's "Exponential Backoff and Jitter"): the wait after
the n-th failed attempt is drawn uniformly between 0 and min(cap, base * 2 ** (n - 1)).
Randomness comes from os.urandom so the cold path never imports :mod:`random` (~1 ms).
"""

import os

__all__ = ["Pauses", "backoff_ceiling", "compute_backoff"]


def compute_backoff(attempt: int, *, base: float, cap: float) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1 for the first failure).

    Uniform between 0 and min(cap, base * 2 ** (attempt - 1)): the ceiling doubles per
    attempt from ``base`` until it reaches ``cap``. Raises ValueError for an attempt below
    1 or a negative base or cap.
    """
    return backoff_ceiling(attempt, base=base, cap=cap) * ((int.from_bytes(os.urandom(7)) >> 3) / (1 << 53))


def backoff_ceiling(attempt: int, *, base: float, cap: float) -> float:
    """The most :func:`compute_backoff` waits after failed attempt number ``attempt``:
    min(cap, base * 2 ** (attempt - 1)). Same ValueErrors."""
    if attempt < 1:
        raise ValueError(f"attempt counts from 1, got {attempt}")
    if base < 0 or cap < 0:
        raise ValueError(f"base and cap must not be negative (base={base}, cap={cap})")
    # 2.0 ** 1000 is still a finite float: no OverflowError however many attempts.
    return min(cap, base * 2.0 ** min(attempt - 1, 1000))


class Pauses:
    """Pauses after consecutive failures of one dependency (a long-lived worker's, while
    Valkey or the result store is down): :func:`compute_backoff` from ``base`` seconds,
    doubling up to ``cap``, counted until :meth:`reset` (the dependency answered)."""

    __slots__ = ("base", "cap", "failures")

    def __init__(self, base: float = 0.05, cap: float = 5.0):
        self.base = base
        self.cap = cap
        self.failures = 0

    @property
    def delay(self) -> float:
        """The ceiling of the next pause (what a log line announces)."""
        return backoff_ceiling(self.failures + 1, base=self.base, cap=self.cap)

    def next(self) -> float:
        """Count a failure; the seconds to pause for it."""
        self.failures += 1
        return compute_backoff(self.failures, base=self.base, cap=self.cap)

    def reset(self) -> None:
        self.failures = 0
