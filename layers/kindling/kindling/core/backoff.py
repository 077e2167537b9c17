"""One jittered exponential backoff for everything in kindling that waits before retrying.

Full jitter (the AWS Architecture Blog's "Exponential Backoff and Jitter"): the wait after
the n-th failed attempt is drawn uniformly between 0 and min(cap, base * 2 ** (n - 1)).
The functions live in :mod:`kindling.core.policy`, with the other retry rules, which the worker
loads anyway; this module keeps their names for the code that imports them from here, and
:class:`Pauses`, a long-lived worker's count of a dependency's consecutive failures.
"""

from kindling.core.policy import backoff_ceiling, compute_backoff

__all__ = ["Pauses", "backoff_ceiling", "compute_backoff"]


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
