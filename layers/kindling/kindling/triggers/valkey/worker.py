"""The stream worker: a :class:`~kindling.triggers.valkey.consumer.StreamConsumer` feeding
:class:`kindling.engine.runner.Runner`.

Per round: read a batch (:meth:`StreamConsumer.fetch <kindling.triggers.valkey.consumer.StreamConsumer.fetch>`),
run it through the runner with a heartbeat claiming its entries again every third of
``visibility_ms`` (:mod:`kindling.triggers.valkey.heartbeat`), so a batch that outlasts the visibility
time is not taken over and run twice, then settle its entries in one round trip
(:meth:`StreamConsumer.settle <kindling.triggers.valkey.consumer.StreamConsumer.settle>`). Every rule
about a job (signatures, attempts and the crash-loop rule, retry timing, records) is the
runner's: the worker never reads a body itself.

The long-running loop keeps round trips off its batches' way, since a hop away each costs
a millisecond or more: while a batch is executed (its check read, its jobs run, its write
sent), a thread of its own settles the batch before it in the same pipelined round trip as
the next read, reads the next batch and sends its duplicate check. The loop's thread then
waits for one round trip per batch: its write, read back before the next batch runs (a batch
is never run into a store outage) and before any of its entries is acknowledged.
Under a backlog of quick jobs it reads larger batches, round by round
(:mod:`kindling.core.valkey.readsize`), so that round trip is spread over more jobs.
What it holds is bounded by ``chunk`` whatever the read size: a larger read is run ``chunk``
entries at a time, the rest waiting undecoded, and a settled batch lets go of everything.

What is the worker's own is the long-running loop (a batch that breaks the runner is the
runner's to contain, :mod:`kindling.engine.contain`, phase by phase here):
the next batch read (and its duplicate check sent) while the running one is executed and
its write is in flight, SIGTERM/SIGINT finishing the batch in hand, and pauses
with a backoff while Valkey or the result store is down.
"""

from __future__ import annotations

import time

from kindling.core import codec
from kindling.core.backoff import Pauses
from kindling.core.batch import STORE_OUTAGE, STORE_UNAVAILABLE, Budget, Delivery, Outcome
from kindling.core.errors import KindlingError, StoreUnavailable
from kindling.core.status import DEFERRED
from kindling.core.valkey.keys import DEFAULT_GROUP, DEFAULT_STREAM
from kindling.drivers.valkey import errors
from kindling.engine.runner import Runner
from kindling.shared.valkey.connection import connect, default_consumer
from kindling.triggers.valkey.consumer import STALE_CONSUMER_MS, StreamConsumer
from kindling.triggers.valkey.heartbeat import Heartbeat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

ORJSON_AFTER_JOBS = 10_000
"""Jobs settled before a worker that is never idle switches to orjson. The import (about
40 ms: it loads dataclasses, inspect and ast) is repaid at about 6 us a job, so a long-lived
worker switches when it first finds the stream empty, and a busy one (or a drain) only once
the switch has paid for itself."""


def _port(name: str) -> property:
    """An attribute of the worker's port, read and set through the worker."""
    return property(lambda self: getattr(self.port, name), lambda self, value: setattr(self.port, name, value))


class StreamWorker:
    """A consumer-group worker feeding :class:`kindling.engine.runner.Runner`.

    Its stream (``stream``, ``group``, ``consumer``, ``batch``, ``visibility_ms``, ``client``,
    ``scheduled``, ``dead_stream``, ``dead_maxlen``, ``next_due_ms``) is its :attr:`port`'s.

    Args:
        url: the Valkey URL.
        table: the DynamoDB results table (ignored when ``store`` is given).
        registry: the tasks (default: everything registered with ``@task``).
        store: a result store (default: ``DynamoResultStore(table, concurrency=4)``).
        runner: an existing runner to feed (the Lambda drain passes the invocation's); its
            registry, store and ``max_attempts`` are used, and the process's JSON codec is
            left as it is. Give either this or what to build one from, not both.
        stream, group, consumer: the stream key, consumer group and this consumer's name.
        batch: entries read per round: the long-running loop's (:meth:`run`) first reads.
        max_batch: the most entries the long-running loop reads at once. While reads come
            back full and rounds are quick (under 0.1 s), it reads twice as many each round,
            up to this (default 2,000, and never less than ``batch``); slow rounds halve it
            back toward ``batch`` (:mod:`kindling.core.valkey.readsize`). Equal to ``batch``: a fixed size.
        chunk: the most entries the long-running loop runs as one batch (default 500,
            :data:`kindling.core.valkey.readsize.CHUNK`): a larger read is run this many at a
            time, so that what the worker holds (decoded entries, records, outcomes) is
            bounded by it, not by the read size.
        block_ms: how long one ``XREADGROUP`` blocks waiting for entries.
        visibility_ms: how long an entry may stay pending before another consumer reclaims it.
        max_attempts: deliveries before a failing job is dead (a job or task may say less or
            more); default ``KINDLING_MAX_ATTEMPTS``, else 3 (:func:`kindling.core.policy.configured_max_attempts`).
        dead_maxlen: entries kept in the dead stream (approximately: ``XADD MAXLEN ~``); the
            count trimmed is logged. Default ``KINDLING_VALKEY_DEAD_MAXLEN`` or 10,000.
        heartbeat: claim the entries of a running batch again every third of
            ``visibility_ms`` (default on).
        client: a ``valkey.Valkey`` client (default: :func:`connect` to ``url``).
        log: ``False`` for no per-batch log lines.
        **runner_options: passed to the runner (``concurrency``, ``default_timeout``, ...).
    """

    def __init__(self, url: str, table: str | None = None, registry=None, *, store=None, runner: Runner | None = None,
                 stream: str = DEFAULT_STREAM, group: str = DEFAULT_GROUP, consumer: str | None = None,
                 batch: int = 100, max_batch: int | None = None, chunk: int | None = None, block_ms: int = 1000,
                 visibility_ms: int = 30_000, max_attempts: int | None = None,
                 dead_maxlen: int | None = None, heartbeat: bool = True, client=None, log=True, **runner_options):
        consumer = consumer or default_consumer()
        if runner is None:
            runner = _build_runner(table, registry, store, max_attempts, consumer, log, runner_options)
        elif table or registry is not None or store is not None or max_attempts is not None or runner_options:
            raise KindlingError("StreamWorker: give a runner or what to build one from, not both")
        self.url = url
        client = client or connect(url, socket_timeout=max(10.0, block_ms / 1000 + 10))
        self.port = StreamConsumer(client, stream, group, consumer, batch=batch, visibility_ms=visibility_ms,
                                   dead_maxlen=dead_maxlen, verifier=runner.verifier, log=self._log)
        self.block_ms = block_ms
        self.max_batch = max_batch
        self.chunk = chunk  # None: readsize.CHUNK, read when the loop starts
        self._read_full = False  # whether the last read took as many entries as it asked for
        self.runner = runner
        # A store on one connection (DynamoResultStore's default) cannot have the next batch's
        # read in flight while this batch's write waits to be read back: they would share it.
        self._overlaps = getattr(runner.store, "concurrency", None) != 1
        self.counts: dict[str, int] = {}
        self._stopping = False
        # The next batch, read (a list of entries) or admitted (a _Batch) while the running
        # one's jobs ran in threads; and what went wrong reading it, for the next round.
        self._ahead: _Batch | list[Delivery] | None = None
        self._ahead_held = None  # the heartbeat's hold on entries read ahead but not admitted
        self._ahead_error: BaseException | None = None
        # What the last read took beyond the chunk being run, undecoded, held by the heartbeat.
        self._unread: list[Delivery] = []
        self._unread_held = None
        self._chunk = 0  # the loop's chunk (run())
        # Batches completed (their writes read back) whose entries are yet to be settled, in
        # the next read's round trip; and the statuses of those settled beside a running batch, to count.
        self._unsettled: list[_Batch] = []
        self._settled_aside: dict[str, int] = {}
        self.heartbeat = None
        if heartbeat and visibility_ms > 0:
            self.heartbeat = Heartbeat(
                lambda: connect(url, socket_timeout=min(5.0, max(1.0, visibility_ms / 1000))), stream, group,
                visibility_ms / 3000, log=runner.log or None)

    def _log(self, entry: dict) -> None:
        """The port's log lines go where the runner's do (read at each line: it may be replaced)."""
        if self.runner.log:
            self.runner.log(entry)

    # -- the port's ------------------------------------------------------------------------

    stream = _port("stream")
    group = _port("group")
    consumer = _port("consumer")
    batch = _port("batch")
    visibility_ms = _port("visibility_ms")
    client = _port("client")
    scheduled = _port("scheduled")
    dead_stream = _port("dead_stream")
    dead_maxlen = _port("dead_maxlen")
    next_due_ms = _port("next_due_ms")

    def ensure_group(self) -> None:
        self.port.ensure_group()

    def fetch(self, block_ms: int | None) -> list[Delivery]:
        return self.port.fetch(block_ms)

    def send(self, jobs: list) -> None:
        self.port.send(jobs)

    def idle(self) -> bool:
        return self.port.idle()

    def forget_consumers(self, stale_ms: int = STALE_CONSUMER_MS) -> int:
        return self.port.forget_consumers(stale_ms)

    # -- one round -----------------------------------------------------------------------

    def process(self, deliveries: list[Delivery], remaining_ms: Callable[[], int] | None = None,
                request_id: str | None = None):
        """Run one batch and settle it in one pipelined round trip; return the outcomes.

        Never raises because the result store is down: the batch then comes back
        ``deferred`` (:func:`store_down` tells) and its entries stay pending.
        """
        return self._complete(self._execute(self._admit(deliveries, remaining_ms, request_id)))

    # -- a batch in phases: admitted (its check sent), executed (its write sent), completed ----

    def _admit(self, deliveries: list[Delivery], remaining_ms: Callable[[], int] | None = None,
               request_id: str | None = None, in_flight=(), contained: bool = True) -> _Batch:
        """The entries are admitted by the runner (decoded, signatures checked, the duplicate
        check sent) and held by the heartbeat until settled. Not ``contained``: a runner bug
        is raised (the hold released) instead of running the entries one by one at once."""
        b = _Batch(deliveries)
        b.runnable = list(deliveries)
        if self.heartbeat is not None:
            b.held = self.heartbeat.hold(self.consumer, [d.ref for d in b.runnable]).__enter__()
        b.remaining_ms, b.request_id = remaining_ms, request_id

        def begin() -> None:
            b.run = self.runner.begin(b.runnable, remaining_ms, request_id, in_flight=in_flight)

        if contained:
            self._contain(b, begin)
            return b
        try:
            begin()
        except BaseException:
            b.release()
            raise
        return b

    def _execute(self, b: _Batch, meanwhile: Callable[[], object] | None = None) -> _Batch:
        """Run the admitted jobs and send their write (``meanwhile``: see :meth:`Runner.execute`)."""
        if b.outcomes is None:
            self._contain(b, lambda: self.runner.execute(b.run, meanwhile))
        return b

    def _complete(self, b: _Batch, *, later: bool = False) -> list[Outcome]:
        """Read the write back, then settle the entries: none is acknowledged before its
        record is written. ``later``: settled with the next read (:meth:`_settle_pending`
        otherwise), in the loop, which makes that read at once."""
        if b.done:
            return b.outcomes
        if b.outcomes is None:
            self._contain(b, lambda: setattr(b, "outcomes", self.runner.finish(b.run, send=self.send)))
        b.release()
        b.done = True  # settled at most once: a settlement cut off by Valkey leaves entries pending
        if later:
            self._unsettled.append(b)
            return b.outcomes
        outcomes = b.outcomes
        self.port.settle(outcomes, b.deliveries)
        self._count([b])
        return outcomes

    def _count(self, batches: list[_Batch]) -> None:
        self._add(_tally(batches))

    def _add(self, tally: dict[str, int]) -> None:
        for status, n in tally.items():
            self.counts[status] = self.counts.get(status, 0) + n

    def _take_unsettled(self) -> tuple[list[_Batch], list]:
        """The batches waiting to be settled (taken: settled at most once), and what to settle."""
        batches, self._unsettled = self._unsettled, []
        return batches, [(b.outcomes, b.deliveries) for b in batches]

    def _settle_pending(self) -> None:
        """Settle the completed batches still waiting, in one round trip."""
        batches, settle = self._take_unsettled()
        if batches:
            self.port.settle_all(settle)
            del settle
            self._count(batches)

    def _fetch_settling(self, block_ms: int | None) -> list[Delivery]:
        """Read the next batch, settling the batches waiting in the same round trip (or the last read's next chunk)."""
        if self._unread:
            self._settle_pending()
            return self._next_chunk()
        batches, settle = self._take_unsettled()
        asked = self.port.batch
        deliveries = self.port.fetch(block_ms, settle)
        del settle
        self._read_full = len(deliveries) >= asked
        self._count(batches)
        return self._first_chunk(deliveries)

    def _first_chunk(self, deliveries: list[Delivery]) -> list[Delivery]:
        """A read's first ``chunk`` entries; the rest wait their turn (:meth:`_next_chunk`)."""
        if len(deliveries) <= self._chunk:
            return deliveries
        self._unread = deliveries[self._chunk:]
        self._unread_held = self._hold(self._unread)
        return deliveries[:self._chunk]

    def _next_chunk(self) -> list[Delivery]:
        """The last read's next ``chunk`` entries (their batch holds them); the rest held anew."""
        taken, self._unread = self._unread[:self._chunk], self._unread[self._chunk:]
        self._unread_held = _released(self._unread_held)
        if self._unread:
            self._unread_held = self._hold(self._unread)
        return taken

    def _drop_unread(self) -> list[Delivery]:
        """What the last read left unrun, taken and no longer held."""
        unread, self._unread = self._unread, []
        self._unread_held = _released(self._unread_held)
        return unread

    def _contain(self, b: _Batch, phase: Callable[[], object]) -> None:
        """One phase of the runner; if it raises anyway (a bug in kindling), the runner's
        containment runs the entries one by one (:func:`kindling.engine.contain.one_by_one`)."""
        try:
            phase()
        except Exception as exc:  # noqa: BLE001 - one entry must not wedge the stream
            from kindling.engine.contain import one_by_one  # the rare path

            b.outcomes = one_by_one(self.runner, b.runnable, exc, b.remaining_ms, b.request_id, self.send)

    # -- the loop ------------------------------------------------------------------------

    def stop(self, *_args) -> None:
        self._stopping = True

    def run(self, *, burst: bool = False) -> dict[str, int]:
        """Work until SIGTERM/SIGINT (the batch in hand is finished and acknowledged first),
        or with ``burst`` until the stream and its pending list are empty.

        When Valkey goes away it reconnects, and when the result store is down (a batch
        handed back, or a store error) it keeps its entries pending; either way it backs
        off, from 0.05 s doubling to 5 s (jittered), until a round goes through."""
        import signal  # here, not at the top: it imports enum, a few ms of the drain's cold start
        import threading

        from kindling.core.valkey.readsize import CHUNK, ReadSize

        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = [signal.signal(s, self.stop) for s in (signal.SIGTERM, signal.SIGINT)]
        # One backoff per dependency: an empty read proves Valkey is back, only a batch
        # that was recorded proves the store is.
        valkey_backoff, store_backoff = Pauses(), Pauses()
        # The batch whose write is in flight: the next batch is read from the stream and its
        # duplicate check sent before that write is read back (and its entries settled).
        sent: _Batch | None = None
        first = self.port.batch
        size = ReadSize(first, self.max_batch)
        self._chunk = max(1, self.chunk or CHUNK)
        try:
            while not self._stopping or sent is not None or self._ahead is not None or self._unread:
                try:
                    started = time.monotonic()
                    sent = self._round(sent, burst, valkey_backoff, store_backoff)
                    self.port.batch = size.after(self._read_full, time.monotonic() - started)
                    if sent is None:  # no read to settle with: settled now
                        self._settle_pending()
                except errors.valkey_errors() as exc:
                    if not errors.unavailable(exc):  # lost, refused, or the topology changing (a failover)
                        raise
                    sent = self._complete_quietly(sent)
                    self.port.connection_lost()
                    self._pause(valkey_backoff, "valkey_unavailable", str(exc))
                except StoreUnavailable as exc:  # a store that failed outside the runner's guard
                    sent = self._complete_quietly(sent)
                    self._pause(store_backoff, "store_unavailable", str(exc))
                except _Drained:
                    break
        finally:
            self.port.batch = first
            ahead, self._ahead = self._ahead, None
            if isinstance(ahead, _Batch):  # left by an error: pending, reclaimed later
                ahead.release()
            self._ahead_held = _released(self._ahead_held)
            self._drop_unread()  # left by an error: pending, reclaimed later
            self._complete_quietly(None)
            if previous:
                for s, handler in zip((signal.SIGTERM, signal.SIGINT), previous, strict=True):
                    signal.signal(s, handler)
            try:
                self.forget_consumers()
            except errors.valkey_errors():  # Valkey is gone: the consumer is removed by a later one
                pass
        return self.counts

    def _round(self, sent: _Batch | None, burst: bool, valkey_backoff: Pauses,
               store_backoff: Pauses) -> _Batch | None:
        """One turn of the loop: read the next batch (without blocking while a write is in
        flight; read ahead by the round before, usually) and send its duplicate check, read
        back the write in flight (its entries settled with the next read), then run the next
        batch and send its write, while the batch after it is read ahead. Returns the batch
        now in flight.

        The next batch's check goes out before the write in flight is read back, so ids of
        that write are read again afterwards (:meth:`kindling.engine.runner.Runner.begin`); and if
        that write fails (the store is down) the next batch is handed back unrun rather than
        run into the outage."""
        if self._ahead_error is not None:  # reading ahead failed: handled as if this round's read had
            error, self._ahead_error = self._ahead_error, None
            raise error
        deliveries: list[Delivery] = []
        admitted = ahead = None
        held, self._ahead_held = self._ahead_held, None  # this round's to release (the next one may hold anew)
        if self._ahead is not None:
            ahead, self._ahead = self._ahead, None
            if isinstance(ahead, _Batch):
                admitted, deliveries = ahead, ahead.deliveries
            else:
                deliveries = ahead
        elif not self._stopping:
            deliveries = self._fetch_settling(None if sent is not None else self.block_ms)
            valkey_backoff.reset()
        try:
            if self._stopping and ahead is not None:  # read ahead before the signal: given back unstarted
                self._hand_back(ahead, "not started: the worker is stopping", retry_in=0)
                admitted, deliveries = None, []
            if self._stopping and self._unread:  # the rest of the last read, the same
                self._hand_back(self._drop_unread(), "not started: the worker is stopping", retry_in=0)
            if admitted is None and sent is not None and deliveries and not self._overlaps:
                if self._finish_sent(sent, store_backoff) is _DOWN:
                    self._hand_back(deliveries)
                    return None
                sent = None
            if deliveries and admitted is None:
                admitted = self._admit(deliveries, in_flight=sent.run.writing() if _writing(sent) else ())
            held = _released(held)  # admitted (held anew) or handed back by now
            if sent is not None and self._finish_sent(sent, store_backoff) is _DOWN:
                if admitted is not None:
                    self._hand_back(admitted)
                return None
            if admitted is None:
                self._settle_pending()
                if burst and self.idle():
                    raise _Drained
                if not burst and not deliveries:  # nothing to do: the one-off import costs no job
                    codec.use_orjson()
                return None
            read_ahead = ended = None
            if admitted.run is not None and admitted.outcomes is None:
                in_flight = admitted.run.job_ids()
                # Beside the whole execution; with jobs in threads, the runner's waiter calls it
                # too while they run (whichever comes first reads, the other waits for it).
                read_ahead = _once(lambda: self._read_ahead(in_flight))
                ended = _beside(read_ahead)
            try:
                executed = self._execute(admitted, read_ahead)
            finally:
                if ended is not None:
                    ended()
            aside, self._settled_aside = self._settled_aside, {}
            self._add(aside)
            if _writing(executed):
                return executed
            # nothing in flight (handed back, or nothing to write): settled now, paused if the store is down
            self._finish_sent(executed, store_backoff)
            return None
        except BaseException:
            if admitted is not None and not admitted.done:  # left pending, reclaimed later
                admitted.release()
            raise
        finally:
            _released(held)

    def _finish_sent(self, b: _Batch, store_backoff: Pauses):
        """Complete the batch in flight; ``_DOWN`` (after a pause) if the store was down."""
        down = store_down(self._complete(b, later=True))
        if down:
            self._pause(store_backoff, "store_unavailable", down)
            return _DOWN
        store_backoff.reset()
        if sum(self.counts.values()) >= ORJSON_AFTER_JOBS:
            codec.use_orjson()
        return None

    def _hand_back(self, batch: list[Delivery] | _Batch, reason: str | None = None,
                   retry_in: float | None = None) -> None:
        """Hand entries back unrun (an admitted batch's check reply is dropped). By default
        because the store went down while they waited: jobs run into an outage would run
        again after their write failed. ``retry_in``: seconds until they may be reclaimed
        (default: the visibility timeout)."""
        b = batch if isinstance(batch, _Batch) else _Batch(batch)
        if b.outcomes is None:  # not already run (a runner bug runs a batch one by one at once)
            cause = None if reason else STORE_OUTAGE
            reason = reason or f"{STORE_UNAVAILABLE}: the previous batch's write failed; not run into the outage"
            unrun = b.runnable if b.run is not None else b.deliveries
            b.outcomes = [_deferred(d, reason, retry_in, cause) for d in unrun]
        self._complete(b, later=True)

    def _read_ahead(self, in_flight: set[str]) -> None:
        """While a batch is executed: settle the batches completed before it and read the
        next batch in one round trip, and send its duplicate check, so that the loop waits
        for none of them. ``in_flight``: the running batch's job ids, read again once its
        write is read back (:meth:`kindling.engine.runner.Runner.begin`). Whatever fails is raised
        by the next round, after the running batch has been settled as usual."""
        batches, settle = self._take_unsettled()
        try:
            if self._stopping or self._unread:  # no read: the next chunk of the last one, if not stopping
                if settle:
                    self.port.settle_all(settle)
                deliveries = [] if self._stopping else self._next_chunk()
            else:
                asked = self.port.batch
                deliveries = self.port.fetch(None, settle, together=True)
                self._read_full = len(deliveries) >= asked
                deliveries = self._first_chunk(deliveries)
        except BaseException as exc:  # noqa: BLE001 - raised by the next round, not into the running batch
            self._ahead_error = exc
            return
        del settle
        self._settled_aside = _tally(batches)  # counted by the loop's thread; the batches let go
        if not deliveries:
            return
        self._ahead = deliveries
        if not self._overlaps:  # admitted by the next round, after the running batch's write
            self._ahead_held = self._hold(deliveries)
            return
        try:
            # Not contained here: running entries one by one would hold up the running batch's waiter.
            self._ahead = self._admit(deliveries, in_flight=in_flight, contained=False)
        except Exception:  # noqa: BLE001 - a runner bug: the next round admits them again, contained
            self._ahead_held = self._hold(deliveries)

    def _hold(self, deliveries: list[Delivery]):
        """The heartbeat's hold on entries read ahead and not admitted (``None`` without one)."""
        if self.heartbeat is None:
            return None
        return self.heartbeat.hold(self.consumer, [d.ref for d in deliveries]).__enter__()

    def _complete_quietly(self, sent: _Batch | None) -> None:
        """After Valkey or the store failed mid-round: the batches waiting to be settled and
        the batch in flight (read back) are settled if they can be; if not, their entries
        stay pending and are reclaimed."""
        try:
            self._settle_pending()
        except errors.valkey_errors() as exc:
            if not errors.unavailable(exc):
                raise
        if sent is not None:
            try:
                self._complete(sent)
            except (*errors.valkey_errors(), StoreUnavailable) as exc:
                if not isinstance(exc, StoreUnavailable) and not errors.unavailable(exc):
                    raise
                sent.release()
        return None

    def _pause(self, backoff: Pauses, event: str, error: str) -> None:
        self._complete_quietly(None)  # hand-backs are settled before the pause, as their retry times say
        if self.runner.log:
            self.runner.log({"kindling": event, "error": error[:300], "retry_in_s": round(backoff.delay, 2)})
        pause = Budget().lasting(backoff.next())
        while not self._stopping and not pause.spent():  # SIGTERM does not wait out a pause
            time.sleep(min(0.05, pause.left_s()))


class _Batch:
    """A batch of entries on its way through the worker: admitted, executed, completed."""

    __slots__ = ("deliveries", "runnable", "run", "held", "outcomes", "remaining_ms", "request_id",
                 "done")

    def __init__(self, deliveries: list[Delivery]):
        self.deliveries = deliveries
        self.runnable: list[Delivery] = []
        self.run = None  # the runner's batch (kindling.engine.runner.Batch)
        self.held = None  # the heartbeat's hold on the runnable entries
        self.outcomes: list[Outcome] | None = None  # set once known
        self.remaining_ms: Callable[[], int] | None = None
        self.request_id: str | None = None
        self.done = False  # completed: its settlement was attempted

    def release(self) -> None:
        """Stop the heartbeat's hold (joined: no beat after this)."""
        self.held = _released(self.held)

    def forget(self) -> None:
        """Settled: its entries, outcomes and records let go, whoever still refers to the batch."""
        self.deliveries, self.runnable, self.run, self.outcomes = [], [], None, []


def _tally(batches: list[_Batch]) -> dict[str, int]:
    """The settled batches' outcomes by status; each batch is then forgotten."""
    tally: dict[str, int] = {}
    for b in batches:
        for o in b.outcomes:
            tally[o.status] = tally.get(o.status, 0) + 1
        b.forget()
    return tally


def _beside(work: Callable[[], object]) -> Callable[[], object]:
    """Start ``work`` (which must not raise) on a thread of its own; the callable returned
    waits until it has ended. ``_thread``: one thread and one lock need nothing more."""
    from _thread import allocate_lock, start_new_thread

    ended = allocate_lock()
    ended.acquire()

    def run() -> None:
        try:
            work()
        finally:
            ended.release()

    start_new_thread(run, ())
    return ended.acquire


def _once(work: Callable[[], object]) -> Callable[[], None]:
    """``work`` run by the first caller; any other waits until it has ended."""
    from _thread import allocate_lock

    taken, ended = allocate_lock(), allocate_lock()
    ended.acquire()

    def call() -> None:
        if taken.acquire(False):
            try:
                work()
            finally:
                ended.release()
        else:
            with ended:
                pass

    return call


def _released(held) -> None:
    """Stop a heartbeat hold (joined); ``None`` for the variable that had it."""
    if held is not None:
        held.__exit__(None, None, None)
    return None


def _writing(b: _Batch | None) -> bool:
    """Whether the batch has a write in flight (sent, not yet read back)."""
    return (b is not None and b.outcomes is None and b.run is not None and b.run.handed_back is None
            and b.run.collect_write is not None)


class _Drained(Exception):
    """Burst mode: nothing left to do."""


_DOWN = object()


def _deferred(d: Delivery, reason: str, retry_in: float | None = None, cause: str | None = None) -> Outcome:
    o = Outcome(d.ref, None, None, DEFERRED, d.attempts)
    o.reason = reason
    o.retry_in = retry_in
    o.handed_back_because = cause
    return o


def store_down(outcomes) -> str | None:
    """The reason, if the batch was handed back because the result store could not be
    reached (by the runner, or by the worker for an entry it records itself)."""
    for o in outcomes:
        if o.status == DEFERRED and o.handed_back_because == STORE_OUTAGE:
            return o.reason or STORE_UNAVAILABLE
    return None


def _build_runner(table, registry, store, max_attempts: int | None, consumer: str, log, runner_options: dict) -> Runner:
    if store is None:
        if not table:
            raise KindlingError("StreamWorker needs a results table (or a store)")
        from kindling.stores.results import DynamoResultStore

        # A batch of hundreds is a few dozen DynamoDB calls: keep several in flight.
        store = DynamoResultStore(table, concurrency=4)
    if registry is None:
        from kindling.core.registry import default_registry

        registry = default_registry
    options = {"max_attempts": max_attempts, "worker": {"function": "kindling-valkey", "consumer": consumer}}
    if not log:
        options["log"] = None
    options.update(runner_options)
    return Runner(registry, store, **options)
