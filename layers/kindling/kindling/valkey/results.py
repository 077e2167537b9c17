"""Results in Valkey (optional): outcomes next to the stream, with waiters that block."""

from __future__ import annotations

import time

from kindling import codec
from kindling.valkey.connection import connect


class ValkeyResultStore:
    """Outcomes in Valkey instead of DynamoDB, with waiters that block instead of polling.

    A record is JSON under ``<prefix>:result:<id>`` with an expiry of ``ttl_s``. Writing a
    final outcome (succeeded, dead, rejected) also pushes to ``<prefix>:done:<id>``, which
    :meth:`wait` blocks on with ``BLPOP``. ``get_statuses`` and ``write`` are one pipelined
    round trip each. Valkey errors become :class:`~kindling.errors.StoreUnavailable`, so the
    runner hands a batch back rather than losing it.
    """

    def __init__(self, url: str, ttl_s: int = 7 * 86_400, *, prefix: str = "kindling", client=None):
        self.url = url
        self.ttl_s = ttl_s
        self.prefix = prefix
        self.client = client or connect(url, socket_timeout=10)

    def _key(self, job_id: str) -> str:
        return f"{self.prefix}:result:{job_id}"

    def _done(self, job_id: str) -> str:
        return f"{self.prefix}:done:{job_id}"

    def get_statuses(self, job_ids):
        ids = list(dict.fromkeys(job_ids))
        if not ids:
            return {}
        values = self._guard(lambda: self.client.mget([self._key(i) for i in ids]))
        return {i: codec.loads(v)["status"] for i, v in zip(ids, values, strict=True) if v is not None}

    def write(self, records) -> None:
        from kindling.results import FINAL

        pipe = self.client.pipeline(transaction=False)
        for r in records:
            pipe.set(self._key(r["id"]), codec.dumps(r), ex=self.ttl_s)
            if r.get("status") in FINAL:
                pipe.rpush(self._done(r["id"]), 1)
                pipe.expire(self._done(r["id"]), self.ttl_s)
        if records:
            self._guard(pipe.execute)

    def get(self, job_id: str) -> dict | None:
        value = self._guard(lambda: self.client.get(self._key(job_id)))
        return codec.loads(value) if value is not None else None

    def wait(self, job_id: str, timeout: float = 30.0) -> dict | None:
        """The job's final record, blocking (``BLPOP``) up to ``timeout`` seconds for it;
        ``None`` if none arrived in time (a ``failed`` record is waited through)."""
        from kindling.results import FINAL

        deadline = time.monotonic() + timeout
        while True:
            record = self.get(job_id)
            if record is not None and record.get("status") in FINAL:
                return record
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            done = self._done(job_id)
            block_s = max(0.01, min(left, 5.0))
            popped = self._guard(lambda key=done, t=block_s: self.client.blpop([key], timeout=t))
            if popped:  # put the token back for any other waiter on the same job
                pipe = self.client.pipeline(transaction=False)
                pipe.rpush(done, 1)
                pipe.expire(done, self.ttl_s)
                self._guard(pipe.execute)

    @staticmethod
    def _guard(fn):
        from valkey.exceptions import ValkeyError

        from kindling.errors import StoreUnavailable

        try:
            return fn()
        except (ValkeyError, OSError) as exc:
            raise StoreUnavailable(f"Valkey result store: {exc}") from exc
