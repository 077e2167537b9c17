"""What a drain event may ask for, checked against the deployment's configuration.

Every producer role may invoke the worker, so a drain event is untrusted input. What to
drain and how is the deployment's, read from the function's environment
(:meth:`DrainConfig.from_environ`): the Valkey URL (``KINDLING_VALKEY_URL`` or the secret
``KINDLING_VALKEY_URL_SECRET`` names), the streams, the consumer group, the visibility time,
the batch size, how far ahead a drain waits, and how many drains may run per stream.

An event may only *select* (:func:`select`):

- ``stream``: one of the configured streams (absent: the first);
- ``flag``: one of that stream's kick flags, ``<stream>:kick`` or ``<stream>:kick:<n>`` with
  ``0 < n < max_drains`` (absent: ``<stream>:kick``);
- ``group``: only the configured group (producers name it when it is not the default);
- ``consumer``: the name a drain handing on passes to the next one, a printable label of at
  most 200 characters. It only decides whose handed-back entries the drain waits for;
  entries still go to another consumer only after the configured visibility time.

Anything else (a URL, a visibility, a batch size, another key, a value of the wrong type)
is refused as a whole: :class:`DrainRefused`, before the drain touches any key.
"""

from __future__ import annotations

import os

from kindling.core.errors import KindlingError
from kindling.core.valkey.keys import DEFAULT_GROUP, DEFAULT_STREAM, derived_keys, flag_key, flag_number

SELECTABLE = frozenset({"kindling", "stream", "flag", "group", "consumer"})
CONSUMER_MAX = 200
MAX_DRAINS = 16
"""Drains per stream a deployment accepts by default (``KINDLING_VALKEY_MAX_DRAINS``): flags
``<stream>:kick`` to ``<stream>:kick:15``. A producer's ``max_drains`` above it gets its extra
drains refused (the first drain still runs)."""


class DrainRefused(KindlingError):
    """A drain event asked for something the deployment does not configure."""


class DrainConfig:
    """The drain's configuration: the deployment's, never the event's."""

    __slots__ = ("batch", "block_ms", "group", "horizon_ms", "max_drains", "streams", "visibility_ms")

    def __init__(self, streams: tuple[str, ...] = (DEFAULT_STREAM,), *, group: str = DEFAULT_GROUP,
                 visibility_ms: int = 30_000, horizon_ms: int = 60_000, block_ms: int = 100, batch: int = 100,
                 max_drains: int = MAX_DRAINS):
        if not streams or not all(streams):
            raise KindlingError("drain: no stream configured (KINDLING_VALKEY_STREAMS)")
        for s in streams:
            for t in streams:
                # A stream named like another's flag or scheduled set would let a kick of the
                # one name the other's key.
                if s != t and (flag_number(s, t) is not None or t in derived_keys(s)):
                    raise KindlingError(f"drain: stream {t!r} is one of stream {s!r}'s keys (KINDLING_VALKEY_STREAMS)")
        if min(visibility_ms, block_ms, batch, max_drains) < 1 or horizon_ms < 0:
            raise KindlingError("drain: visibility, block, batch and max drains must be positive")
        self.streams, self.group = tuple(streams), group
        self.visibility_ms, self.horizon_ms, self.block_ms = visibility_ms, horizon_ms, block_ms
        self.batch, self.max_drains = batch, max_drains

    @classmethod
    def from_environ(cls, environ=None) -> DrainConfig:
        """``KINDLING_VALKEY_STREAMS`` (comma-separated; default ``kindling:jobs``; the first is
        what an event naming no stream drains), ``KINDLING_VALKEY_GROUP`` (``kindling``),
        ``KINDLING_DRAIN_VISIBILITY_MS`` (30000), ``KINDLING_DRAIN_HORIZON_MS`` (60000),
        ``KINDLING_DRAIN_BLOCK_MS`` (100), ``KINDLING_DRAIN_BATCH`` (100),
        ``KINDLING_VALKEY_MAX_DRAINS`` (16)."""
        env = os.environ if environ is None else environ
        streams = tuple(s.strip() for s in (env.get("KINDLING_VALKEY_STREAMS") or DEFAULT_STREAM).split(","))

        def number(name: str, default: int) -> int:
            value = env.get(name) or str(default)
            try:
                return int(value)
            except ValueError:
                raise KindlingError(f"drain: {name}={value[:40]!r} is not a whole number") from None

        return cls(tuple(s for s in streams if s) or (), group=env.get("KINDLING_VALKEY_GROUP") or DEFAULT_GROUP,
                   visibility_ms=number("KINDLING_DRAIN_VISIBILITY_MS", 30_000),
                   horizon_ms=number("KINDLING_DRAIN_HORIZON_MS", 60_000),
                   block_ms=number("KINDLING_DRAIN_BLOCK_MS", 100), batch=number("KINDLING_DRAIN_BATCH", 100),
                   max_drains=number("KINDLING_VALKEY_MAX_DRAINS", MAX_DRAINS))


class Selection:
    """What a valid drain event selected: a configured stream, one of its flags, and the
    consumer name a drain handed on (``None``: this invocation's own)."""

    __slots__ = ("consumer", "flag", "stream")

    def __init__(self, stream: str, flag: str, consumer: str | None):
        self.stream, self.flag, self.consumer = stream, flag, consumer


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def select(event: dict, config: DrainConfig) -> Selection:
    """The stream, flag and consumer ``event`` selects, or :class:`DrainRefused` saying why not.
    Pure: touches nothing. A reason names the keys and the selected names, never a value of
    another key (a URL may carry a password)."""
    if not isinstance(event, dict):
        raise DrainRefused(f"not an object ({type(event).__name__})")
    unexpected = sorted(_shown(k) for k in event if k not in SELECTABLE)
    if unexpected:
        raise DrainRefused(f"keys a drain event may not set: {', '.join(unexpected)[:300]} "
                           f"(an event selects only {', '.join(sorted(SELECTABLE - {'kindling'}))})")
    stream = event.get("stream", config.streams[0])
    if not isinstance(stream, str) or stream not in config.streams:
        raise DrainRefused(f"stream {_shown(stream)} is not configured (KINDLING_VALKEY_STREAMS)")
    flag = event.get("flag", flag_key(stream))
    n = flag_number(stream, flag) if isinstance(flag, str) else None
    if n is None or n >= config.max_drains:
        raise DrainRefused(f"flag {_shown(flag)} is not a kick flag of stream {stream!r} ({flag_key(stream)}, "
                           f"or {stream}:kick:<n> for 0 < n < {config.max_drains}: KINDLING_VALKEY_MAX_DRAINS)")
    group = event.get("group", config.group)
    if group != config.group:
        raise DrainRefused(f"group {_shown(group)} is not the configured group (KINDLING_VALKEY_GROUP)")
    consumer = event.get("consumer")
    if consumer is not None and not (isinstance(consumer, str) and 0 < len(consumer) <= CONSUMER_MAX
                                     and consumer.isprintable()):
        raise DrainRefused(f"consumer {_shown(consumer)} is not a name (printable, 1 to {CONSUMER_MAX} characters)")
    return Selection(stream, flag, consumer)
