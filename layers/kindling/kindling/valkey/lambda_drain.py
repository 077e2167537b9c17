"""The stream read from Lambda, which cannot subscribe to one: a scheduled drain.

(The module is not called ``drain``: the package re-exports the function of that name.)
"""

from __future__ import annotations

import os
import time

from kindling.errors import KindlingError
from kindling.runner import DEFERRED, FAILED, Runner
from kindling.valkey.connection import DEFAULT_GROUP, DEFAULT_STREAM, connect, default_consumer
from kindling.valkey.worker import StreamWorker, store_down

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def drain(runner: Runner, event: dict, remaining_ms: Callable[[], int] | None) -> dict:
    """Handle ``{"kindling": "drain", "url": ..., "stream": ..., "batch": ...}`` in Lambda.

    Reads batches (reclaimed entries first, then new ones with a 100 ms block) and runs
    them with the invocation's runner until the stream has nothing for this consumer or
    less than twice the runner's safety margin (plus its start cutoff, below which the
    runner would defer every job it read) is left, or the result store cannot be reached
    (``"store_unavailable"`` in the summary says why: the next invocation tries again).
    Unfinished entries stay pending.
    """
    url = event.get("url") or os.environ.get("KINDLING_VALKEY_URL")
    if not url:
        raise KindlingError("drain: no Valkey URL (event 'url' or KINDLING_VALKEY_URL)")
    worker = _drain_worker(runner, url, event)
    stop_below = 2 * runner.safety_ms + runner.cutoff_ms
    started = time.monotonic()
    processed = batches = 0
    counts: dict[str, int] = {}
    left = 0
    down = None
    while down is None:
        if remaining_ms is not None and remaining_ms() < stop_below:
            break
        deliveries = worker.fetch(int(event.get("block_ms", 100)))
        if not deliveries:
            break
        outcomes = worker.process(deliveries, remaining_ms)
        batches += 1
        for o in outcomes:
            counts[o.status] = counts.get(o.status, 0) + 1
            if o.status in (FAILED, DEFERRED):
                left += 1
            else:
                processed += 1
        down = store_down(outcomes)
    summary = {"kindling": "drained", "stream": worker.stream, "consumer": worker.consumer, "batches": batches,
               "processed": processed, "left_pending": left, "counts": counts,
               "elapsed_ms": round((time.monotonic() - started) * 1000, 1)}
    if down:
        summary["store_unavailable"] = down
    return summary


_drain_workers: dict[tuple, StreamWorker] = {}


def _drain_worker(runner: Runner, url: str, event: dict) -> StreamWorker:
    """One worker (and connection) per URL/stream/group, reused across warm invocations."""
    stream = event.get("stream") or DEFAULT_STREAM
    group = event.get("group") or DEFAULT_GROUP
    key = (url, stream, group, id(runner))
    worker = _drain_workers.get(key)
    if worker is None:
        worker = StreamWorker(
            url, runner=runner, stream=stream, group=group,
            consumer=event.get("consumer") or os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME") or default_consumer(),
            block_ms=100, visibility_ms=int(event.get("visibility_ms", 30_000)),
            client=connect(url, socket_timeout=10),
        )
        _drain_workers[key] = worker
    worker.batch = int(event.get("batch", 100))
    return worker
