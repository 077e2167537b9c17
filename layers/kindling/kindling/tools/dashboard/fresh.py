"""Stale while revalidating: a poll answered at once from the last read, which a background
thread then brings up to date.

The page polls every few seconds with the same question (the overview's search, its first
page); reading the indexes again inside each request would make every poll wait for a
round of parallel queries. The first asking reads in the request; later ones get the
answer as it stands (``as_of`` tells its age) while one thread per question reads again,
at most once per ``ttl_s``. A new question (other filters, another page) is read in its
request. At most ``keep`` questions are kept, the least recently asked dropped first.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

__all__ = ["Fresh"]


class Fresh:
    def __init__(self, ttl_s: float = 1.0, keep: int = 64, clock=time.monotonic):
        self.ttl_s, self.keep, self.clock = ttl_s, keep, clock
        self._entries: OrderedDict[Hashable, tuple[float, dict]] = OrderedDict()
        self._running: set[Hashable] = set()
        self._lock = threading.Lock()

    def get(self, key: Hashable, read: Callable[[], dict]) -> dict:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                if self.clock() - entry[0] >= self.ttl_s and key not in self._running:
                    self._running.add(key)
                    threading.Thread(target=self._again, args=(key, read), daemon=True).start()
                return entry[1]
        return self._put(key, read())

    def _put(self, key: Hashable, value: dict) -> dict:
        value = dict(value, as_of=int(time.time() * 1000))
        with self._lock:
            self._entries[key] = (self.clock(), value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.keep:
                self._entries.popitem(last=False)
        return value

    def _again(self, key: Hashable, read: Callable[[], dict]) -> None:
        try:
            self._put(key, read())
        except Exception:  # noqa: BLE001 - the next poll tries again; the last answer stands meanwhile
            pass
        finally:
            with self._lock:
                self._running.discard(key)
