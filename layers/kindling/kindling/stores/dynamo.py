"""The result store in production: outcomes in a DynamoDB table, and DynamoDB's item codec.

:class:`DynamoResultStore` keeps the :class:`~kindling.core.result_store.ResultStore` contract
with ``BatchGetItem`` calls of 100 keys and ``BatchWriteItem`` calls of 25 ``succeeded``
items, optionally several at once (``UnprocessedItems`` retried with jittered backoff),
through kindling's own SigV4 client. Every other status is a conditional ``PutItem`` of
its own: the rare path pays for the check, the all-succeeded batch keeps its one read and
one write.

:func:`to_item` and :func:`from_item` (DynamoDB's attribute-value encoding) are shared with
the producer client and the operator tools. This module is on the worker's cold path: it
imports nothing the first batch would not load anyway.
"""

from __future__ import annotations

import os
import time
from _thread import allocate_lock

from kindling.core.errors import StoreUnavailable
from kindling.core.policy import Retry
from kindling.core.records import chord_error, chord_shard, stored_state
from kindling.core.status import (
    COMPLETED,
    DEAD,
    FAILED,
    GENERATION_CHECKED,
    NEWER_GENERATION,
    REPLACES,
    SUCCEEDED,
    WAITING,
    generation_of,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["DynamoResultStore", "from_item", "to_item"]

WRITE_CHUNK = 25  # BatchWriteItem's limit
READ_CHUNK = 100  # BatchGetItem's limit

_LOCAL_MADE = allocate_lock()  # the pools' one threading.local, made once


class DynamoResultStore:
    """Outcomes in a DynamoDB table whose partition key is the string attribute ``id``.

    Args:
        table: the table name (the worker reads ``KINDLING_TABLE``).
        client: a :class:`kindling.drivers.aws.JsonClient` for DynamoDB; created at first use.
        max_rounds: how many times unprocessed items/keys are retried before giving up.
        concurrency: how many chunks (BatchGetItem of 100 keys, BatchWriteItem of 25
            items) may be in flight at once, each on its own connection. 1 (the Lambda
            handler's default) keeps threads off the cold path; long-lived workers with
            batches of hundreds use more, since each call waits a network round trip.
        call_timeout_s: how long one ``read_states`` or ``write`` may take in all
            (retries and backoff included) when the caller gives no deadline.
        task_index: write ``task_shard``, the ``by_task`` index's key (default: on, unless
            ``KINDLING_TASK_INDEX=0``). Off, no record enters that index, so a record costs
            no index write; it is for a table deployed without the index (``TaskIndex=false``).

    Example::

        store = DynamoResultStore("kindling-results", concurrency=4)
        store.write(records)   # 500 records: 20 BatchWriteItem calls, 4 at a time
    """

    def __init__(self, table: str, client=None, *, max_rounds: int = 8, concurrency: int = 1,
                 call_timeout_s: float = 30.0, task_index: bool | None = None):
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.table = table
        self.call_timeout_s = call_timeout_s
        if task_index is None:
            task_index = os.environ.get("KINDLING_TASK_INDEX", "1") != "0"
        self.task_index = task_index
        self._client = client
        self.max_rounds = max_rounds
        self.concurrency = concurrency
        self._pool = None  # writes (and read_states)
        self._read_pool = None  # reads sent ahead (begin_read), on connections of their own
        self._local = None

    @property
    def client(self):
        if self._client is None:
            from kindling.drivers import aws  # the SigV4 client loads at the first batch, not at import

            self._client = aws.dynamodb()
        return self._client

    def read_states(self, job_ids: Sequence[str], *, deadline: float | None = None) -> dict[str, tuple[str, int]]:
        ids = list(dict.fromkeys(job_ids))
        deadline = self._deadline(deadline)
        states: dict[str, tuple[str, int]] = {}
        chunks = [ids[i : i + READ_CHUNK] for i in range(0, len(ids), READ_CHUNK)]
        for part in self._map(lambda chunk: self._read_chunk(chunk, deadline), chunks):
            states.update(part)
        return states

    def get_statuses(self, job_ids: Sequence[str]) -> dict[str, str]:
        return {i: state[0] for i, state in self.read_states(job_ids).items()}

    def begin_read(self, job_ids: Sequence[str], *, deadline: float | None = None):
        """Send the read now and return a callable that collects it (``read_states``).

        The caller can do other work during the round trip. With one connection, one
        BatchGetItem of up to 100 keys is sent on the spot (a larger read is made when
        collected); with several, every chunk goes out now on connections of its own,
        apart from the writes' (so a long-lived worker checks its next batch while this
        one's write is in flight).
        """
        ids = list(dict.fromkeys(job_ids))
        deadline = self._deadline(deadline)
        if self.concurrency > 1:
            chunks = [ids[i : i + READ_CHUNK] for i in range(0, len(ids), READ_CHUNK)]
            futures = self._submit(self._readers(), lambda chunk: self._read_chunk(chunk, deadline), chunks)

            def collect_all() -> dict[str, tuple[str, int]]:
                states: dict[str, tuple[str, int]] = {}
                for part in _results(futures):
                    states.update(part)
                return states

            return collect_all
        if len(ids) > READ_CHUNK:
            return lambda: self.read_states(ids, deadline=deadline)
        request = self._read_request(ids)
        payload = {"RequestItems": request}
        pending = self._guard("BatchGetItem", lambda: self.client.start("BatchGetItem", payload, deadline=deadline))

        def collect() -> dict[str, tuple[str, int]]:
            response = self._guard("BatchGetItem", pending.result)
            states = self._states(response)
            unprocessed = response.get("UnprocessedKeys") or {}
            if unprocessed:  # the rest the usual way, with its backoff
                rest = [key["id"]["S"] for key in unprocessed[self.table]["Keys"]]
                states.update(self._read_chunk(rest, deadline))
            return states

        return collect

    def write(self, records: Sequence[dict], *, deadline: float | None = None) -> dict[str, str]:
        return self.begin_write(records, deadline=deadline)()

    def begin_write(self, records: Sequence[dict], *, deadline: float | None = None):
        """Send the write now and return a callable that reads it back (``write``'s result).

        With several connections the ``succeeded`` chunks go out now, each on its own
        connection; with one (Lambda) the write is made when collected. Records of other
        statuses (conditional puts, the rare path) are written when collected, after the
        chunks.
        """
        # BatchWriteItem refuses two puts of one key in a request; the last record wins.
        latest = {r["id"]: r for r in records}
        if not self.task_index:  # a record without the index's key is not in the index
            latest = {k: {a: v for a, v in r.items() if a != "task_shard"} for k, r in latest.items()}
        deadline = self._deadline(deadline)
        succeeded = [r for r in latest.values() if r["status"] == SUCCEEDED]
        chunks = [succeeded[i : i + WRITE_CHUNK] for i in range(0, len(succeeded), WRITE_CHUNK)]

        def write_chunk(chunk: list[dict]) -> list:
            return self._write_chunk([to_item(r) for r in chunk], deadline)

        futures = None
        if self.concurrency > 1 and chunks:
            # Each chunk is encoded on the thread that sends it: the first goes out at once.
            futures = self._submit(self._writers(), write_chunk, chunks)

        def collect() -> dict[str, str]:
            if futures is None:
                self._map(write_chunk, chunks)
            else:
                _results(futures)
            refused: dict[str, str] = {}
            for r in latest.values():
                if r["status"] != SUCCEEDED and not self._put_if_forward(r, deadline):
                    refused[r["id"]] = self._why_refused(r, deadline)
            return refused

        return collect

    def record(self, job_id: str, *, deadline: float | None = None) -> dict | None:
        """The job's record as stored (a consistent ``GetItem``), or ``None`` if none yet: a
        handle's reader (:mod:`kindling.producer.handles`), as :meth:`kindling.producer.client.Client.record`."""
        response = self._call("GetItem", {"TableName": self.table, "Key": {"id": {"S": job_id}},
                                          "ConsistentRead": True}, self._deadline(deadline))
        item = response.get("Item")
        return from_item(item) if item else None

    def revoke(self, job_id: str, *, task: str | None = None) -> None:
        """Record the job ``revoked`` (:func:`kindling.core.records.revoke`)."""
        from kindling.core.records import revoke

        revoke(self, job_id, task=task)

    def read_results(self, job_ids: Sequence[str], *, deadline: float | None = None
                     ) -> dict[str, tuple[str, str | None, dict | None]]:
        """``{job_id: (status, result JSON text or None, the pointer to a result kept in S3 or None)}``
        for the ids that have a record: consistent ``BatchGetItem`` calls of 100 keys (chains
        and chords only)."""
        ids = list(dict.fromkeys(job_ids))
        deadline = self._deadline(deadline)
        found: dict[str, tuple[str, str | None, dict | None]] = {}
        for start in range(0, len(ids), READ_CHUNK):
            request = self._read_request(ids[start : start + READ_CHUNK], "#i, #s, #r, #p",
                                         {"#r": "result", "#p": "result_payload"})
            for rnd in range(self.max_rounds):
                response = self._call("BatchGetItem", {"RequestItems": request}, deadline)
                for item in response.get("Responses", {}).get(self.table, []):
                    result, ref = item.get("result"), item.get("result_payload")
                    found[item["id"]["S"]] = (item["status"]["S"], result["S"] if result else None,
                                              _plain(ref) if ref else None)
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    break
                _backoff(rnd, deadline)
            else:
                raise StoreUnavailable(f"BatchGetItem left keys unprocessed after {self.max_rounds} rounds")
        return found

    def count_member(self, key: str, index: int, size: int, *, ok: bool, reason: str | None = None, at_ms: int = 0,
                     ttl_s: int = 0, deadline: float | None = None, message: str | None = None) -> dict:
        """Count chord member ``index`` on the chord record ``key``; return the record as it
        was before (plain values; string sets as lists).

        One ``UpdateItem``: ``ADD`` of the index to the string set ``done`` (and ``dead``
        unless ``ok``), so counting a member twice changes nothing. Retried through
        transient failures like every write: a retry cannot count twice either.

        Unless ``ok`` the record's ``error`` (the first one kept) says "member <index> did not
        succeed: <reason>", or ``message`` when the member's status is not why (a member that
        succeeded but whose result is lost).
        """
        # status_shard and finished_at list the chord in the by_status index (its last count first).
        names = {"#done": "done", "#size": "size", "#st": "status", "#at": "updated_at", "#kind": "kind",
                 "#ss": "status_shard", "#fin": "finished_at"}
        values: dict = {":i": {"SS": [str(index)]}, ":n": {"N": str(size)}, ":at": {"N": str(at_ms)},
                        ":kind": {"S": "chord"}, ":ss": {"S": chord_shard(key)}}
        adds, sets = ["#done :i"], ["#size = :n", "#at = :at", "#kind = :kind", "#ss = :ss", "#fin = :at"]
        if ok:
            sets.append("#st = if_not_exists(#st, :waiting)")
            values[":waiting"] = {"S": WAITING}
        else:
            names.update({"#dead": "dead", "#err": "error"})
            adds.append("#dead :i")
            sets += ["#st = :dead", "#err = if_not_exists(#err, :err)"]
            values[":dead"] = {"S": DEAD}
            values[":err"] = _av(chord_error(index, reason, message))
        if ttl_s:
            names["#exp"] = "expires_at"
            sets.append("#exp = :exp")
            values[":exp"] = {"N": str(at_ms // 1000 + ttl_s)}
        response = self._call("UpdateItem", {
            "TableName": self.table, "Key": {"id": {"S": key}},
            "UpdateExpression": f"ADD {', '.join(adds)} SET {', '.join(sets)}",
            "ExpressionAttributeNames": names, "ExpressionAttributeValues": values, "ReturnValues": "ALL_OLD",
        }, self._deadline(deadline))
        return from_item(response.get("Attributes") or {})

    def take(self, key: str, want: int, limit: int, *, ttl_s: int, deadline: float | None = None) -> int:
        """Take up to ``want`` of the ``limit`` runs counted under ``key`` (a rate-limited
        task's window: :mod:`kindling.core.ratelimit`); return how many were taken.

        One conditional ``UpdateItem`` (``ADD``, only while the count leaves room for all of
        them); when it does not, the rest of the window is read and taken in a second."""
        import time

        def add(n: int) -> bool:
            try:
                self._call("UpdateItem", {
                    "TableName": self.table, "Key": {"id": {"S": key}},
                    "UpdateExpression": "ADD #n :n SET #exp = if_not_exists(#exp, :exp)",
                    "ConditionExpression": "attribute_not_exists(#n) OR #n <= :room",
                    "ExpressionAttributeNames": {"#n": "taken", "#exp": "expires_at"},
                    "ExpressionAttributeValues": {":n": {"N": str(n)}, ":room": {"N": str(limit - n)},
                                                  ":exp": {"N": str(int(time.time()) + ttl_s)}},
                }, self._deadline(deadline))
            except _ConditionFailed:
                return False
            return True

        if want <= limit and add(want):
            return want
        item = self._call("GetItem", {"TableName": self.table, "Key": {"id": {"S": key}}, "ConsistentRead": True},
                          self._deadline(deadline)).get("Item") or {}
        left = min(want, limit - int(item.get("taken", {}).get("N", 0)))
        return left if left > 0 and add(left) else 0

    def give_back(self, key: str, count: int, *, deadline: float | None = None) -> None:
        """Return ``count`` runs taken under ``key``: one conditional ``UpdateItem`` (``ADD``
        of ``-count``, only while at least that many are taken; else nothing changes)."""
        try:
            self._call("UpdateItem", {
                "TableName": self.table, "Key": {"id": {"S": key}},
                "UpdateExpression": "ADD #n :less", "ConditionExpression": "#n >= :count",
                "ExpressionAttributeNames": {"#n": "taken"},
                "ExpressionAttributeValues": {":less": {"N": str(-count)}, ":count": {"N": str(count)}},
            }, self._deadline(deadline))
        except _ConditionFailed:  # fewer are taken (the item expired): nothing to give back
            return

    def claim_chord(self, key: str, callback: str | None, *, at_ms: int = 0, claimed_at: int | None = None,
                    deadline: float | None = None) -> bool:
        """Move the chord record from ``waiting`` to ``completed``, naming its callback, before
        the callback is sent: one conditional ``UpdateItem``, so of every delivery that finds
        the chord complete one claims it. ``False`` if it was not ``waiting`` (claimed
        already, ``dead``, or never counted).

        With ``claimed_at``, take over the claim made then instead, if its callback was never
        marked sent (:mod:`kindling.engine.followups`: a claim past its lease): again one wins.
        """
        names = {"#st": "status", "#cat": "completed_at"}
        values = {":completed": {"S": COMPLETED}, ":waiting": {"S": WAITING}, ":at": {"N": str(at_ms)}}
        condition = "#st = :waiting"
        if claimed_at is not None:
            names["#sent"] = "sent_at"
            values[":claimed"] = {"N": str(claimed_at)}
            condition = "#st = :completed AND #cat = :claimed AND attribute_not_exists(#sent)"
            del values[":waiting"]
        sets = ["#st = :completed", "#cat = :at"]
        if callback:
            names["#cb"] = "callback"
            values[":cb"] = {"S": callback}
            sets.append("#cb = :cb")
        try:
            self._call("UpdateItem", {
                "TableName": self.table, "Key": {"id": {"S": key}}, "UpdateExpression": f"SET {', '.join(sets)}",
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names, "ExpressionAttributeValues": values,
            }, self._deadline(deadline))
        except _ConditionFailed:
            return False
        return True

    def mark_chord_sent(self, key: str, *, at_ms: int = 0, deadline: float | None = None) -> None:
        """Note on a claimed (``completed``) chord record that its callback was sent."""
        try:
            self._call("UpdateItem", {
                "TableName": self.table, "Key": {"id": {"S": key}}, "UpdateExpression": "SET #sent = :at",
                "ConditionExpression": "#st = :completed",
                "ExpressionAttributeNames": {"#sent": "sent_at", "#st": "status"},
                "ExpressionAttributeValues": {":at": {"N": str(at_ms)}, ":completed": {"S": COMPLETED}},
            }, self._deadline(deadline))
        except _ConditionFailed:  # failed since (a member's result lost): nothing to note
            return

    def close(self) -> None:
        """Stop the chunk threads (if any were started)."""
        pools, self._pool, self._read_pool = (self._pool, self._read_pool), None, None
        for pool in pools:
            if pool is not None:
                pool.shutdown()

    # -- internals

    def _deadline(self, deadline: float | None) -> float:
        return time.monotonic() + self.call_timeout_s if deadline is None else deadline

    def _read_request(self, ids: list[str], projection: str = "#i, #s, #a, #g", names: dict | None = None) -> dict:
        return {
            self.table: {
                "Keys": [{"id": {"S": i}} for i in ids],
                "ProjectionExpression": projection,
                "ExpressionAttributeNames": {"#i": "id", "#s": "status",
                                             **(names or {"#a": "attempts", "#g": "generation"})},
                "ConsistentRead": True,
            }
        }

    def _states(self, response: dict) -> dict[str, tuple[str, int]]:
        states = {}
        for item in response.get("Responses", {}).get(self.table, []):
            attempts = item.get("attempts", {}).get("N", "0")
            generation = item.get("generation", {}).get("N", "1")
            states[item["id"]["S"]] = stored_state({"status": item["status"]["S"],
                                              "attempts": int(attempts) if attempts.isdigit() else 0,
                                              "generation": int(generation) if generation.isdigit() else 1})
        return states

    def _read_chunk(self, ids: list[str], deadline: float) -> dict[str, tuple[str, int]]:
        states: dict[str, tuple[str, int]] = {}
        request = self._read_request(ids)
        for rnd in range(self.max_rounds):
            response = self._call("BatchGetItem", {"RequestItems": request}, deadline)
            states.update(self._states(response))
            request = response.get("UnprocessedKeys") or {}
            if not request:
                return states
            _backoff(rnd, deadline)
        raise StoreUnavailable(f"BatchGetItem left keys unprocessed after {self.max_rounds} rounds")

    def _write_chunk(self, items: list[dict], deadline: float) -> list:
        pending = [{"PutRequest": {"Item": it}} for it in items]
        for rnd in range(self.max_rounds):
            try:
                response = self._call("BatchWriteItem", {"RequestItems": {self.table: pending}}, deadline)
            except _ItemRefused:
                # One item DynamoDB will not take must not cost the others their records.
                for request in pending:
                    self._put(request["PutRequest"]["Item"], deadline)
                return []
            pending = (response.get("UnprocessedItems") or {}).get(self.table) or []
            if not pending:
                return []
            _backoff(rnd, deadline)
        raise StoreUnavailable(f"BatchWriteItem left {len(pending)} items unprocessed after {self.max_rounds} rounds")

    def _put_if_forward(self, record: dict, deadline: float) -> bool:
        """PutItem under the forward-only rule; ``False`` if the stored record wins."""
        status = record["status"]
        allowed = sorted(s for s in REPLACES[status] if s is not None and not (status == s == FAILED))
        values = {f":s{n}": {"S": s} for n, s in enumerate(allowed)}
        clauses = ["attribute_not_exists(#i)"]
        if allowed:
            clauses.append(f"#s IN ({', '.join(values)})")
        names = {"#i": "id", "#s": "status"}
        if status == FAILED:  # a failed record never rolls back a later attempt's
            clauses.append("(#s = :failed AND #a <= :attempts)")
            values[":failed"] = {"S": FAILED}
            values[":attempts"] = {"N": str(record.get("attempts", 0))}
            names["#a"] = "attempts"
        expression = " OR ".join(clauses)
        if status in GENERATION_CHECKED and len(clauses) > 1:
            # Only over a record of the generation this batch read (a revive since makes a newer one).
            generation = generation_of(record)
            names["#g"] = "generation"
            values[":g"] = {"N": str(generation)}
            same = "(attribute_not_exists(#g) OR #g = :g)" if generation == 1 else "#g = :g"
            expression = f"{clauses[0]} OR (({' OR '.join(clauses[1:])}) AND {same})"
        condition = {"ConditionExpression": expression, "ExpressionAttributeNames": names,
                     "ExpressionAttributeValues": values}
        return self._put(to_item(record), deadline, condition)

    def _why_refused(self, record: dict, deadline: float) -> str:
        """Why the stored record won (a consistent GetItem: the rare path pays for the log's
        words): :data:`NEWER_GENERATION`, else its status."""
        try:
            item = self._call("GetItem", {"TableName": self.table, "Key": {"id": {"S": record["id"]}},
                                          "ConsistentRead": True, "ProjectionExpression": "#s, #g",
                                          "ExpressionAttributeNames": {"#s": "status", "#g": "generation"}},
                              deadline).get("Item") or {}
        except StoreUnavailable:  # the write itself is settled: only the reason is unknown
            return "a final outcome"
        stored = from_item(item)
        if record["status"] in GENERATION_CHECKED and generation_of(stored) > generation_of(record):
            return NEWER_GENERATION
        return stored.get("status") or "a final outcome"

    def _put(self, item: dict, deadline: float, condition: dict | None = None) -> bool:
        try:
            self._call("PutItem", {"TableName": self.table, "Item": item, **(condition or {})}, deadline)
        except _ConditionFailed:
            return False
        except _ItemRefused as exc:
            # Built within DynamoDB's limits, a record should never be refused; if it is,
            # keep the outcome and say why rather than lose the job's record.
            keep = ("id", "task", "status", "attempts", "started_at", "finished_at", "expires_at")
            slim = {k: v for k, v in item.items() if k in keep}
            slim["error"] = {"M": {"type": {"S": "RecordRefused"},
                                   "message": {"S": f"the full record was refused by DynamoDB: {exc}"[:2000]}}}
            try:
                self._call("PutItem", {"TableName": self.table, "Item": slim, **(condition or {})}, deadline)
            except _ConditionFailed:
                return False
            except _ItemRefused as again:
                raise StoreUnavailable(f"DynamoDB refused record {item['id']['S'][:100]!r}: {again}") from again
        return True

    def _map(self, fn, chunks: list) -> list:
        if self.concurrency == 1 or len(chunks) <= 1:
            return [fn(chunk) for chunk in chunks]
        return _results(self._submit(self._writers(), fn, chunks))

    def _writers(self):
        if self._pool is None:
            self._pool = self._new_pool("kindling-store")
        return self._pool

    def _readers(self):
        if self._read_pool is None:
            self._read_pool = self._new_pool("kindling-store-read")
        return self._read_pool

    def _new_pool(self, name: str):
        import threading
        from concurrent.futures import ThreadPoolExecutor

        with _LOCAL_MADE:  # a stream worker may make its read pool and its write pool at once
            if self._local is None:
                self._local = threading.local()
        return ThreadPoolExecutor(self.concurrency, thread_name_prefix=name, initializer=self._init_thread)

    @staticmethod
    def _submit(pool, fn, chunks: list) -> list:
        return [pool.submit(fn, chunk) for chunk in chunks]

    def _init_thread(self) -> None:
        from kindling.drivers.aws import JsonClient

        # One connection per chunk thread: a JsonClient carries one request at a time.
        base = self.client
        self._local.client = JsonClient(base.service, base.target_prefix, region=base.region, endpoint=base.endpoint,
                                        timeout=base.timeout, max_attempts=base.max_attempts)

    def _call(self, operation: str, payload: dict, deadline: float) -> dict:
        """One operation. A write is tried again through transient failures until the
        deadline: the client's own few retries are soon spent in an outage or a run of
        connection resets, and giving up early would hand back jobs that already ran (to
        run again) while there was still time to record them. A read gives up after the
        client's retries: nothing has run yet, and the queue's backoff is the better wait.
        """
        local = self._local
        client = getattr(local, "client", None) if local is not None else None
        rounds = 0
        while True:
            try:
                return self._guard(operation,
                                   lambda: (client or self.client).call(operation, payload, deadline=deadline))
            except StoreUnavailable as exc:
                if operation not in _WRITES or not getattr(exc.__cause__, "retryable",
                                                           isinstance(exc.__cause__, OSError)):
                    raise
                rounds += 1
                if not WRITE_RETRY.wait(rounds, deadline, time.sleep):
                    raise

    def _guard(self, operation: str, fn):
        """Run ``fn``, turning AWS and transport failures into the store's own errors."""
        from kindling.drivers.aws import AwsError

        try:
            return fn()
        except AwsError as exc:
            if exc.code == "ConditionalCheckFailedException":
                raise _ConditionFailed(str(exc)) from exc
            if exc.code == "ValidationException" and operation in ("BatchWriteItem", "PutItem"):
                raise _ItemRefused(str(exc)) from exc
            raise StoreUnavailable(f"DynamoDB {operation} on {self.table}: {exc}") from exc
        except OSError as exc:  # connection refused, DNS, ... after the client's own retries
            raise StoreUnavailable(f"DynamoDB {operation} on {self.table}: {exc}") from exc


WRITE_RETRY = Retry(None, base=0.1, cap=2.0)
"""A write through transient failures: tried again until the deadline, full-jitter waits from
100 ms doubling to 2 s (the client's own retries come first, inside each try)."""
UNPROCESSED_RETRY = Retry(None, base=0.05, cap=2.0)
"""Items or keys DynamoDB left unprocessed: sent again after 50 ms doubling to 2 s (jittered),
``max_rounds`` times at most, never past the deadline."""

# UpdateItem: a chord count (an ADD to a set, so a retry cannot count twice) or its mark.
_WRITES = frozenset({"BatchWriteItem", "PutItem", "UpdateItem"})


class _ConditionFailed(Exception):
    """The stored record may not be replaced (records only move forward)."""


class _ItemRefused(Exception):
    """DynamoDB refused an item itself (size, key), not the request's transport."""


def _results(futures: list) -> list:
    """Every chunk's result; each chunk is attempted even if one fails (puts are
    idempotent), and the first error is raised once all are done."""
    results, error = [], None
    for f in futures:
        try:
            results.append(f.result())
        except BaseException as exc:  # noqa: BLE001 - raised below, after the other chunks
            error = error or exc
    if error is not None:
        raise error
    return results

def _backoff(round_: int, deadline: float) -> None:
    """Wait before retrying unprocessed items, never past the deadline."""
    if not UNPROCESSED_RETRY.wait(round_ + 1, deadline, time.sleep):
        raise StoreUnavailable("DynamoDB kept items unprocessed until the deadline")


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
    if kind == "SS":
        return sorted(value)
    if kind == "BOOL":
        return value
    if kind == "NULL":
        return None
    raise ValueError(f"unexpected DynamoDB attribute type {kind}")
