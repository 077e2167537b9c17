"""Delayed jobs: a sorted set beside the stream, entered into the stream when due.

A job with a ``not_before`` in the future does not stay on the stream, where a worker would
read it, hand it back, reclaim it after the visibility time, and so on until it is due.
It waits in ``<stream>:scheduled``, a sorted set of envelopes scored by their due time
(epoch milliseconds), and :data:`kindling.shared.valkey.scripts.MOVE_DUE` moves the due ones onto the stream in one
atomic step: each is added to the stream and removed from the set by the same script, so
a job is never in neither and never moved twice. Workers and drains run the script every
round (pipelined with their reclaim, so it costs no round trip of its own), passing their
own clock: the runner checks ``not_before`` against the same clock when it reads the job.

The producer puts a delayed job on the stream like any other: the worker that reads it
before it is due records it ``scheduled`` (the runner's admission) and moves it to the set,
in the same round trip as its acknowledgement (:func:`kindling.triggers.valkey.consumer.plan_settlement`);
so does a worker whose clock is behind the producer's with a job due by then.
"""

from __future__ import annotations

from kindling.core.valkey.keys import FIELD, scheduled_key
from kindling.shared.valkey.scripts import MOVE_BODY, MOVE_DUE

__all__ = ["MOVE_BODY", "MOVE_DUE", "MOVE_LIMIT", "member", "move_args", "scheduled_key"]

MOVE_LIMIT = 500
"""Most jobs one run of the script moves (the rest go in the next round)."""



def member(body: bytes | str, signature: bytes | str | None) -> bytes | str:
    """A delayed job's member of the set: its envelope, or for a signed job
    ``<signature>\n<envelope>`` (an envelope starts with ``{``, a signature never holds a
    newline): moved to the stream, the signature becomes the entry's ``sig`` field again
    (:mod:`kindling.core.jobsig`), over the same body bytes."""
    if not signature:
        return body
    sig = signature.encode() if isinstance(signature, str) else bytes(signature)
    return sig + b"\n" + (body.encode() if isinstance(body, str) else bytes(body))


def move_args(now: int, limit: int = MOVE_LIMIT) -> list:
    return [now, limit, FIELD]
