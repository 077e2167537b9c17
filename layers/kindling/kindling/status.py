"""One vocabulary of job statuses, and the rule for which record may replace which.

Recorded statuses (what a result record says):

* ``succeeded`` - the task returned; final.
* ``failed`` - an attempt raised; the job will be tried again.
* ``dead`` - the last allowed attempt failed (or the job kept crashing its worker); final
  until an operator revives it.
* ``rejected`` - the message is not a job this worker can run; nothing was run.

Outcome-only statuses (what became of one delivery; never written):

* ``skipped`` - a duplicate of a job already finished; acknowledged without running.
* ``deferred`` - not started (time ran short, ``not_before`` ahead, the store down, an
  envelope from a newer kindling); handed back for redelivery without using an attempt.
* ``duplicate`` - the same job id a second time in one batch; settled after the first.

Written without :mod:`enum`, which costs a cold start ~2 ms to import.
"""

from __future__ import annotations

__all__ = ["Status", "RECORDED", "FINAL", "SETTLED", "HANDED_BACK", "may_replace"]


class Status:
    """The statuses, by name. Members are plain ``str`` values: records, logs and dict keys
    (orjson refuses ``str`` subclasses as keys) carry the bare words."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DEAD = "dead"
    REJECTED = "rejected"
    SKIPPED = "skipped"
    DEFERRED = "deferred"
    DUPLICATE = "duplicate"

    ALL = frozenset({SUCCEEDED, FAILED, DEAD, REJECTED, SKIPPED, DEFERRED, DUPLICATE})


SUCCEEDED = Status.SUCCEEDED
FAILED = Status.FAILED
DEAD = Status.DEAD
REJECTED = Status.REJECTED
SKIPPED = Status.SKIPPED
DEFERRED = Status.DEFERRED
DUPLICATE = Status.DUPLICATE

RECORDED = frozenset({SUCCEEDED, FAILED, DEAD, REJECTED})
"""Statuses a result record can hold."""

FINAL = frozenset({SUCCEEDED, DEAD, REJECTED})
"""Recorded statuses a waiter stops at."""

SETTLED = frozenset({SUCCEEDED, REJECTED, SKIPPED})
"""Outcomes after which a message is acknowledged (``dead`` is the trigger's to move)."""

HANDED_BACK = frozenset({FAILED, DEAD, DEFERRED})
"""Outcomes whose message goes back to the queue (or, for ``dead``, on to the dead letters)."""

# Records only move forward. For each status a write may carry, the statuses an existing
# record may have for the write to replace it (``None``: no record yet). A ``succeeded``
# is the truth even over a ``dead`` a concurrent delivery wrote; a ``failed`` never
# replaces a final record; a ``rejected`` never replaces a real job's record.
REPLACES: dict[str, frozenset] = {
    SUCCEEDED: frozenset({None, SUCCEEDED, FAILED, DEAD, REJECTED}),
    FAILED: frozenset({None, FAILED, REJECTED}),
    DEAD: frozenset({None, FAILED, DEAD, REJECTED}),
    REJECTED: frozenset({None, REJECTED}),
}


def may_replace(new: str, new_attempts: int, old: str | None, old_attempts: int = 0) -> bool:
    """Whether a record with status ``new`` may overwrite one with status ``old``.

    A ``failed`` record also never replaces a ``failed`` of a later attempt: a slow
    delivery's stale failure cannot roll the attempt count back.
    """
    if old not in REPLACES[new]:
        return False
    return not (new == FAILED and old == FAILED and old_attempts > new_attempts)
