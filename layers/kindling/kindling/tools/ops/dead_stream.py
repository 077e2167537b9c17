"""The Valkey dead stream: look at it, and move it back to the job stream.

The stream worker (:mod:`kindling.triggers.valkey.consumer`) copies every ``dead`` job to
``<stream>:dead`` (capped, ``MAXLEN ~``) with fields ``job`` (the body as delivered),
``error``, ``entry`` (its entry id on the job stream), ``job_id``, ``attempts``, ``dead_at``
and, when the producer sent them, ``sig`` (:mod:`kindling.core.jobsig`) and ``trace``. This is
``kindling dlq peek|redrive --valkey`` and ``kindling jobs retry ID --valkey``: the same
operations as :mod:`kindling.tools.ops.dlq` and :mod:`kindling.tools.ops.revive` over SQS.

``peek`` reads the oldest entries (``XRANGE``: nothing is received or hidden, a stream can
be read as it is) and each job's current record, from DynamoDB or from the Valkey result
store, whichever the worker writes to.

``redrive`` moves the entries that were in the dead stream when it started (up to its last
id then: a job that dies again meanwhile is not moved twice in one run), oldest first, a
chunk at a time: one pipelined round trip of ``XADD`` s to the job stream (``job``, ``sig``
and ``trace``: the body is moved unchanged, as SQS's move task does, so a signed job still
verifies), then, for the entries
whose copy was added, one of ``XDEL`` s from the dead stream. An entry is deleted only after
its copy is on the job stream, so a redrive that stops half way leaves an entry in both
places at worst (its job then runs once and is skipped once as a duplicate, or dies again),
never in neither. The copy is a new entry: the stream's delivery count starts again.

Before moving, it revives the jobs recorded ``dead``, as ``kindling jobs retry`` does: a
record that is still the ``dead`` one read is replaced by a ``queued`` record of the next
generation (attempts 0), and the generation is counted in the job's revive ledger. The
worker reads ``queued`` as no record, so the job runs again from attempt 1; without the
revive it would see ``dead`` and move the job straight back. ``revive=False`` moves entries
as they are. DynamoDB records are revived by :func:`kindling.tools.ops.revive.revive`; Valkey
records by one server-side script (the same check and replace, the ledger at
``<prefix>:revive:<id>``). A revived job that failed its chord reopens it
(:func:`kindling.tools.ops.revive.reopen_chord`).

When the deployment signs jobs (``KINDLING_SIGNING_SECRET``), anyone who can write to the
dead stream could add an entry there, so nothing in an entry is trusted before its signature
is checked against the job stream, as the worker would check it: a retry or redrive reads the
job id (and, for a chord member, its chord) only from a body whose signature verifies, never
from the entry's ``job_id`` field. An entry that does not verify is neither revived nor moved:
``retry`` refuses it, ``redrive`` leaves it in the dead stream and counts it ``unverified``.
"""

from __future__ import annotations

import time

from kindling.core import codec
from kindling.core.status import DEAD, QUEUED
from kindling.core.valkey.keys import (
    DEAD_AT,
    DEAD_ATTEMPTS,
    DEAD_ENTRY,
    DEAD_ERROR,
    DEAD_JOB_ID,
    DEFAULT_PREFIX,
    DEFAULT_STREAM,
    JOB_NAME,
    SIG_NAME,
    TRACE_NAME,
    dead_key,
    result_key,
    revive_key,
)
from kindling.shared.valkey.connection import text
from kindling.shared.valkey.scripts import REVIVE
from kindling.tools.ops import OpsError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["DeadStream", "ValkeyRecords", "DynamoRecords", "peek", "redrive", "retry", "CHUNK"]

CHUNK = 100
"""Entries moved per round trip pair (XADDs, then XDELs)."""

HISTORY = 20



class DeadStream:
    """A job stream and its dead stream on one Valkey."""

    def __init__(self, url: str, stream: str = DEFAULT_STREAM, *, client=None, keyring=None):
        from kindling.shared.valkey.connection import connect

        if not url:
            raise OpsError("no Valkey URL: set KINDLING_VALKEY_URL or pass --valkey-url-file")
        self.url = url
        self.stream = stream
        self.dead = dead_key(stream)
        self.client = client or connect(url, socket_timeout=10)
        self._keyring = keyring  # signing on: the deployment's keys (default: KINDLING_SIGNING_SECRET's)
        self._verifier = None

    @property
    def verifier(self):
        """The worker's check of signatures (:class:`kindling.shared.signed.Verifier`) when the
        deployment signs jobs, else ``None``."""
        if self._verifier is None:
            keyring = self._keyring
            if keyring is None:
                from kindling.shared import config

                secret = config.signing_secret()
                if not secret:
                    return None
                import boto3
                from kindling.shared.signed import Keyring, boto3_fetch

                keyring = Keyring(secret, fetch=boto3_fetch(boto3.Session()))
            from kindling.shared.signed import Verifier

            self._verifier = Verifier(keyring)
            trouble = self._verifier.prepare()
            if trouble is not None:
                self._verifier = None
                raise OpsError(f"the deployment signs jobs, and its {trouble}: dead entries cannot be checked")
        return self._verifier

    def unverified(self, entry_id: str, fields: dict) -> str | None:
        """Why the entry's body is not to be trusted (its signature for the job stream does
        not verify), or ``None``: it is, or the deployment does not sign jobs."""
        verifier = self.verifier
        if verifier is None:
            return None
        from kindling.core.batch import Delivery
        from kindling.core.jobsig import stream_destination

        d = Delivery(entry_id, fields.get(JOB_NAME) or b"", signature=fields.get(SIG_NAME),
                     source=stream_destination(self.stream))
        return verifier.check(d)


class DynamoRecords:
    """Job records in the results table (what the worker writes by default)."""

    def __init__(self, stack):
        self.stack = stack

    def read(self, ids: list[str]) -> dict[str, dict]:
        from kindling.tools.ops.dlq import _records

        return _records(self.stack, ids) if ids else {}

    def revive(self, record: dict) -> int:
        from kindling.tools.ops.revive import revive

        return revive(self.stack, record)

    def reopen_chord(self, body: str | bytes) -> bool:
        from kindling.tools.ops.revive import reopen_chord

        return reopen_chord(self.stack, body)


class ValkeyRecords:
    """Job records in the Valkey result store (``KINDLING_RESULTS=valkey``)."""

    def __init__(self, url: str, *, prefix: str = DEFAULT_PREFIX, client=None):
        from kindling.stores.valkey import ValkeyResultStore

        self.store = ValkeyResultStore(url, prefix=prefix, client=client)
        self.client = self.store.client

    def _ledger(self, job_id: str) -> str:
        return revive_key(self.store.prefix, job_id)

    def read(self, ids: list[str]) -> dict[str, dict]:
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        prefix = self.store.prefix
        values = self.client.mget([result_key(prefix, i) for i in ids] + [self._ledger(i) for i in ids])
        out = {}
        for n, job_id in enumerate(ids):
            value, ledger = values[n], values[len(ids) + n]
            if value is None:
                continue
            record = codec.loads(value)
            ledger = codec.loads(ledger) if ledger is not None else {}
            record.setdefault("generation", ledger.get("generation", 1))
            record["previous"] = ledger.get("history", [])
            out[job_id] = record
        return out

    def reopen_chord(self, body: str | bytes) -> bool:
        from kindling.tools.ops.revive import chord_member

        member = chord_member(body)
        return member is not None and self.store.reopen_chord(*member)

    def revive(self, record: dict, *, now_ms: int | None = None) -> int:
        from kindling.core.records import build_record
        from kindling.tools.ops.revive import RetryRefused

        job_id = record["id"]
        if record.get("status") != DEAD:
            raise RetryRefused(f"job {job_id} is {record.get('status')}, not dead: nothing to revive")
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        generation = int(record.get("generation") or 1)
        ttl_s = self.store.ttl_s
        queued = build_record(key=job_id, task=record.get("task"), status=QUEUED, attempts=0, started_at=now_ms,
                              finished_at=now_ms, ttl_s=ttl_s, trace_id=record.get("trace_id"),
                              generation=generation + 1)
        error = record.get("error") or {}
        summary = {"generation": generation, "status": DEAD, "attempts": record.get("attempts", 0),
                   "finished_at": record.get("finished_at", 0),
                   "error": {"type": error.get("type", ""), "message": str(error.get("message", ""))[:1000]},
                   "revived_at": now_ms}
        ledger = {"job_id": job_id, "generation": generation + 1, "revived_at": now_ms,
                  "history": (list(record.get("previous") or []) + [summary])[-HISTORY:]}
        script = self.client.register_script(REVIVE)
        refused = script(keys=[result_key(self.store.prefix, job_id), self._ledger(job_id)],
                         args=[record.get("finished_at", 0), codec.dumps(queued), codec.dumps(ledger), ttl_s])
        if refused is not None:
            raise RetryRefused(f"job {job_id} changed while it was being revived (now {text(refused)}): "
                               "look again before retrying")
        return generation + 1


def _entries(dead: DeadStream, start: str, end: str, count: int) -> list[tuple[str, dict]]:
    return [(text(i), {text(k): v for k, v in (f or {}).items()}) for i, f in
            dead.client.xrange(dead.dead, min=start, max=end, count=count)]


def _row(entry_id: str, fields: dict) -> dict:
    body = fields.get(JOB_NAME) or b""
    task = None
    try:
        data = codec.loads(body)
        task = data.get("task") if isinstance(data, dict) else None
        job_id = text(fields.get(DEAD_JOB_ID) or b"") or (data.get("id") if isinstance(data, dict) else None)
    except ValueError:
        job_id = text(fields.get(DEAD_JOB_ID) or b"") or None
    return {"entry_id": entry_id, "job_id": job_id or None, "task": task if isinstance(task, str) else None,
            "dead_at": int(text(fields.get(DEAD_AT) or b"0") or 0),
            "attempts": int(text(fields.get(DEAD_ATTEMPTS) or b"0") or 0),
            "reason": text(fields.get(DEAD_ERROR) or b"") or None, "entry": text(fields.get(DEAD_ENTRY) or b"") or None}


def _trusted_id(dead: DeadStream, entry_id: str, fields: dict) -> tuple[str | None, str | None]:
    """``(the job id to act on, None)`` for an entry, or ``(None, why it is not to be trusted)``.

    With signing on, the id is read from the verified body, never from the entry's ``job_id``
    field, which anyone who can write to the dead stream could have set."""
    why = dead.unverified(entry_id, fields)
    if why is not None:
        return None, f"signature: {why}"
    if dead.verifier is None:
        return _row(entry_id, fields)["job_id"], None
    from kindling.core.envelope import decode_job

    try:
        return decode_job(fields.get(JOB_NAME) or b"").id, None
    except Exception as exc:  # noqa: BLE001 - signed, yet not a job this version reads
        return None, f"the body cannot be decoded: {type(exc).__name__}"[:300]


def peek(dead: DeadStream, records: DynamoRecords | ValkeyRecords | None = None, *, limit: int = 10) -> dict:
    """The oldest ``limit`` dead entries (job id, task, reason, dead time, attempts, the job's
    current record status and generation when ``records`` is given) and the dead stream's length."""
    rows = [_row(i, f) for i, f in _entries(dead, "-", "+", limit)]
    if records is not None:
        current = records.read([r["job_id"] for r in rows if r["job_id"]])
        for r in rows:
            record = current.get(r["job_id"] or "", {})
            r["status"], r["generation"] = record.get("status"), record.get("generation")
    return {"stream": dead.dead, "length": int(dead.client.xlen(dead.dead)), "entries": rows,
            "oldest_dead_at": rows[0]["dead_at"] if rows else None}


def redrive(dead: DeadStream, records: DynamoRecords | ValkeyRecords | None = None, *, revive_dead: bool = True,
            progress: Callable[[str], None] = print, chunk: int = CHUNK) -> dict:
    """Move the dead stream's entries back to the job stream (reviving dead jobs first, when
    ``records`` is given); report ``{"moved", "revived", "revive_refused", "total"}``."""
    from kindling.tools.ops.revive import RetryRefused

    if revive_dead and records is None:
        raise OpsError("redrive needs the results (--table, or --results valkey) to revive dead jobs; "
                       "--no-revive moves the entries as they are")
    last = dead.client.xrevrange(dead.dead, count=1)
    report = {"moved": 0, "revived": 0, "revive_refused": 0, "unverified": 0,
              "total": int(dead.client.xlen(dead.dead))}
    if not last:
        progress(f"{dead.dead} is empty: nothing to move")
        return report
    end = text(last[0][0])
    progress(f"{report['total']} entries in {dead.dead}; moving them to {dead.stream}")
    start = "-"
    while True:
        entries = _entries(dead, start, end, chunk)
        if not entries:
            break
        start = "(" + entries[-1][0]
        trusted, jobs = [], []
        for entry_id, fields in entries:
            job_id, why = _trusted_id(dead, entry_id, fields)
            if why is not None:  # neither revived nor moved: the worker would reject it anyway
                report["unverified"] += 1
                progress(f"entry {entry_id} left in {dead.dead}: {why}")
                continue
            trusted.append((entry_id, fields))
            jobs.append((job_id, fields.get(JOB_NAME) or b""))
        if revive_dead:
            revived, refused = _revive(jobs, records, progress, RetryRefused)  # type: ignore[arg-type]
            report["revived"] += revived
            report["revive_refused"] += refused
        moved, added = _move(dead, trusted) if trusted else ([], [])
        report["moved"] += len(moved)
        progress(f"moved {report['moved']} of {report['total']}")
        if len(moved) < len(trusted):
            failed = next(r for r in added if isinstance(r, Exception))
            progress(f"{len(trusted) - len(moved)} entries could not be added to {dead.stream} ({failed}); "
                     "they stay in the dead stream")
            break
    return report


def _move(dead: DeadStream, entries: list[tuple[str, dict]]) -> tuple[list[str], list]:
    """Add a copy of each entry to the job stream (one pipelined round trip), then delete
    from the dead stream the entries whose copy was added; return their ids and the replies."""
    pipe = dead.client.pipeline(transaction=False)
    for _, fields in entries:
        copy = {JOB_NAME: fields.get(JOB_NAME) or b""}
        for kept in (SIG_NAME, TRACE_NAME):  # a signed job still verifies on its own stream
            if fields.get(kept):
                copy[kept] = fields[kept]
        pipe.xadd(dead.stream, copy)
    added = pipe.execute(raise_on_error=False)
    moved = [entry_id for (entry_id, _), reply in zip(entries, added, strict=True) if not isinstance(reply, Exception)]
    if moved:
        dead.client.xdel(dead.dead, *moved)
    return moved, added


def retry(dead: DeadStream, records: DynamoRecords | ValkeyRecords, job_id: str, *, search: int = 1000) -> dict:
    """``kindling jobs retry ID --valkey``: send one job of the dead stream back to its job
    stream, as :func:`kindling.tools.ops.revive.retry_job` does from an SQS DLQ.

    Its entry is looked for among the first ``search`` entries of the dead stream (oldest
    first). A ``dead`` record is revived (a new generation) and the chord it failed
    reopened before the entry is added back; a ``queued`` one (a retry that stopped half
    way) or none is sent as it is; a ``succeeded`` or ``failed`` job is refused. The
    record is read again once the entry is found: the worker records an outcome before it
    adds the entry, so that read is never older than the entry. Returns ``{"id",
    "previous_status", "generation", "entry", "stream"}``.
    """
    from kindling.tools.ops.revive import RetryRefused, refuse_settled

    refuse_settled(job_id, records.read([job_id]).get(job_id))
    found: list[tuple[str, dict]] = []
    untrusted: list[tuple[str, str]] = []  # entries that name the job but do not verify
    start, seen = "-", 0
    while seen < search:
        entries = _entries(dead, start, "+", min(CHUNK, search - seen))
        if not entries:
            break
        seen += len(entries)
        start = "(" + entries[-1][0]
        for i, f in entries:
            trusted_id, why = _trusted_id(dead, i, f)
            if trusted_id == job_id:
                found.append((i, f))
            elif why is not None and _row(i, f)["job_id"] == job_id:
                untrusted.append((i, why))
        if found:
            break
    if not found and untrusted:
        entry_id, why = untrusted[0]
        raise RetryRefused(f"job {job_id}: its entry {entry_id} in {dead.dead} is not validly signed for {dead.stream} "
                           f"({why}): not retried, nothing revived")
    if not found:
        raise RetryRefused(f"job {job_id}: not in {dead.dead} (looked at {seen} entries): it is queued or running, "
                           "already retried, trimmed from the dead stream, or unknown")
    record = records.read([job_id]).get(job_id)
    refuse_settled(job_id, record)
    status = record.get("status") if record else None
    generation = int(record.get("generation") or 1) if record else 1
    if status == DEAD:
        generation = records.revive(record)
    records.reopen_chord(found[0][1].get(JOB_NAME) or b"")  # before the entry: its count must find the chord open
    moved, added = _move(dead, found[:1])
    if not moved:
        raise OpsError(f"job {job_id}: its entry could not be added to {dead.stream} ({added[0]}); it stays in "
                       f"{dead.dead}: run the retry again")
    return {"id": job_id, "previous_status": status, "generation": generation, "entry": text(added[0]),
            "stream": dead.stream}


def _revive(jobs: list[tuple[str | None, bytes]], records, progress, refused_error) -> tuple[int, int]:
    """Revive the dead records of ``jobs`` (``(job id, body)`` of entries to be trusted)."""
    bodies = dict(jobs)
    ids = [i for i in bodies if i]
    current = records.read(ids)
    revived = refused = 0
    for job_id in ids:
        record = current.get(job_id)
        if record is None or record.get("status") != DEAD:
            continue
        try:
            records.revive(record)
            revived += 1
            records.reopen_chord(bodies[job_id])  # before the entry is added back
        except refused_error as exc:
            refused += 1
            progress(f"not revived: {exc}")
    if revived:
        progress(f"revived {revived} dead job(s) as a new generation")
    return revived, refused
