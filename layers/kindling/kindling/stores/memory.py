"""The result store kept in memory, for tests and eager mode.

:class:`MemoryResultStore` keeps the :class:`~kindling.core.result_store.ResultStore` contract
in a dict, counting its round trips so tests can hold the runner to its budget.
"""

from __future__ import annotations

import time

from kindling.core.errors import StoreUnavailable
from kindling.core.records import chord_error, revoke, stored_state
from kindling.core.status import (
    COMPLETED,
    DEAD,
    GENERATION_CHECKED,
    NEWER_GENERATION,
    WAITING,
    generation_of,
    may_replace,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["MemoryResultStore"]


class MemoryResultStore:
    """Records kept in a dict; counts its round trips so tests can hold the budget."""

    def __init__(self) -> None:
        self.records: dict[str, dict] = {}
        self.reads = 0
        self.writes = 0
        self.events: list[tuple] = []  # what was sent and collected, in order (tests)
        self.fail = False  # set True to simulate an unreachable store
        self.counts = 0  # chord member counts (UpdateItem in DynamoDB)
        self.takes = 0  # rate limit takes (kindling.core.ratelimit)
        self.unlimited = False  # eager mode runs every job at once, as Celery's eager mode does

    @staticmethod
    def _in_time(deadline: float | None) -> None:
        if deadline is not None and deadline <= time.monotonic():
            raise StoreUnavailable("memory store: the deadline passed before the call")

    def _reach(self, deadline: float | None) -> None:
        """As a store behind a network fails: down (``fail``), or the deadline already passed."""
        if self.fail:
            raise StoreUnavailable("memory store is down (test)")
        self._in_time(deadline)

    def read_states(self, job_ids: Sequence[str], *, deadline: float | None = None) -> dict[str, tuple[str, int]]:
        self._reach(deadline)
        self.reads += 1
        return {i: stored_state(self.records[i]) for i in job_ids if i in self.records}

    def take(self, key: str, want: int, limit: int, *, ttl_s: int, deadline: float | None = None) -> int:
        """Take up to ``want`` of the ``limit`` runs counted under ``key`` (:mod:`kindling.core.ratelimit`)."""
        self._reach(deadline)
        self.takes += 1
        if self.unlimited:
            return want
        taken = self.records.get(key, {}).get("taken", 0)
        granted = max(0, min(want, limit - taken))
        self.records[key] = {"id": key, "taken": taken + granted}
        return granted

    def give_back(self, key: str, count: int, *, deadline: float | None = None) -> None:
        """Return ``count`` runs taken under ``key`` (:mod:`kindling.core.ratelimit`)."""
        self._reach(deadline)
        taken = self.records.get(key, {}).get("taken", 0)
        if 0 < count <= taken:  # as the DynamoDB store's condition
            self.records[key]["taken"] = taken - count

    def get_statuses(self, job_ids: Sequence[str]) -> dict[str, str]:
        return {i: state[0] for i, state in self.read_states(job_ids).items()}

    def begin_read(self, job_ids: Sequence[str], *, deadline: float | None = None):
        """``read_states`` sent now, collected by calling the result (as DynamoDB's is)."""
        ids = list(job_ids)
        self._in_time(deadline)
        self.events.append(("read sent", ids))

        def collect() -> dict[str, tuple[str, int]]:
            self.events.append(("read collected", ids))
            return self.read_states(ids)  # the deadline was the send's

        return collect

    def begin_write(self, records: Sequence[dict], *, deadline: float | None = None):
        """``write`` sent now, applied and read back by calling the result."""
        records = list(records)
        ids = [r["id"] for r in records]
        self._in_time(deadline)
        self.events.append(("write sent", ids))

        def collect() -> dict[str, str]:
            self.events.append(("write collected", ids))
            return self.write(records)  # the deadline was the send's

        return collect

    def read_results(self, job_ids: Sequence[str], *, deadline: float | None = None
                     ) -> dict[str, tuple[str, str | None, dict | None]]:
        self._reach(deadline)
        self.reads += 1
        return {i: (self.records[i]["status"], self.records[i].get("result"), self.records[i].get("result_payload"))
                for i in job_ids if i in self.records}

    def count_member(self, key: str, index: int, size: int, *, ok: bool, reason: str | None = None, at_ms: int = 0,
                     ttl_s: int = 0, deadline: float | None = None, message: str | None = None) -> dict:
        self._reach(deadline)
        self.counts += 1
        counted = key in self.records
        record = self.records.setdefault(key, {"id": key, "kind": "chord", "done": set(), "dead": set()})
        old = {k: set(v) if isinstance(v, set) else v for k, v in record.items()} if counted else {}
        record["done"].add(str(index))
        record.update(size=size, updated_at=at_ms)
        if ok:
            record.setdefault("status", WAITING)
        else:
            record["dead"].add(str(index))
            record["status"] = DEAD
            record.setdefault("error", chord_error(index, reason, message))
        return old

    def claim_chord(self, key: str, callback: str | None, *, at_ms: int = 0, claimed_at: int | None = None,
                    deadline: float | None = None) -> bool:
        self._reach(deadline)
        record = self.records.get(key) or {}
        found = (record.get("status"), record.get("completed_at"), record.get("sent_at"))
        if found[0] != WAITING if claimed_at is None else found != (COMPLETED, claimed_at, None):  # a take-over
            return False
        record.update(status=COMPLETED, completed_at=at_ms)
        if callback:
            record["callback"] = callback
        return True

    def mark_chord_sent(self, key: str, *, at_ms: int = 0, deadline: float | None = None) -> None:
        self._reach(deadline)
        record = self.records.get(key)
        if record is not None and record.get("status") == COMPLETED:
            record["sent_at"] = at_ms

    def record(self, job_id: str, *, deadline: float | None = None) -> dict | None:
        self._reach(deadline)
        return self.records.get(job_id)

    def revoke(self, job_id: str, *, task: str | None = None) -> None:
        """Record the job ``revoked`` (:func:`kindling.core.records.revoke`)."""
        revoke(self, job_id, task=task)

    def write(self, records: Sequence[dict], *, deadline: float | None = None) -> dict[str, str]:
        self._reach(deadline)
        self.writes += 1
        refused = {}
        for r in {r["id"]: r for r in records}.values():  # of two records of one job, the last wins
            old = self.records.get(r["id"])
            if old is not None and r["status"] in GENERATION_CHECKED and generation_of(old) != generation_of(r):
                refused[r["id"]] = NEWER_GENERATION if generation_of(old) > generation_of(r) else old["status"]
            elif old is None or may_replace(r["status"], r.get("attempts", 0), old["status"], old.get("attempts", 0)):
                self.records[r["id"]] = r
            else:
                refused[r["id"]] = old["status"]
        return refused
