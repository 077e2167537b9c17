"""One vocabulary of job statuses, and the rule for which record may replace which.

Recorded statuses (what a result record says):

* ``succeeded`` - the task returned; final.
* ``failed`` - an attempt raised; the job will be tried again.
* ``dead`` - the last allowed attempt failed (or the job kept crashing its worker); final
  until an operator revives it.
* ``rejected`` - the message is not a job this worker can run; nothing was run.
* ``queued`` - a new generation of a ``dead`` job, written by an operator's revive
  (``kindling jobs retry``, ``kindling dlq redrive``) just before its message is sent
  again. It stands for "no run recorded yet": the worker reads it as it reads no record
  at all (the next run is attempt 1), and every outcome replaces it. Only the revive
  writes it, with a condition of its own (:mod:`kindling.tools.ops.revive`): it replaces the
  ``dead`` record it read and nothing else, so a revive never undoes a ``succeeded``;
  and a ``failed`` or ``dead`` of an older generation never replaces it
  (:data:`GENERATION_CHECKED`).
  The producer writes no ``queued`` record (its fast path is one SendMessage), nor the
  worker a ``running`` one (it would be a second write per job on the hot path).
* ``scheduled`` - a job a worker received before its ``not_before``: handed back until due,
  no attempt used, and recorded with its ``due_at`` (epoch ms) so that ``kindling jobs show``
  and the dashboard say when it is due. Written by the runner's admission, and only for a
  job whose successes are recorded (results policy "all"), so that none is left
  ``scheduled`` for ever. It stands for no run yet (read as no record, like ``queued``):
  every outcome replaces it, and it replaces only no record or a ``scheduled`` one (never a
  real outcome, a revive's ``queued`` or a ``revoked``). Not final: a waiter keeps waiting.
* ``revoked`` - an operator cancelled the job (``kindling jobs revoke``,
  ``handle.revoke()``), or a Celery producer's message arrived past its ``expires``
  (:mod:`kindling.core.refusals`): no worker starts it from then on; final: the batch's duplicate
  check skips it at no extra cost. A run already under way runs on (no worker records
  "running", so a revoke cannot tell it from a queued job) and ends by :data:`REPLACES`.

Outcome-only statuses (what became of one delivery; never written):

* ``skipped`` - a duplicate of a job already finished, or a revoked one; acknowledged
  without running.
* ``deferred`` - not started (time ran short, ``not_before`` ahead, the store down, an
  envelope from a newer kindling); handed back for redelivery without using an attempt.
* ``duplicate`` - the same job id a second time in one batch; settled after the first.

Chord statuses (what a chord's record, ``chord#<id>``, says; :mod:`kindling.engine.followups`):

* ``waiting`` - members are still being counted;
* ``completed`` - every member succeeded and the callback was claimed (``sent_at`` once sent);
* ``dead`` - a member did not succeed (or its result is lost): the callback never runs.

Written without :mod:`enum`, which costs a cold start ~2 ms to import.
"""

from __future__ import annotations

__all__ = ["Status", "RECORDED", "BY_STATUS", "FINAL", "FAILED_FINAL", "RAN", "SETTLED", "HANDED_BACK", "REVIVABLE",
           "GENERATION_CHECKED", "NEWER_GENERATION", "WAITING", "COMPLETED", "CHORD_STATUSES", "generation_of",
           "may_replace"]


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
    QUEUED = "queued"
    REVOKED = "revoked"
    SCHEDULED = "scheduled"

    ALL = frozenset({SUCCEEDED, FAILED, DEAD, REJECTED, SKIPPED, DEFERRED, DUPLICATE, QUEUED, REVOKED, SCHEDULED})


SUCCEEDED = Status.SUCCEEDED
FAILED = Status.FAILED
DEAD = Status.DEAD
REJECTED = Status.REJECTED
SKIPPED = Status.SKIPPED
DEFERRED = Status.DEFERRED
DUPLICATE = Status.DUPLICATE
QUEUED = Status.QUEUED
REVOKED = Status.REVOKED
SCHEDULED = Status.SCHEDULED

RECORDED = frozenset({SUCCEEDED, FAILED, DEAD, REJECTED, QUEUED, REVOKED, SCHEDULED})
"""Statuses a result record can hold."""

BY_STATUS = RECORDED - {SUCCEEDED}
"""Recorded statuses the results table's ``by_status`` index holds: a succeeded job is left
out, so that it costs one index write (``by_task``); it is listed per task."""

FINAL = frozenset({SUCCEEDED, DEAD, REJECTED, REVOKED})
"""Recorded statuses a waiter stops at."""

FAILED_FINAL = FINAL - {SUCCEEDED}
"""Final statuses of a job that did not succeed: a chain ends, a chord fails."""

RAN = frozenset({SUCCEEDED, FAILED, DEAD})
"""Outcomes of an attempt that ran the task (they have a duration)."""

SETTLED = frozenset({SUCCEEDED, REJECTED, SKIPPED})
"""Outcomes after which a message is acknowledged (``dead`` is the trigger's to move)."""

HANDED_BACK = frozenset({FAILED, DEAD, DEFERRED})
"""Outcomes whose message goes back to the queue (or, for ``dead``, on to the dead letters)."""

REVIVABLE = frozenset({DEAD})
"""Recorded statuses an operator's revive moves to a new ``queued`` generation (a
``rejected`` needs none: any outcome of its next run replaces it)."""

GENERATION_CHECKED = frozenset({FAILED, DEAD})
"""Outcomes written only over a record of the generation their batch read (absent: 1).

A revive (:mod:`kindling.tools.ops.revive`) makes a new generation while a delivery of the old one
may still be running; that delivery's ``failed`` or ``dead`` would otherwise land on the
new ``queued`` record and bounce the new message to the dead letters. Not checked: a
``succeeded`` (one unconditional BatchWriteItem keeps the all-succeeded batch at one write;
the job did succeed, and the revive's message is then skipped as a duplicate) and a
``rejected`` (judged at admission, before any read; of a real job's record it replaces
only a ``queued`` one, which the new generation's run then replaces in turn)."""

WAITING = "waiting"
"""A chord's record while its members are counted."""
COMPLETED = "completed"
"""A chord's record once every member succeeded and its callback is claimed."""
CHORD_STATUSES = frozenset({WAITING, COMPLETED, DEAD})
"""What a chord's record can say (``dead``: a member did not succeed).

The Lua scripts of the Valkey result store and of the dead stream's revive compare and write
these words (and ``failed``, ``dead``) as literals: Lua cannot import them. A word changed
here must change there too; tests/tooling/test_vocabulary.py fails on a script's word that
is not one of these."""

NEWER_GENERATION = "newer generation"
"""What a store's ``write`` reports for a record refused because the stored one is of a
newer generation: the job was revived while this delivery ran; its outcome is dropped."""


def generation_of(record: dict) -> int:
    """A record's generation: 1 unless a revive (or a run of a revived job) wrote one."""
    return int(record.get("generation") or 1)


# Records only move forward. For each status a write may carry, the statuses an existing
# record may have for the write to replace it (``None``: no record yet). A ``succeeded``
# is the truth even over a ``dead`` a concurrent delivery wrote; a ``failed`` never
# replaces a final record; a ``rejected`` never replaces a real job's record. A revived
# job's ``queued`` stands for no record, so every outcome replaces it; it replaces only
# the ``dead`` it revives. A revoke lands only on a job not finished (no record, a
# ``failed`` or ``queued`` one). Of a run already under way when it landed, only a
# ``succeeded`` replaces it (the job did run: the truth); a ``failed`` or ``dead`` is
# refused, so the revoke stands and the job is not tried again. A ``scheduled`` record
# (a job received early) stands for no record too: whatever replaces ``queued`` replaces it;
# it replaces only no record or itself, so an early redelivery or retry never hides an
# outcome, and a refused one leaves the job handed back until due.
_NO_RUN_YET = frozenset({QUEUED, SCHEDULED})
REPLACES: dict[str, frozenset] = {
    SUCCEEDED: frozenset({None, SUCCEEDED, FAILED, DEAD, REJECTED, REVOKED}) | _NO_RUN_YET,
    FAILED: frozenset({None, FAILED, REJECTED}) | _NO_RUN_YET,
    DEAD: frozenset({None, FAILED, DEAD, REJECTED}) | _NO_RUN_YET,
    REJECTED: frozenset({None, REJECTED}) | _NO_RUN_YET,
    QUEUED: frozenset({DEAD}),
    REVOKED: frozenset({None, FAILED, REVOKED}) | _NO_RUN_YET,
    SCHEDULED: frozenset({None, SCHEDULED}),
}


def may_replace(new: str, new_attempts: int, old: str | None, old_attempts: int = 0) -> bool:
    """Whether a record with status ``new`` may overwrite one with status ``old``.

    A ``failed`` record also never replaces a ``failed`` of a later attempt: a slow
    delivery's stale failure cannot roll the attempt count back.
    """
    if old not in REPLACES[new]:
        return False
    return not (new == FAILED and old == FAILED and old_attempts > new_attempts)
