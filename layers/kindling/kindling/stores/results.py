"""Where the result stores were: a face that keeps ``from kindling.stores.results import ...`` working.

The stores now live by reader: the contract in :mod:`kindling.core.result_store`, the DynamoDB
store and its item codec in :mod:`kindling.stores.dynamo`, the memory store in
:mod:`kindling.stores.memory`. Each name here loads only its own module (the worker's cold path
imports :mod:`kindling.stores.dynamo` directly).
"""

from __future__ import annotations

__all__ = ["DynamoResultStore", "MemoryResultStore", "FINAL", "ResultStore", "from_item", "to_item"]  # noqa: F822 - lazy

_DYNAMO = frozenset({"DynamoResultStore", "from_item", "to_item", "READ_CHUNK", "WRITE_CHUNK"})


def __getattr__(name: str):
    if name in _DYNAMO:
        from kindling.stores import dynamo

        return getattr(dynamo, name)
    if name == "MemoryResultStore":
        from kindling.stores.memory import MemoryResultStore

        return MemoryResultStore
    if name == "ResultStore":
        from kindling.core.result_store import ResultStore

        return ResultStore
    if name == "FINAL":
        from kindling.core.status import FINAL

        return FINAL
    raise AttributeError(f"module 'kindling.stores.results' has no attribute {name!r}")
