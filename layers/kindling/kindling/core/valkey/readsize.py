"""How many entries the stream worker's long-running loop asks for per read (pure).

Every batch waits for some fixed costs whatever its size: above all the round trips to
Valkey and the result store (its write, read back before the next batch runs), and the
reading thread's turn at the interpreter. On loopback they are microseconds; a hop away
(ElastiCache, a store in another zone) each round trip is a millisecond or more, and a
batch of quick jobs spends a fifth of its time waiting. A larger batch spreads them over
more jobs, but a batch's records are written when it ends, so a large batch of slow jobs
would keep every record waiting on the slowest of them.

So the size adapts, as TCP's window does to a link: it starts at the worker's ``batch``,
doubles (up to ``most``) after each round that read a full batch (a backlog is waiting)
and took less than ``quick_s``, and halves (down to ``batch``) after a round that took
more than four times that. Quick jobs under a backlog end in batches of ``quick_s`` or so;
jobs slow enough that ``batch`` of them outlast it keep ``batch``; a record waits at most
about ``quick_s`` longer than it would have.

What a worker holds does not grow with its reads: a read larger than :data:`CHUNK` (the
worker's ``chunk``) is run that many entries at a time, the rest waiting undecoded (a few
hundred bytes each) until their turn. Larger reads still save the reads' round trips.
"""

from __future__ import annotations

__all__ = ["CHUNK", "MOST", "QUICK_S", "ReadSize"]

MOST = 2000
"""The default largest read: a few hundred kilobytes of typical bodies held at once."""

CHUNK = 500
"""The most entries the long-running loop runs at once by default, whatever its read size:
decoded, run and recorded, an entry holds a few kilobytes until its batch is settled, and
about three batches are alive at once (the one settled beside the running one, the running
one, and the next one admitted beside it)."""

QUICK_S = 0.1
"""A round quicker than this, with a backlog waiting, reads twice as many next time."""


class ReadSize:
    """The next read's size, from the last round's (``after``). Not thread-safe: the
    loop's thread updates it between rounds."""

    __slots__ = ("least", "most", "quick_s", "size")

    def __init__(self, least: int, most: int | None = None, quick_s: float | None = None):
        if least < 1:
            raise ValueError(f"batch must be at least 1, got {least}")
        self.least = least
        self.most = max(least, MOST if most is None else most)
        self.quick_s = QUICK_S if quick_s is None else quick_s
        self.size = least

    def after(self, full: bool, round_s: float) -> int:
        """The size for the next read, after a round that took ``round_s`` and whose last
        read came back ``full`` (as many entries as asked for)."""
        if round_s > 4 * self.quick_s:
            self.size = max(self.least, self.size // 2)
        elif full and round_s < self.quick_s:
            self.size = min(self.most, self.size * 2)
        return self.size
