"""The result store's contract: every method the worker, the follow-ups, a handle and the
operator tools call on a store, and what each promises.

Three stores keep it: :class:`kindling.stores.dynamo.DynamoResultStore` (production),
:class:`kindling.stores.valkey.ValkeyResultStore` (results next to the stream) and
:class:`kindling.stores.memory.MemoryResultStore` (tests, eager mode). ``tests/contract`` runs one
suite over all three. The runner knows a store only by this protocol.

Records are plain dicts built by :func:`kindling.core.records.build_record`. Records only move
forward (:data:`kindling.core.status.REPLACES`, :func:`kindling.core.status.may_replace`): a stale
``failed`` never overwrites a ``succeeded``. A ``failed`` or ``dead`` record lands only on
a stored record of the generation its batch read (:data:`kindling.core.status.GENERATION_CHECKED`;
absent: 1), so a delivery that ran while the job was revived cannot undo the revive.

Every method that reaches the store raises :class:`~kindling.core.errors.StoreUnavailable` when
the store cannot be reached, so the runner hands the batch back instead of losing it. Every
one that takes ``deadline`` (a :func:`time.monotonic` value; ``None``: the store's own
bound) gives up at it with ``StoreUnavailable`` rather than hold an invocation Lambda is
about to kill; a deadline already passed sends nothing.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["ResultStore"]


@runtime_checkable
class ResultStore(Protocol):
    """A store of job outcomes (see the module's docstring for the rules every method keeps)."""

    def read_states(self, job_ids: Sequence[str], *, deadline: float | None = None) -> dict[str, tuple]:
        """``{job_id: (status, attempts)}`` for the ids that have a record, or
        ``(status, attempts, generation)`` for a revived job's (generation 2 and later). Ids
        without a record are left out. One batch read (the runner's duplicate check)."""
        ...

    def begin_read(self, job_ids: Sequence[str], *, deadline: float | None = None
                   ) -> Callable[[], dict[str, tuple]]:
        """:meth:`read_states` sent now; calling the result collects it, so the caller can
        work during the round trip. ``StoreUnavailable`` may come from either call."""
        ...

    def write(self, records: Sequence[dict], *, deadline: float | None = None) -> dict[str, str]:
        """Record outcomes (the last record of one id wins) and return the ones refused:
        ``{id: stored status}`` where the stored record may not be replaced, or
        ``{id: NEWER_GENERATION}`` (:data:`kindling.core.status.NEWER_GENERATION`) where a checked
        record's generation is older than the stored one's. ``{}``: all recorded."""
        ...

    def begin_write(self, records: Sequence[dict], *, deadline: float | None = None
                    ) -> Callable[[], dict[str, str]]:
        """:meth:`write` sent now where the store can, so the caller can work during the round
        trip; calling the result gives ``write``'s answer. ``StoreUnavailable`` may come from
        either call. DynamoDB on one connection (``concurrency=1``) makes the write when
        collected; the Valkey store makes it at once, since a stream worker collects it only
        after its next read of the stream and a waiter must not wait that long."""
        ...

    def read_results(self, job_ids: Sequence[str], *, deadline: float | None = None
                     ) -> dict[str, tuple[str, str | None, dict | None]]:
        """``{job_id: (status, result JSON text or None, its S3 pointer or None)}`` for the
        ids that have a record (chains and chords collect their results with it)."""
        ...

    def count_member(self, key: str, index: int, size: int, *, ok: bool, reason: str | None = None, at_ms: int = 0,
                     ttl_s: int = 0, deadline: float | None = None, message: str | None = None) -> dict:
        """Count chord member ``index`` (of ``size``) on the chord record ``key`` in one atomic
        step, so counting a member twice changes nothing; return the record as it was before
        (``{}`` if none; ``done``/``dead`` as collections of index strings). The record is
        ``waiting`` until a member is not ``ok``: then it is ``dead`` for good, its ``error``
        (:func:`kindling.core.records.chord_error`, the first one kept) naming the member."""
        ...

    def claim_chord(self, key: str, callback: str | None, *, at_ms: int = 0, claimed_at: int | None = None,
                    deadline: float | None = None) -> bool:
        """Move the chord record from ``waiting`` to ``completed`` (``completed_at=at_ms``,
        naming ``callback``) before the callback is sent: of every delivery that finds the
        chord complete, exactly one gets ``True``. With ``claimed_at``, take over the claim
        made then instead, if its callback was never marked sent."""
        ...

    def mark_chord_sent(self, key: str, *, at_ms: int = 0, deadline: float | None = None) -> None:
        """Note ``sent_at`` on a claimed (``completed``) chord record; nothing on any other."""
        ...

    def record(self, job_id: str, *, deadline: float | None = None) -> dict | None:
        """The job's record as stored (a consistent read), or ``None``: a handle's reader."""
        ...

    def take(self, key: str, want: int, limit: int, *, ttl_s: int, deadline: float | None = None) -> int:
        """Take up to ``want`` of the ``limit`` runs counted under ``key`` (a rate-limited task's
        window, :mod:`kindling.core.ratelimit`), atomically across every worker; return how many."""
        ...

    def give_back(self, key: str, count: int, *, deadline: float | None = None) -> None:
        """Return ``count`` runs taken under ``key`` to their window, for jobs that were granted
        them and never started; only while at least ``count`` are taken (else nothing changes)."""
        ...

    def revoke(self, job_id: str, *, task: str | None = None) -> None:
        """Record the job ``revoked`` (:func:`kindling.core.records.revoke`); raises
        :class:`~kindling.core.errors.KindlingError` naming the status that refused it."""
        ...
