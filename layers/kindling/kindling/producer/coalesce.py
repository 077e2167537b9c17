"""Concurrent awaits coalesced into batches: the async producers' one rule.

``await client.aenqueue(...)``, ``await producer.aenqueue(...)`` and ``await task.adelay(...)``
each hand one call to a :class:`Coalescer` and wait for its own outcome. The coalescer sends
what has gathered as one batch (a ``SendMessageBatch`` of up to 10, a pipeline of XADDs),
so a thousand requests enqueueing at once pay about a hundred round trips (SQS, eight in
flight) or a handful (Valkey), not a thousand.

The rules:

- *When.* A flush is scheduled with ``loop.call_soon`` when the first call arrives, so
  every coroutine that runs in the same turn of the event loop joins it; calls arriving
  while ``max_flights`` batches are in flight wait for the next, which leaves as soon as
  one comes back. No timer: an enqueue alone leaves at once (no added latency).
- *Each its own outcome.* The batch function returns one outcome per call, in order: a
  handle, or the exception that call alone raises (a refused entry fails only its awaiter).
  An exception from the batch function itself (nothing could be sent) fails every call
  of that batch, and nothing else.
- *Durable.* An await returns once its job's batch was accepted by the queue (SQS's reply,
  the XADD's reply), never before.
- *Cancellation.* A cancelled await whose call has not left yet is taken out: its job is
  never sent. Once its batch has left it cannot be called back: it is sent, and its
  outcome is dropped. Either way the other calls of the batch are untouched: the batch is
  the coalescer's task, not the cancelled request's.

The batch is sent with the producers' own blocking code (kindling's Valkey client, boto3)
in a thread of the coalescer's own pool, one thread per batch in flight: at a round trip
of a millisecond or more, the hand-off to a thread is a small share of it, and one send
path for sync and async callers is one set of rules (docs/sending.md has the figures).

Never imported by the worker: only by code that awaits an enqueue.
"""

from __future__ import annotations

import asyncio
import weakref

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any


class _LoopState:
    """What one event loop has waiting and in flight."""

    __slots__ = ("flights", "pending", "scheduled", "tasks")

    def __init__(self) -> None:
        self.pending: list[tuple[Any, asyncio.Future]] = []
        self.flights = 0
        self.scheduled = False
        self.tasks: set[asyncio.Task] = set()  # strong references: a running batch is never collected


class Coalescer:
    """Coalesce concurrent :meth:`submit` calls into batches for ``send``.

    Args:
        send: a blocking function from a list of calls to a list of outcomes of the same
            length and order, each a result or an exception instance (raised to that call's
            awaiter alone). Run in a thread.
        max_batch: most calls per batch (10 for SendMessageBatch).
        max_flights: most batches in flight at once (threads of the pool).
    """

    def __init__(self, send: Callable[[list], Sequence[Any]], *, max_batch: int, max_flights: int = 1):
        if max_batch < 1 or max_flights < 1:
            raise ValueError("max_batch and max_flights must be at least 1")
        self.send = send
        self.max_batch = max_batch
        self.max_flights = max_flights
        self._states: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # per event loop
        self._pool = None

    async def submit(self, call: Any) -> Any:
        """Send ``call`` in the next batch; its outcome once its batch was accepted."""
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            state = self._states[loop] = _LoopState()
        future = loop.create_future()
        state.pending.append((call, future))
        self._wake(loop, state)
        return await future  # cancelling this cancels the future only (see the module's docstring)

    def _wake(self, loop: asyncio.AbstractEventLoop, state: _LoopState) -> None:
        if not state.scheduled and state.pending and state.flights < self.max_flights:
            state.scheduled = True
            loop.call_soon(self._flush, loop, state)

    def _flush(self, loop: asyncio.AbstractEventLoop, state: _LoopState) -> None:
        state.scheduled = False
        while state.flights < self.max_flights:
            batch: list[tuple[Any, asyncio.Future]] = []
            while state.pending and len(batch) < self.max_batch:
                call, future = state.pending.pop(0)
                if not future.done():  # cancelled before it left: never sent
                    batch.append((call, future))
            if not batch:
                return
            state.flights += 1
            task = loop.create_task(self._fly(loop, state, batch))
            state.tasks.add(task)
            task.add_done_callback(state.tasks.discard)

    async def _fly(self, loop: asyncio.AbstractEventLoop, state: _LoopState,
                   batch: list[tuple[Any, asyncio.Future]]) -> None:
        try:
            try:
                outcomes = list(await loop.run_in_executor(self._executor(), self.send, [c for c, _ in batch]))
                if len(outcomes) != len(batch):
                    raise RuntimeError(f"a batch of {len(batch)} calls came back with {len(outcomes)} outcomes")
            except asyncio.CancelledError:  # the loop is closing: nobody is left to answer
                for _, future in batch:
                    future.cancel()
                raise
            except Exception as exc:  # noqa: BLE001 - nothing of this batch was sent: each awaiter hears why
                outcomes = [exc] * len(batch)
            for (_, future), outcome in zip(batch, outcomes, strict=True):
                if future.done():  # its awaiter was cancelled while the batch was out
                    continue
                if isinstance(outcome, BaseException):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)
        finally:
            state.flights -= 1
            self._wake(loop, state)

    def _executor(self):
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.max_flights, thread_name_prefix="kindling-aenqueue")
        return self._pool

    def close(self) -> None:
        """Stop the pool's threads (after the batches in flight)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
