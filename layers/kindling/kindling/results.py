"""Result stores: where every job's outcome is recorded.

A store needs two primitives, both per batch rather than per job:

* ``get_statuses(job_ids)`` -> ``{job_id: status}`` for the ids it has a record of;
* ``write(records)`` records outcomes (plain dicts, see :mod:`kindling.runner`).

Both raise :class:`~kindling.errors.StoreUnavailable` when the store cannot be reached, so
the runner hands the batch back instead of losing it.

:class:`DynamoResultStore` is the record in production: one ``BatchGetItem`` and
``BatchWriteItem`` calls of 25 items each (``UnprocessedItems`` retried with jittered
backoff) through kindling's own SigV4 client. :class:`MemoryResultStore` is for tests.
"""

from __future__ import annotations

import time

from kindling.errors import StoreUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Protocol

    class ResultStore(Protocol):
        def get_statuses(self, job_ids: Sequence[str]) -> dict[str, str]: ...
        def write(self, records: Sequence[dict]) -> None: ...


WRITE_CHUNK = 25  # BatchWriteItem's limit
READ_CHUNK = 100  # BatchGetItem's limit
FINAL = frozenset({"succeeded", "dead", "rejected"})


class MemoryResultStore:
    """Records kept in a dict; counts its round trips so tests can hold the budget."""

    def __init__(self) -> None:
        self.records: dict[str, dict] = {}
        self.reads = 0
        self.writes = 0
        self.history: list[dict] = []
        self.fail = False  # set True to simulate an unreachable store

    def get_statuses(self, job_ids: Sequence[str]) -> dict[str, str]:
        if self.fail:
            raise StoreUnavailable("memory store is down (test)")
        self.reads += 1
        return {i: self.records[i]["status"] for i in job_ids if i in self.records}

    def write(self, records: Sequence[dict]) -> None:
        if self.fail:
            raise StoreUnavailable("memory store is down (test)")
        self.writes += 1
        for r in records:
            self.records[r["id"]] = r
            self.history.append(r)


class DynamoResultStore:
    """Outcomes in a DynamoDB table whose partition key is the string attribute ``id``.

    Args:
        table: the table name (the worker reads ``KINDLING_TABLE``).
        client: a :class:`kindling.aws.JsonClient` for DynamoDB; created at first use.
        max_rounds: how many times unprocessed items/keys are retried before giving up.
    """

    def __init__(self, table: str, client=None, *, max_rounds: int = 8):
        self.table = table
        self._client = client
        self.max_rounds = max_rounds

    @property
    def client(self):
        if self._client is None:
            from kindling import aws  # the SigV4 client loads at the first batch, not at import

            self._client = aws.dynamodb()
        return self._client

    def get_statuses(self, job_ids: Sequence[str]) -> dict[str, str]:
        statuses: dict[str, str] = {}
        ids = list(dict.fromkeys(job_ids))
        for start in range(0, len(ids), READ_CHUNK):
            request = {
                self.table: {
                    "Keys": [{"id": {"S": i}} for i in ids[start : start + READ_CHUNK]],
                    "ProjectionExpression": "#i, #s",
                    "ExpressionAttributeNames": {"#i": "id", "#s": "status"},
                    "ConsistentRead": True,
                }
            }
            for rnd in range(self.max_rounds):
                response = self._call("BatchGetItem", {"RequestItems": request})
                for item in response.get("Responses", {}).get(self.table, []):
                    statuses[item["id"]["S"]] = item["status"]["S"]
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    break
                _backoff(rnd)
            else:
                raise StoreUnavailable(f"BatchGetItem left keys unprocessed after {self.max_rounds} rounds")
        return statuses

    def write(self, records: Sequence[dict]) -> None:
        # BatchWriteItem refuses two puts of one key in a request; the last record wins.
        items = list({r["id"]: to_item(r) for r in records}.values())
        for start in range(0, len(items), WRITE_CHUNK):
            pending = [{"PutRequest": {"Item": it}} for it in items[start : start + WRITE_CHUNK]]
            for rnd in range(self.max_rounds):
                response = self._call("BatchWriteItem", {"RequestItems": {self.table: pending}})
                pending = (response.get("UnprocessedItems") or {}).get(self.table) or []
                if not pending:
                    break
                _backoff(rnd)
            else:
                raise StoreUnavailable(
                    f"BatchWriteItem left {len(pending)} items unprocessed after {self.max_rounds} rounds"
                )

    def _call(self, operation: str, payload: dict) -> dict:
        from kindling.aws import AwsError

        try:
            return self.client.call(operation, payload)
        except AwsError as exc:
            raise StoreUnavailable(f"DynamoDB {operation} on {self.table}: {exc}") from exc
        except OSError as exc:  # connection refused, DNS, ... after the client's own retries
            raise StoreUnavailable(f"DynamoDB {operation} on {self.table}: {exc}") from exc


def _backoff(round_: int) -> None:
    import random  # only when DynamoDB pushes back

    time.sleep(random.uniform(0, min(2.0, 0.05 * 2**round_)))


# -- DynamoDB's attribute-value encoding, shared with the producer client -----------------


def to_item(record: dict) -> dict:
    """A record as a DynamoDB item (``{"attr": {"S": ...}}``); ``None`` values are left out."""
    return {k: _av(v) for k, v in record.items() if v is not None}


def from_item(item: dict) -> dict:
    """The inverse of :func:`to_item`."""
    return {k: _plain(v) for k, v in item.items()}


def _av(value) -> dict:
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | float):
        return {"N": repr(value) if isinstance(value, float) else str(value)}
    if isinstance(value, dict):
        return {"M": {k: _av(v) for k, v in value.items() if v is not None}}
    if isinstance(value, list | tuple):
        return {"L": [_av(v) for v in value]}
    if value is None:
        return {"NULL": True}
    raise TypeError(f"cannot store {type(value).__name__} in a result record")


def _plain(av: dict):
    (kind, value), = av.items()
    if kind == "S":
        return value
    if kind == "N":
        return float(value) if any(c in value for c in ".eE") else int(value)
    if kind == "M":
        return {k: _plain(v) for k, v in value.items()}
    if kind == "L":
        return [_plain(v) for v in value]
    if kind == "BOOL":
        return value
    if kind == "NULL":
        return None
    raise ValueError(f"unexpected DynamoDB attribute type {kind}")
