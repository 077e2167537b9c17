"""Backlog and dead-letter depth over time: the dashboard samples the queues itself.

Every :data:`INTERVAL_S` a background thread reads the jobs queue's and its DLQ's
``ApproximateNumberOf*`` attributes (two ``GetQueueAttributes`` calls) into a ring of
:data:`KEEP` samples (24 hours at that interval). CloudWatch's ``AWS/SQS`` metrics would
keep history from before the dashboard started, but cost a ``GetMetricData`` per chart and
come at one-minute resolution, several minutes late; the samples are what the operator's
own dashboard saw, at its own interval, from its start.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque

from kindling.tools.ops import Stack

__all__ = ["BacklogSampler", "INTERVAL_S", "KEEP"]

INTERVAL_S = 10
KEEP = 8640


class BacklogSampler:
    """``sample()`` once, or ``start()`` a daemon thread sampling every ``interval_s``."""

    def __init__(self, stack: Stack, *, interval_s: float = INTERVAL_S, keep: int = KEEP, clock=time.time):
        self.stack, self.interval_s, self.clock = stack, interval_s, clock
        self.samples: deque = deque(maxlen=keep)
        self.latest: dict = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def sample(self) -> dict:
        """Read the depths now; ``{"queue": {...}, "dlq": {...}}`` (whichever exist)."""
        found: dict = {}
        if self.stack.queue_url:
            with contextlib.suppress(Exception):  # a queue out of reach: a gap in the series, not an error
                found["queue"] = self.stack.depth(self.stack.queue_url)
            with contextlib.suppress(Exception):  # no redrive policy: no DLQ to show
                found["dlq"] = self.stack.depth(self.stack.dlq_url)
        with self._lock:
            self.latest = found
            if found:
                self.samples.append((int(self.clock() * 1000), found))
        return found

    def series(self, since_ms: int) -> dict:
        """The samples since ``since_ms``: times, backlog (visible + delayed), in flight, DLQ."""
        with self._lock:
            kept = [(t, s) for t, s in self.samples if t >= since_ms]
        q = [s.get("queue") or {} for _, s in kept]
        d = [s.get("dlq") or {} for _, s in kept]
        return {"t": [t for t, _ in kept],
                "backlog": [x.get("visible", 0) + x.get("delayed", 0) if x else None for x in q],
                "in_flight": [x.get("in_flight") for x in q],
                "dlq": [x.get("visible", 0) + x.get("in_flight", 0) if x else None for x in d]}

    def start(self) -> BacklogSampler:
        def loop() -> None:
            while not self._stop.is_set():
                self.sample()
                self._stop.wait(self.interval_s)

        threading.Thread(target=loop, name="kindling-dashboard-backlog", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
