"""The stream as a port: a consumer group's reads, the settlement of outcomes, follow-ups
(:class:`kindling.core.port.TriggerPort`, the contract the SQS port keeps too).

What SQS is to the Lambda handler, this is to the stream worker (:mod:`kindling.triggers.valkey.worker`)
and the Lambda drain: it turns entries into :class:`~kindling.engine.runner.Delivery` s and the
runner's outcomes into acknowledgements. It judges no job: every rule is the runner's.

Reading (:meth:`StreamConsumer.fetch`):

1. one pipelined round trip: :data:`kindling.shared.valkey.scripts.MOVE_DUE` moves delayed jobs
   that are due from ``<stream>:scheduled`` onto the stream, and ``XAUTOCLAIM`` takes entries
   idle for more than ``visibility_ms`` (whatever consumer holds them, a dead one included);
   their delivery counts come from ``XPENDING`` (XAUTOCLAIM has already counted this
   delivery);
2. otherwise ``XREADGROUP ... BLOCK block_ms >`` (a blocking read, never a sleep-poll; it
   blocks no longer than until the next delayed job is due).

An entry's delivery count counts runs only (hand-backs give theirs back), so its deliveries
are marked ``counts_runs``: the runner records an entry delivered more often than its job's
attempts allow (its workers crashed every time) ``dead`` without running it, unless the store
already has a final outcome for it.

Settling (:meth:`StreamConsumer.settle`, planned by the pure :func:`plan_settlement`; the
long-running worker sends it in its next read's round trip, ``fetch(None, settle,
together=True)``): one pipelined round trip of ``XACK`` + ``XDEL`` of settled entries (succeeded, rejected,
skipped); for ``dead`` ones an ``XADD`` of the body and error to ``<stream>:dead`` first
(capped at ``dead_maxlen`` entries, ``MAXLEN ~``, the trimmed count logged); a job read
before its ``not_before`` goes to the scheduled set and is acknowledged, and so does a
``failed`` one, due after the runner's ``retry_in`` (``Retry(after=...)``, its task's
backoff, the deployment's retry delay), signature and all: it comes back as a new entry,
its attempts counted in its record. A ``failed`` entry without a ``retry_in`` (retry delay
0) stays pending and is reclaimed after ``visibility_ms``; other ``deferred`` ones (not
started) are claimed back with their delivery count as it was before this delivery, so
hand-backs never use up deliveries, and reclaimed after the runner's ``retry_in``.

A consumer that stops with nothing pending is removed from the group
(:meth:`StreamConsumer.forget_consumers`, with those idle for ``STALE_CONSUMER_MS`` and
holding nothing), so drains that come and go leave no consumers behind.
"""

from __future__ import annotations

from kindling.core.envelope import encode_job, now_ms
from kindling.core.status import DEAD, DEFERRED, FAILED, SETTLED
from kindling.core.valkey import keys
from kindling.core.valkey.keys import FIELD, SIG_FIELD, TRACE_FIELD
from kindling.drivers.valkey import errors
from kindling.engine.runner import Delivery
from kindling.shared.valkey.connection import text
from kindling.shared.valkey.scheduled import member, move_args
from kindling.shared.valkey.scripts import FORGET, MOVE_DUE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from kindling.engine.runner import Outcome
    from kindling.shared.signed import Verifier

    Settled = tuple[Sequence[Outcome], Sequence[Delivery]]  # a batch to settle: its outcomes, its deliveries

DEAD_MAXLEN = 10_000
"""Entries kept in ``<stream>:dead`` by default (``XADD MAXLEN ~``); the records stay in the store."""

STALE_CONSUMER_MS = 600_000
"""A consumer idle this long and holding nothing is removed by whoever forgets consumers."""


class StreamConsumer:
    """One consumer of a stream's consumer group: reads deliveries, settles outcomes, sends jobs.

    Args:
        client: a Valkey client (kindling's, or a ``valkey.Valkey``).
        stream, group, consumer: the stream key, consumer group and this consumer's name.
        batch: entries read per round.
        visibility_ms: how long an entry may stay pending before another consumer reclaims it.
        dead_maxlen: entries kept in the dead stream (approximately: ``XADD MAXLEN ~``); the
            count trimmed is logged. Default ``KINDLING_VALKEY_DEAD_MAXLEN`` or 10,000.
        verifier: the runner's check of signatures, when the deployment signs jobs: deliveries
            then name the stream they were read from, and jobs sent are signed for it.
        log: where the dead stream's trimming is reported (``None``: nowhere).
    """

    def __init__(self, client, stream: str, group: str, consumer: str, *, batch: int = 100,
                 visibility_ms: int = 30_000, dead_maxlen: int | None = None, verifier: Verifier | None = None,
                 log: Callable[[dict], object] | None = None):
        self.client = client
        self.stream = stream
        self.group = group
        self.consumer = consumer
        self.batch = batch
        self.visibility_ms = visibility_ms
        self.dead_stream = keys.dead_key(stream)
        self.scheduled = keys.scheduled_key(stream)
        if dead_maxlen is None:
            import os

            dead_maxlen = int(os.environ.get("KINDLING_VALKEY_DEAD_MAXLEN", DEAD_MAXLEN))
        self.dead_maxlen = dead_maxlen
        self.verifier = verifier
        self.log = log
        self.next_due_ms: int | None = None  # the earliest delayed job still waiting, as of the last round
        # The consumer whose read's reply may have been lost: its pending entries are taken
        # back by the next plain read (_recover), not left until another consumer reclaims them.
        self.unread_by: str | None = None
        self._group_ready = False
        self._move = client.register_script(MOVE_DUE)

    # -- the group -----------------------------------------------------------------------

    def ensure_group(self) -> None:
        """Create the group (and the stream) if missing; a restarted server without
        persistence has lost both."""
        try:
            self.client.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except errors.response_errors() as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._group_ready = True

    def connection_lost(self) -> None:
        """Valkey went away: the group is made sure of again before the next read (a server
        restarted without persistence has lost it)."""
        self._group_ready = False

    def idle(self) -> bool:
        """Nothing left: no entry in the stream (acked ones are deleted), none pending, and
        no delayed job waiting."""
        pipe = self.client.pipeline(transaction=False)
        pipe.xlen(self.stream)
        pipe.xpending(self.stream, self.group)
        pipe.zcard(self.scheduled)
        length, pending, waiting = pipe.execute()
        count = pending.get("pending", 0) if isinstance(pending, dict) else pending[0]
        return length == 0 and not count and not waiting

    def forget_consumers(self, stale_ms: int = STALE_CONSUMER_MS) -> int:
        """Remove this consumer from the group if it holds nothing pending, and any other
        consumer idle for ``stale_ms`` that holds nothing; returns how many were removed.
        A removed consumer that reads again is simply created again."""
        script = self.client.register_script(FORGET)
        return int(script(keys=[self.stream], args=[self.group, self.consumer, stale_ms]))

    # -- reading ---------------------------------------------------------------------------

    def fetch(self, wait_ms: int | None, settle: Sequence[Settled] = (), *, together: bool = False) -> list[Delivery]:
        """Reclaimed entries first (idle past the visibility timeout), else new ones, blocking
        up to ``wait_ms`` for them (:class:`kindling.core.port.TriggerPort`'s ``fetch``).

        ``settle``: batches (outcomes, deliveries) to settle first, in the same pipelined
        round trip as the reclaim (:meth:`settle` for each, in order): their entries are
        acknowledged before idle ones are reclaimed, so none of them is reclaimed.
        ``together``: new entries are read (without blocking) in that round trip too, and
        come after the reclaimed ones: up to twice ``batch`` entries when some are reclaimed."""
        if not self._group_ready:
            self.ensure_group()
        try:
            if together:
                return self._reclaim(settle, read=True)
            if self.unread_by is not None:  # this round takes back its own entries, no one else's
                deliveries = self._reclaim(settle, autoclaim=False)
                deliveries += self._recover()
            else:
                deliveries = self._reclaim(settle)
            if not deliveries:
                deliveries = self._read(wait_ms)
        except errors.response_errors() as exc:
            if "NOGROUP" not in str(exc):
                self._note_lost_reply(exc)
                raise
            self.ensure_group()  # the server lost the group (restart without persistence)
            return []
        except BaseException as exc:
            self._note_lost_reply(exc)
            raise
        return deliveries

    def _note_lost_reply(self, exc: BaseException) -> None:
        """A read whose reply may have been lost after the server ran it (the connection lost
        or a timeout once it was sent, a cluster's WAIT unanswered after it): the entries it
        delivered are this consumer's pending ones, which nobody else reclaims before
        ``visibility_ms``. The next plain read (:meth:`fetch` without ``together``) takes them
        back first (:meth:`_recover`)."""
        if errors.outcome_unknown(exc) and self.unread_by is None:
            self.unread_by = self.consumer

    def _recover(self) -> list[Delivery]:
        """The entries a lost reply delivered: those pending for the consumer that read
        (``unread_by``), claimed by this one with ``XCLAIM ... RETRYCOUNT`` their own delivery
        count, so taking them back counts no delivery (the lost read counted the one they are
        now run as). No ``XAUTOCLAIM`` in the same round: one whose reply is lost too would
        count a delivery of them again. Called only when this consumer holds no entry it is
        running (after the batches it settles first): its pending entries are then unread
        ones, or handed back (which then come back before their time, their count as it was)."""
        pending = self.client.xpending_range(self.stream, self.group, min="-", max="+", count=self.batch,
                                             consumername=self.unread_by)
        counts: dict[int, list] = {}
        for p in pending:
            counts.setdefault(int(p["times_delivered"]), []).append(p["message_id"])
        deliveries = []
        if counts:
            pipe = self.client.pipeline(transaction=False)
            for times, ids in counts.items():
                pipe.xclaim(self.stream, self.group, self.consumer, 0, ids, retrycount=times)
            for times, claimed in zip(counts, pipe.execute(), strict=True):
                deliveries += [self._delivery(i, f, times) for i, f in claimed if i is not None and f is not None]
        if len(pending) < self.batch:  # all taken back (more: the next round takes the rest)
            self.unread_by = None
        return deliveries

    def _reclaim(self, settle: Sequence[Settled] = (), read: bool = False, autoclaim: bool = True) -> list[Delivery]:
        pipe = self.client.pipeline(transaction=False)
        settled = [self._queue_settlement(pipe, outcomes, deliveries) for outcomes, deliveries in settle]
        self._move(keys=[self.scheduled, self.stream], args=move_args(now_ms()), client=pipe)
        if autoclaim:
            pipe.xautoclaim(self.stream, self.group, self.consumer, self.visibility_ms, start_id="0-0",
                            count=self.batch)
        if read:
            pipe.xreadgroup(self.group, self.consumer, {self.stream: ">"}, count=self.batch, block=None)
        replies = pipe.execute()
        for done in settled:
            done(replies)
        new = self._new_entries(replies.pop()) if read else []
        reply = replies.pop() if autoclaim else ()
        moved = replies[-1]
        self.next_due_ms = int(moved[1]) if int(moved[1]) >= 0 else None
        entries = reply[1] if len(reply) > 1 else []
        entries = [(i, f) for i, f in entries if f is not None]  # deleted meanwhile
        if not entries:
            return new
        pipe = self.client.pipeline(transaction=False)
        for entry_id, _ in entries:
            pipe.xpending_range(self.stream, self.group, min=entry_id, max=entry_id, count=1)
        counts = pipe.execute()
        deliveries = []
        for (entry_id, fields), info in zip(entries, counts, strict=True):
            attempts = int(info[0]["times_delivered"]) if info else 2
            deliveries.append(self._delivery(entry_id, fields, attempts))
        return deliveries + new

    def _read(self, block_ms: int | None) -> list[Delivery]:
        if block_ms and self.next_due_ms is not None:  # wake up for the next delayed job
            block_ms = max(1, min(block_ms, self.next_due_ms - now_ms()))
        return self._new_entries(self.client.xreadgroup(self.group, self.consumer, {self.stream: ">"},
                                                        count=self.batch, block=block_ms))

    def _new_entries(self, reply) -> list[Delivery]:
        """The deliveries of an ``XREADGROUP ... >`` reply (first deliveries)."""
        if not reply:
            return []
        if isinstance(reply, dict):  # RESP3
            entries = next(iter(reply.values()))
            entries = entries[0] if entries and isinstance(entries[0], list) else entries
        else:
            entries = reply[0][1]
        return [self._delivery(i, f, 1) for i, f in entries]

    def _delivery(self, entry_id, fields, attempts: int) -> Delivery:
        fields = fields or {}
        body = fields.get(FIELD)
        if body is None:
            body = fields.get(keys.JOB_NAME)
        if body is None:  # not a kindling entry: the runner rejects the empty body
            body = b""
        # A signature is kept with the entry wherever it goes (dead stream, scheduled set),
        # and checked against the stream it was read from when signing is on.
        trace = fields.get(TRACE_FIELD) or fields.get(keys.TRACE_NAME)
        d = Delivery(text(entry_id), body, attempts, trace=text(trace) if trace else None,
                     signature=fields.get(SIG_FIELD) or fields.get(keys.SIG_NAME), counts_runs=True,
                     stream=text(self.stream))
        if self.verifier is not None:
            from kindling.core.jobsig import stream_destination

            d.source = stream_destination(self.stream)
        return d

    # -- writing ---------------------------------------------------------------------------

    def send(self, jobs: list) -> None:
        """Put jobs on this stream in one pipelined round trip (a chain's next step, a chord's
        callback: :mod:`kindling.engine.followups`), signed for the stream when signing is on."""
        verifier = self.verifier
        if verifier is not None:
            from kindling.core import jobsig

            destination = jobsig.stream_destination(self.stream)
        pipe = self.client.pipeline(transaction=False)
        for job in jobs:
            body = encode_job(job)
            fields = {FIELD: body}
            if verifier is not None:
                fields[SIG_FIELD] = verifier.keyring.sign(destination, body)
            pipe.xadd(self.stream, fields)
        pipe.execute()

    def settle(self, outcomes: Sequence[Outcome], deliveries: Sequence[Delivery]) -> None:
        """Settle a batch's entries in one pipelined round trip (:func:`plan_settlement`
        says what each becomes). The dead stream is capped at ``dead_maxlen``; what the cap
        trimmed (its length before, plus what was added, minus its length after) is logged."""
        self.settle_all([(outcomes, deliveries)])

    def settle_all(self, settle: Sequence[Settled]) -> None:
        """Settle batches (outcomes, deliveries), in order, in one pipelined round trip."""
        pipe = self.client.pipeline(transaction=False)
        settled = [self._queue_settlement(pipe, outcomes, deliveries) for outcomes, deliveries in settle]
        if len(pipe):
            replies = pipe.execute()
            for done in settled:
                done(replies)

    def _queue_settlement(self, pipe, outcomes: Sequence[Outcome],
                          deliveries: Sequence[Delivery]) -> Callable[[list], None]:
        """Queue a batch's settlement on ``pipe``; the callable returned reads its part of
        the pipeline's replies (what the dead stream's cap trimmed)."""
        plan = plan_settlement(outcomes, deliveries, now_ms(), self.visibility_ms)
        if not plan.done and not plan.given_back:
            return lambda replies: None
        first = len(pipe)
        if plan.dead:
            pipe.xlen(self.dead_stream)  # the dead stream's length before
        for fields in plan.dead:
            pipe.xadd(self.dead_stream, fields, maxlen=self.dead_maxlen, approximate=True)
        for job, due_ms in plan.scheduled:
            pipe.zadd(self.scheduled, {job: due_ms})
        for ref, idle, before in plan.given_back:
            pipe.xclaim(self.stream, self.group, self.consumer, 0, [ref], idle=idle, retrycount=before, justid=True)
        after = len(pipe)
        if plan.dead:
            pipe.xlen(self.dead_stream)
        if plan.done:
            pipe.xack(self.stream, self.group, *plan.done)
            pipe.xdel(self.stream, *plan.done)

        def done(replies: list) -> None:
            if plan.dead:
                trimmed = int(replies[first]) + len(plan.dead) - int(replies[after])
                if trimmed > 0 and self.log:
                    self.log({"kindling": "dead_trimmed", "stream": self.dead_stream, "trimmed": trimmed,
                              "maxlen": self.dead_maxlen})

        return done


class Settlement:
    """What settling a batch sends, in this order: ``dead`` entries' fields (``XADD`` to the
    dead stream), ``scheduled`` jobs (``ZADD`` member, due ms), entries ``given_back``
    (``XCLAIM``: ref, idle ms or ``None``, delivery count before this delivery), then the
    ``done`` entries' ``XACK`` and ``XDEL``. Everything copied elsewhere is copied before
    its entry is acknowledged: a crash in between leaves a copy in both places, never none."""

    __slots__ = ("dead", "scheduled", "given_back", "done")

    def __init__(self) -> None:
        self.dead: list[dict] = []
        self.scheduled: list[tuple[bytes | str, int]] = []
        self.given_back: list[tuple[str, int | None, int]] = []
        self.done: list[str] = []


def plan_settlement(outcomes: Sequence[Outcome], deliveries: Sequence[Delivery], now: int,
                    visibility_ms: int) -> Settlement:
    """What becomes of each entry of a batch, given the runner's outcomes (pure).

    ``dead`` entries are copied to the dead stream, settled and dead ones acknowledged and
    deleted, jobs read before they were due and failed ones to be retried after a delay
    moved to the scheduled set, other ``deferred`` ones given their delivery back.

    A deferred entry was not started (the store was down, the invocation's time ran
    short): that delivery must not count. The runner counts attempts in the result
    record, so the stream's delivery counter only bounds runs that crash the worker
    before anything is recorded (:func:`kindling.core.policy.out_of_deliveries`); left as it is, an outage
    with entries reclaimed every ``visibility_ms`` would push it past the limit and
    record jobs dead that never ran. So the entry is claimed again with ``XCLAIM ...
    RETRYCOUNT <count before this delivery> JUSTID``: in the same round trip as the
    acknowledgements, it stays pending in its place with its counter as if this delivery
    had not happened, and ``IDLE`` set so that it is reclaimed after the runner's
    ``retry_in`` (at once for a job cut off by the invocation's end, after a growing
    backoff when the store is down, never later than ``visibility_ms``).
    Re-adding a copy would move it to the end of the stream and wipe the count of real
    deliveries too; a side hash of hand-backs would cost a command on every
    acknowledgement. If another consumer reclaimed the entry while this batch ran late,
    the claim takes it back; that consumer's acknowledgement still settles it.

    A job deferred because its ``not_before`` is ahead goes to the scheduled set
    (``ZADD`` before its ``XACK``/``XDEL``: a crash in between leaves a copy in both,
    run once and skipped once, never none). A failed job with a ``retry_in`` goes there
    too, due that many seconds after now: its failure is already recorded, so the copy
    that comes back is its next attempt (a crash in between may run that attempt twice,
    at least once as always), and its entry's own delivery count starts afresh.
    """
    delivered = {d.ref: d for d in deliveries}
    plan = Settlement()
    for o in outcomes:
        d = delivered[o.ref]
        if o.status == DEAD:
            fields = {
                FIELD: d.body, keys.DEAD_ERROR: o.reason or "", keys.DEAD_ENTRY: o.ref,
                keys.DEAD_JOB_ID: o.job_id or "", keys.DEAD_ATTEMPTS: str(o.attempts), keys.DEAD_AT: str(now),
            }
            if d.signature:  # kept, so a job put back on its stream still verifies
                fields[SIG_FIELD] = d.signature
            if d.trace:  # kept for a redrive (kindling dlq redrive --valkey)
                fields[TRACE_FIELD] = d.trace
            plan.dead.append(fields)
            plan.done.append(o.ref)
        elif o.status in SETTLED:
            plan.done.append(o.ref)
        elif o.status == FAILED and o.retry_in is not None and (o.unread or o.record is None):
            # A job not read before it ran (a results policy, skip_succeeded=False) counts its
            # attempts by deliveries: it stays pending with its count, back after retry_in
            # (at most visibility_ms), instead of a new entry whose count would start afresh.
            plan.given_back.append((o.ref, max(0, visibility_ms - int(o.retry_in * 1000)), d.attempts))
        elif o.status == FAILED and o.retry_in is not None:
            plan.scheduled.append((member(d.body, d.signature), now + int(o.retry_in * 1000)))
            plan.done.append(o.ref)
        elif o.status == DEFERRED:
            not_before = o.job.not_before if o.job is not None else None
            if not_before is not None and not_before > now:
                plan.scheduled.append((member(d.body, d.signature), not_before))
                plan.done.append(o.ref)
                continue
            before = max(0, d.attempts - 1)
            # back in sight after the runner's retry_in (0: cut off by the invocation's end)
            idle = None if o.retry_in is None else max(0, visibility_ms - int(o.retry_in * 1000))
            plan.given_back.append((o.ref, idle, before))
    return plan
