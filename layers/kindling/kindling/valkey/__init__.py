"""The Valkey trigger: a stream with a consumer group instead of an SQS queue.

Imported only when the Valkey trigger is used (``kindling worker --valkey URL``, a Lambda
``{"kindling": "drain"}`` event, or a producer); the ``valkey`` client package is imported
by its modules at first use and nowhere on the SQS path.

=============================  ===========================================================
:mod:`.connection`              ``connect``, ``default_consumer``
:mod:`.keys`                    every key and entry field name (stream, scheduled, dead, flags,
                                results, revive ledgers)
:mod:`.producer`                ``StreamProducer``, ``Sent``, ``StreamFull``
:mod:`.worker`                  ``StreamWorker``: the loop feeding the runner from its consumer
:mod:`.consumer`                ``StreamConsumer``: the group's reads, settlement, follow-ups
:mod:`.heartbeat`               ``Heartbeat``: a running batch's entries kept claimed
:mod:`.scheduled`               delayed jobs in ``<stream>:scheduled`` until they are due
:mod:`.scripts`                 every Lua script, with the KEYS and ARGV each takes
:mod:`.kick`                    waking the Lambda worker: flags, ``LambdaInvoker``, the
                                drain's handshake (and why no job is stranded)
:mod:`.results`                 ``ValkeyResultStore``: outcomes in Valkey, blocking waiters
:mod:`.lambda_drain`            ``drain``: the stream read from a Lambda invocation
=============================  ===========================================================

Producer::

    from kindling.valkey import StreamProducer
    p = StreamProducer("redis://127.0.0.1:6390/0")
    p.enqueue("resize", "a.png", width=64)
    p.enqueue_many([("noop", [], {})] * 10_000)      # pipelined, 500 XADDs per round trip

Every entry has one field, ``job``: the envelope JSON (:mod:`kindling.core.envelope`).

Producer waking a Lambda worker (``lambda:InvokeFunction`` on it)::

    p = StreamProducer(url, function_name="my-stack-worker")   # or KINDLING_WORKER_FUNCTION

The names below are loaded from their module on first access, so ``from kindling import
valkey`` costs nothing until one is used.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kindling.core.valkey.keys import DEFAULT_GROUP, DEFAULT_STREAM, FIELD, flag_key
    from kindling.producer.valkey import CHUNK, Sent, StreamFull, StreamProducer
    from kindling.shared.valkey.connection import connect, default_consumer
    from kindling.shared.valkey.kick import Kicker, LambdaInvoker
    from kindling.stores.valkey import ValkeyResultStore
    from kindling.triggers.valkey.lambda_drain import drain
    from kindling.triggers.valkey.worker import StreamWorker

_WHERE = {
    "connect": "shared.valkey.connection", "default_consumer": "shared.valkey.connection",
    "DEFAULT_STREAM": "core.valkey.keys",
    "DEFAULT_GROUP": "core.valkey.keys", "FIELD": "core.valkey.keys",
    "CHUNK": "producer.valkey", "Sent": "producer.valkey", "StreamFull": "producer.valkey",
    "StreamProducer": "producer.valkey",
    "StreamWorker": "triggers.valkey.worker",
    "Kicker": "shared.valkey.kick", "LambdaInvoker": "shared.valkey.kick", "flag_key": "core.valkey.keys",
    "ValkeyResultStore": "stores.valkey",
    "drain": "triggers.valkey.lambda_drain",
}

__all__ = ["CHUNK", "DEFAULT_GROUP", "DEFAULT_STREAM", "FIELD", "Kicker", "LambdaInvoker", "Sent", "StreamFull",
           "StreamProducer", "StreamWorker", "ValkeyResultStore", "connect", "default_consumer", "drain", "flag_key"]


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        value = getattr(__import__(f"kindling.{module}", fromlist=[name]), name)
    except ModuleNotFoundError as exc:  # a Lambda function without the Valkey layer
        from kindling.core.errors import missing_layer

        raise missing_layer(exc) from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
