"""One jittered exponential backoff for everything in kindling that waits before retrying.

Full jitter (the AWS Architecture Blog's "Exponential Backoff and Jitter"): the wait after
the n-th failed attempt is drawn uniformly between 0 and min(cap, base * 2 ** (n - 1)).
Randomness comes from os.urandom so the cold path never imports :mod:`random` (~1 ms).
"""

import os

__all__ = ["compute_backoff"]


def compute_backoff(attempt: int, *, base: float, cap: float) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1 for the first failure).

    Uniform between 0 and min(cap, base * 2 ** (attempt - 1)): the ceiling doubles per
    attempt from ``base`` until it reaches ``cap``. Raises ValueError for an attempt below
    1 or a negative base or cap.
    """
    if attempt < 1:
        raise ValueError(f"attempt counts from 1, got {attempt}")
    if base < 0 or cap < 0:
        raise ValueError(f"base and cap must not be negative (base={base}, cap={cap})")
    # 2.0 ** 1000 is still a finite float: no OverflowError however many attempts.
    ceiling = min(cap, base * 2.0 ** min(attempt - 1, 1000))
    return ceiling * ((int.from_bytes(os.urandom(7)) >> 3) / (1 << 53))  # 53 random bits: [0, 1)
