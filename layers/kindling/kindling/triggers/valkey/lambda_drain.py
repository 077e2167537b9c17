"""The stream read from Lambda, which cannot subscribe to one: a drain, woken by producers.

(The module is not called ``drain``: the package re-exports the function of that name.)

A drain is an invocation of the worker with ``{"kindling": "drain", "stream": ..., "flag":
...}``, sent by a producer that set the flag after adding jobs, by a drain handing on, or by
the optional safety-net schedule (no flag: it takes the first drain's). The flag, the
handshake and why no job is stranded are in :mod:`kindling.shared.valkey.kick`. Any producer may
invoke the worker, so the event only selects among the streams the deployment configures
(:mod:`kindling.triggers.valkey.drain_event`); the server, group, visibility and batch size are the
deployment's.

The drain holds its flag while it runs (expiring at its deadline plus a grace, so a drain
that dies blocks no kick for long) and reads batches, reclaimed entries first, then new ones
with a short blocking read; due delayed jobs enter the stream every round. When a read comes
back empty it runs the handshake, which deletes the flag and looks again:

- work now (entries not yet read, reclaimable ones, due delayed jobs): the flag is kept and
  the drain reads on;
- work due within ``horizon_ms`` (a delayed job; an entry handed back, by this consumer or
  one no heartbeat has touched lately, that becomes reclaimable after the visibility time):
  the flag is kept and the drain waits for it in a blocking read (new entries wake it);
- nothing within the horizon: the flag stays deleted and the drain returns. Later work
  belongs to the next kick or the schedule.

A drain stops reading when less than twice the runner's safety margin plus its start cutoff
is left (below that the runner would defer whatever it read). It then runs the handshake
once more and, if there is work now or soon, hands on: it invokes its own function with the
same flag and its consumer name, so the next invocation counts the entries it handed back as
its own. A drain that finds the result store down hands its batch back, deletes its flag and
returns (``"store_unavailable"`` in the summary): the next enqueue, or the schedule, tries
again, rather than a chain of invocations retrying an outage. Before returning, a drain
removes its consumer from the group if it holds nothing pending (and consumers idle for ten
minutes holding nothing).
"""

from __future__ import annotations

import os
import sys
import time

from kindling.core.envelope import now_ms
from kindling.core.errors import KindlingError
from kindling.core.policy import Retry
from kindling.core.status import DEFERRED, FAILED
from kindling.core.valkey.keys import FIELD
from kindling.drivers.valkey import errors
from kindling.engine.runner import Runner
from kindling.shared.valkey.connection import configured_url, connect, default_consumer
from kindling.shared.valkey.kick import FLAG_GRACE_MS, KICK_TTL_MS, LambdaInvoker, drain_event, run_handshake
from kindling.shared.valkey.scheduled import MOVE_LIMIT
from kindling.shared.valkey.scripts import HANDSHAKE
from kindling.triggers.valkey.drain_event import DrainConfig, DrainRefused, Selection, select
from kindling.triggers.valkey.worker import StreamWorker, store_down

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

MAX_BLOCK_MS = 5_000
"""The longest single blocking read (well inside the connection's 10 s socket timeout)."""

TOPOLOGY_RETRY = Retry(None, base=0.05, cap=1.0, jitter=False)
"""After a failover interrupted the drain: 100 ms doubling to 1 s per change in a row (the first
change's wait is the second step), never into the time kept for the next batch."""
STUCK_ROUNDS = 50
"""Handshakes in a row that report work a read then does not find before the drain gives up
its flag (a guard against an endless chain of invocations; the next kick starts afresh)."""


def drain(runner: Runner, event: dict, remaining_ms: Callable[[], int] | None, *, invoker=None,
          request_id: str | None = None, config: DrainConfig | None = None) -> dict:
    """Handle ``{"kindling": "drain", "stream": ..., "flag": ..., "consumer": ...}`` in Lambda.

    The event only selects a configured stream and one of its kick flags (and carries the
    consumer name of a drain handing on): :mod:`kindling.triggers.valkey.drain_event`. Everything
    else is the deployment's ``config`` (default: :meth:`DrainConfig.from_environ`); the URL
    is ``KINDLING_VALKEY_URL``, else the one in the secret ``KINDLING_VALKEY_URL_SECRET``
    names, read at the first drain (:func:`~kindling.shared.valkey.connection.configured_url`). An
    event asking for anything else is refused, touching nothing: one ``drain_refused`` log
    line, and a summary saying why.

    Returns a summary: batches, counts, ``ended`` (``empty``, ``time``, ``store_unavailable``
    or ``stuck``), ``kicked`` (whether it handed on), ``next_due_in_ms`` (the earliest work
    it left waiting, if any). ``invoker`` replaces the Lambda invocation of this function
    when handing on (tests); by default it is ``AWS_LAMBDA_FUNCTION_NAME`` through
    :class:`~kindling.shared.valkey.kick.LambdaInvoker`. ``request_id`` (the invocation's) goes
    into every record, as the SQS handler's does.
    """
    config = config or DrainConfig.from_environ()
    try:
        chosen = select(event, config)
    except DrainRefused as exc:
        if runner.log:
            runner.log({"level": "WARNING", "message": "drain event refused", "kindling": "drain_refused",
                        "reason": str(exc)[:500], "request_id": request_id})
        return {"kindling": "drain_refused", "reason": str(exc)[:500]}
    url = configured_url()
    if not url:
        raise KindlingError("drain: no Valkey URL (KINDLING_VALKEY_URL or KINDLING_VALKEY_URL_SECRET)")
    worker, handshake_script = _drain_worker(runner, url, config, chosen)
    client = worker.client
    flag = chosen.flag
    horizon_ms = config.horizon_ms
    block_ms = config.block_ms
    budget = runner.budget.started(remaining_ms)
    stop_below = budget.next_batch_ms

    def flag_ttl() -> int:
        left = budget.left_ms()
        return KICK_TTL_MS if left is None else max(1, left) + FLAG_GRACE_MS

    def handshake() -> tuple[bool, bool, int | None]:
        return run_handshake(handshake_script, scheduled=worker.scheduled, stream=worker.stream, flag=flag,
                             group=worker.group, consumer=worker.consumer, now=now_ms(),
                             visibility_ms=worker.visibility_ms, horizon_ms=horizon_ms, ttl_ms=flag_ttl(),
                             move_limit=MOVE_LIMIT, field=FIELD)

    started = time.monotonic()
    client.set(flag, b"1", px=flag_ttl())  # held from now on, until the drain's deadline at most
    processed = batches = 0
    counts: dict[str, int] = {}
    left_pending = 0
    down = None
    ended = "empty"
    soonest = None
    wait_ms = block_ms
    fruitless = 0
    changes = 0  # topology changes in a row (a failover): each waited out a little longer
    while True:
        left = budget.left_ms()
        if left is not None and left < stop_below:
            ended = "time"
            break
        block = min(wait_ms, MAX_BLOCK_MS) if left is None else max(1, min(wait_ms, MAX_BLOCK_MS, left - stop_below))
        wait_ms = block_ms
        try:
            deliveries = worker.fetch(block)
            if deliveries:
                outcomes = worker.process(deliveries, remaining_ms, request_id)
            else:
                kept, work, soonest = handshake()
        except errors.valkey_errors() as exc:
            if not errors.topology_changed(exc) and not errors.outcome_unknown(exc):
                raise  # Valkey refused the connection: the next kick, or the schedule, tries again
            # A failover (UNBLOCKED, READONLY...: nothing ran), or a connection lost or a WAIT
            # unanswered after a command was sent (the entries a read delivered are taken back
            # by the next one: StreamConsumer.fetch): the map is read again, the drain goes on.
            worker.port.connection_lost()
            changes += 1
            if runner.log:
                event = "valkey_topology_changed" if errors.topology_changed(exc) else "valkey_unavailable"
                runner.log({"kindling": event, "error": str(exc)[:300]})
            TOPOLOGY_RETRY.wait(changes + 1, budget.before(stop_below), time.sleep, clip=True)  # never into the floor
            continue
        changes = 0
        if deliveries:
            fruitless = 0
            batches += 1
            for o in outcomes:
                counts[o.status] = counts.get(o.status, 0) + 1
                if o.status in (FAILED, DEFERRED):
                    left_pending += 1
                else:
                    processed += 1
            down = store_down(outcomes)
            if down:
                ended = "store_unavailable"
                break
            continue
        if not kept:
            break
        if work:
            fruitless += 1
            if fruitless >= STUCK_ROUNDS:
                ended = "stuck"
                break
        elif soonest is not None:
            fruitless = 0
            wait_ms = max(1, soonest - now_ms())  # a blocking read: new entries wake it sooner

    kicked = False
    if ended == "time":
        kept, work, soonest = handshake()
        if kept:
            kicked = _hand_on(runner, client, flag, drain_event(worker.stream, flag, worker.group, worker.consumer),
                              invoker)
    elif ended in ("store_unavailable", "stuck"):
        client.delete(flag)
    try:
        worker.forget_consumers()
    except errors.valkey_errors():  # the next drain's turn
        pass
    summary = {"kindling": "drained", "stream": worker.stream, "consumer": worker.consumer, "flag": flag,
               "batches": batches, "processed": processed, "left_pending": left_pending, "counts": counts,
               "ended": ended, "kicked": kicked, "elapsed_ms": round((time.monotonic() - started) * 1000, 1)}
    if soonest is not None:
        summary["next_due_in_ms"] = max(0, soonest - now_ms())
    if down:
        summary["store_unavailable"] = down
    return summary


_self_invoker = None


def _hand_on(runner: Runner, client, flag: str, event: dict, invoker) -> bool:
    """Invoke this function again with the flag still held; if that is impossible, delete the
    flag, so the next enqueue kicks a drain instead of waiting for it to expire."""
    global _self_invoker
    error = None
    try:
        if invoker is None:
            name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME")
            if not name:
                raise KindlingError("not in Lambda (no AWS_LAMBDA_FUNCTION_NAME)")
            if _self_invoker is None or _self_invoker.function_name != name:
                _self_invoker = LambdaInvoker(name)
            invoker = _self_invoker
        invoker(event)
        return True
    except Exception as exc:  # noqa: BLE001 - the work stays on the stream for the next kick
        error = f"{type(exc).__name__}: {exc}"[:300]
    try:
        client.delete(flag)
    except errors.valkey_errors():  # it expires at the drain's deadline plus a grace
        pass
    if runner.log:
        runner.log({"kindling": "drain_not_handed_on", "flag": flag, "error": error})
    return False


_drain_workers: dict[tuple, tuple] = {}


def consumer_name(handed_on: str | None) -> str:
    """This invocation's consumer: the one a drain handing on named, else the log stream's
    (one per execution environment). In an environment restored from a SnapStart snapshot
    the log stream's name comes from the snapshot, as every other copy's does: it carries
    the copy's own tag (:data:`kindling.shared.snapstart.restore_tag`)."""
    if handed_on:
        return handed_on
    snapstart = sys.modules.get("kindling.shared.snapstart")  # loaded only by a SnapStart init
    tag = snapstart.restore_tag if snapstart is not None else ""
    return (os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME") or default_consumer()) + tag


def _drain_worker(runner: Runner, url: str, config: DrainConfig, chosen: Selection) -> tuple[StreamWorker, object]:
    """One worker (and connection) per URL/stream/group, reused across warm invocations, with
    the consumer name of this invocation: the event's (a drain handing on passes its own),
    else the log stream's (one per execution environment)."""
    stream, group, visibility_ms = chosen.stream, config.group, config.visibility_ms
    key = (url, stream, group, id(runner))
    cached = _drain_workers.get(key)
    consumer = consumer_name(chosen.consumer)
    if cached is None:
        worker = StreamWorker(
            url, runner=runner, stream=stream, group=group, consumer=consumer,
            block_ms=100, visibility_ms=visibility_ms, client=connect(url, socket_timeout=10),
        )
        cached = _drain_workers[key] = (worker, worker.client.register_script(HANDSHAKE))
    worker = cached[0]
    worker.consumer = consumer
    worker.visibility_ms = visibility_ms
    if worker.heartbeat is not None:
        worker.heartbeat.interval_s = visibility_ms / 3000
    worker.batch = config.batch
    return cached
