"""A live worker's claim on the entries it is running, kept fresh while they run.

An entry pending for longer than the visibility time is taken by another consumer
(``XAUTOCLAIM``) and run again: right for a worker that died, wrong for one still running a
long batch. So while a batch runs, a heartbeat thread claims its entries again every third
of the visibility time with ``XCLAIM <stream> <group> <consumer> 0 <ids> JUSTID``: the same
consumer, the idle time back to zero, the delivery counter untouched (JUSTID does not count
a delivery). :data:`kindling.shared.valkey.scripts.EXTEND` claims only the entries still pending
for this consumer, so an
entry another consumer has already taken over (this worker was stalled past the visibility
time) is not taken back from it.

The thread is started with ``_thread`` (threading is not on the drain's path), opens its own
connection at its first beat (so a batch shorter than a beat costs no connection), and is
stopped and joined before the batch is settled.
"""

from __future__ import annotations

from _thread import allocate_lock, start_new_thread

from kindling.shared.valkey.scripts import EXTEND


class Heartbeat:
    """Keeps a consumer's entries claimed while it runs them: ``with heartbeat.hold(ids): ...``.

    Args:
        connect: returns a new client (called once, in the thread, at the first beat).
        stream, group: the stream and consumer group.
        interval_s: seconds between beats (a third of the visibility time).
        log: where a failed beat is reported (``None``: nowhere); the next beat tries again.
    """

    def __init__(self, connect, stream: str, group: str, interval_s: float, log=None):
        self._connect = connect
        self.stream = stream
        self.group = group
        self.interval_s = interval_s
        self.log = log
        self.beats = 0  # claims renewed, all batches (tests)
        self._client = None
        self._script = None

    def hold(self, consumer: str, ids: list[str]) -> _Held:
        return _Held(self, consumer, ids)

    def beat(self, consumer: str, ids: list[str]) -> int:
        """Claim ``ids`` again for ``consumer`` (those it still holds); returns how many."""
        if self._client is None:
            self._client = self._connect()
            self._script = self._client.register_script(EXTEND)
        claimed = int(self._script(keys=[self.stream], args=[self.group, consumer, *ids]))
        self.beats += 1
        return claimed

    def _run(self, consumer: str, ids: list[str], stop, done) -> None:
        try:
            while not stop.acquire(True, self.interval_s):
                try:
                    self.beat(consumer, ids)
                except Exception as exc:  # noqa: BLE001 - a missed beat; the next one tries again
                    self._client = None
                    if self.log is not None:
                        self.log({"kindling": "heartbeat_failed", "error": f"{type(exc).__name__}: {exc}"[:300]})
        finally:
            done.release()


class _Held:
    __slots__ = ("heartbeat", "consumer", "ids", "_stop", "_done")

    def __init__(self, heartbeat: Heartbeat, consumer: str, ids: list[str]):
        self.heartbeat, self.consumer, self.ids = heartbeat, consumer, ids
        self._stop = self._done = None

    def __enter__(self) -> _Held:
        if self.ids and self.heartbeat.interval_s > 0:
            self._stop, self._done = allocate_lock(), allocate_lock()
            self._stop.acquire()
            self._done.acquire()
            start_new_thread(self.heartbeat._run, (self.consumer, self.ids, self._stop, self._done))
        return self

    def __exit__(self, *exc) -> None:
        if self._stop is not None:
            self._stop.release()
            self._done.acquire()  # joined: no beat after the batch is settled
