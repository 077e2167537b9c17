"""Where the result stores were: a face that keeps ``from kindling.results import ...`` working.

The stores now live by reader: the contract in :mod:`kindling.result_store`, the DynamoDB
store and its item codec in :mod:`kindling.dynamo`, the memory store in
:mod:`kindling.stores`. Each name here loads only its own module (the worker's cold path
imports :mod:`kindling.dynamo` directly).
"""

from __future__ import annotations

__all__ = ["DynamoResultStore", "MemoryResultStore", "FINAL", "ResultStore", "from_item", "to_item"]  # noqa: F822 - lazy

_DYNAMO = frozenset({"DynamoResultStore", "from_item", "to_item", "READ_CHUNK", "WRITE_CHUNK"})


def __getattr__(name: str):
    if name in _DYNAMO:
        from kindling import dynamo

        return getattr(dynamo, name)
    if name == "MemoryResultStore":
        from kindling.stores import MemoryResultStore

        return MemoryResultStore
    if name == "ResultStore":
        from kindling.result_store import ResultStore

        return ResultStore
    if name == "FINAL":
        from kindling.status import FINAL

        return FINAL
    raise AttributeError(f"module 'kindling.results' has no attribute {name!r}")
