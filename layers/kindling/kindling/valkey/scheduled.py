"""Delayed jobs: a sorted set beside the stream, entered into the stream when due.

A job with a ``not_before`` in the future does not go on the stream, where a worker would
read it, hand it back, reclaim it after the visibility time, and so on until it is due.
It waits in ``<stream>:scheduled``, a sorted set of envelopes scored by their due time
(epoch milliseconds), and :data:`kindling.valkey.scripts.MOVE_DUE` moves the due ones onto the stream in one
atomic step: each is added to the stream and removed from the set by the same script, so
a job is never in neither and never moved twice. Workers and drains run the script every
round (pipelined with their reclaim, so it costs no round trip of its own), passing their
own clock: the runner checks ``not_before`` against the same clock when it reads the job.

A job read from the stream before it is due (sent by an older producer, or a worker whose
clock is behind the producer's) is moved to the set by the worker that read it, in the same
round trip as its acknowledgement (:func:`kindling.valkey.consumer.plan_settlement`).
"""

from __future__ import annotations

from kindling.valkey.keys import FIELD, scheduled_key
from kindling.valkey.scripts import MOVE_BODY, MOVE_DUE

__all__ = ["MOVE_BODY", "MOVE_DUE", "MOVE_LIMIT", "member", "move_args", "schedule", "scheduled_key"]

MOVE_LIMIT = 500
"""Most jobs one run of the script moves (the rest go in the next round)."""



def schedule(pipe, stream: str, body: bytes, due_ms: int, signature: bytes | str | None = None) -> None:
    """Queue a delayed job on ``pipe``: the envelope waits in the set until ``due_ms``.

    A signed job's member is ``<signature>\n<envelope>`` (an envelope starts with ``{``, a
    signature never holds a newline): moved to the stream, the signature becomes the entry's
    ``sig`` field again (:mod:`kindling.jobsig`), over the same body bytes."""
    pipe.zadd(scheduled_key(stream), {member(body, signature): due_ms})


def member(body: bytes | str, signature: bytes | str | None) -> bytes | str:
    if not signature:
        return body
    sig = signature.encode() if isinstance(signature, str) else bytes(signature)
    return sig + b"\n" + (body.encode() if isinstance(body, str) else bytes(body))


def move_args(now: int, limit: int = MOVE_LIMIT) -> list:
    return [now, limit, FIELD]
