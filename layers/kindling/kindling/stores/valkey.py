"""Results in Valkey (optional): outcomes next to the stream, with waiters that block."""

from __future__ import annotations

import time

from kindling.core import codec
from kindling.core.policy import configured_result_ttl_days
from kindling.core.valkey.keys import DEFAULT_PREFIX, done_key, result_key
from kindling.shared.valkey.connection import connect, text
from kindling.shared.valkey.scripts import CLAIM_CHORD as _CLAIM_CHORD
from kindling.shared.valkey.scripts import COUNT_MEMBER as _COUNT_MEMBER
from kindling.shared.valkey.scripts import FORWARD_ONLY as _FORWARD_ONLY
from kindling.shared.valkey.scripts import MARK_CHORD_SENT as _MARK_CHORD_SENT
from kindling.shared.valkey.scripts import REOPEN_CHORD as _REOPEN_CHORD


class ValkeyResultStore:
    """Outcomes in Valkey instead of DynamoDB, with waiters that block instead of polling.

    A record is JSON under ``<prefix>:result:<id>`` with an expiry of ``ttl_s``. Writing a
    final outcome (succeeded, dead, rejected) also pushes to ``<prefix>:done:<id>``, which
    :meth:`wait` blocks on with ``BLPOP``. ``read_states`` and ``write`` are one pipelined
    round trip each. Records only move forward (:func:`kindling.core.status.may_replace`):
    ``succeeded`` records are plain ``SET``s, every other status is checked and set in one
    server-side script, so a stale ``failed`` never replaces a ``succeeded``, and a ``failed``
    or ``dead`` lands only on a record of the generation its batch read
    (:data:`kindling.core.status.GENERATION_CHECKED`). Valkey errors
    become :class:`~kindling.core.errors.StoreUnavailable`, so the runner hands a batch back
    rather than losing it, and so does a call's ``deadline=`` passing: every round trip
    gives up at it (with kindling's client; a valkey-py client passed as ``client=`` is
    bounded by its own socket timeout once the call is sent).

    Chains and chords work as on DynamoDB (:mod:`kindling.engine.followups`): a chord's record is
    ``<prefix>:result:chord#<id>``, counted and marked by server-side scripts, and a handle
    reads outcomes through the store (``handle.reader = ValkeyResultStore(url)``).
    """

    def __init__(self, url: str, ttl_s: int | None = None, *, prefix: str = DEFAULT_PREFIX,
                 client=None):
        self.url = url
        self.ttl_s = int(configured_result_ttl_days() * 86_400) if ttl_s is None else ttl_s
        self.prefix = prefix
        self.client = client or connect(url, socket_timeout=10)

    def _key(self, job_id: str) -> str:
        return result_key(self.prefix, job_id)

    def _done(self, job_id: str) -> str:
        return done_key(self.prefix, job_id)

    def _records(self, job_ids, deadline: float | None) -> dict[str, dict]:
        """The records of ``job_ids`` that have one, in one ``MGET``."""
        ids = list(dict.fromkeys(job_ids))
        if not ids:
            return {}
        pipe = self.client.pipeline(transaction=False)
        pipe.mget([self._key(i) for i in ids])
        (values,) = self._execute(pipe, deadline)
        return {i: codec.loads(value) for i, value in zip(ids, values, strict=True) if value is not None}

    def read_states(self, job_ids, *, deadline: float | None = None) -> dict[str, tuple[str, int]]:
        from kindling.core.records import stored_state

        return {i: stored_state(record) for i, record in self._records(job_ids, deadline).items()}

    def get_statuses(self, job_ids) -> dict[str, str]:
        return {i: state[0] for i, state in self.read_states(job_ids).items()}

    def begin_read(self, job_ids, *, deadline: float | None = None):
        """:meth:`read_states` now (one round trip on the store's one connection: nothing to
        overlap it with); calling the result gives its answer."""
        states = self.read_states(job_ids, deadline=deadline)
        return lambda: states

    def begin_write(self, records, *, deadline: float | None = None):
        """:meth:`write` now, so the records are seen at once (a stream worker collects its
        write only after its next read of the stream); calling the result gives its answer."""
        refused = self.write(records, deadline=deadline)
        return lambda: refused

    def write(self, records, *, deadline: float | None = None) -> dict[str, str]:
        from kindling.core.status import FAILED, FINAL, GENERATION_CHECKED, REPLACES, SUCCEEDED, generation_of

        if not records:
            return {}
        latest = {r["id"]: r for r in records}
        pipe = self.client.pipeline(transaction=False)
        checked = []
        for r in latest.values():
            key, done, final = self._key(r["id"]), self._done(r["id"]), r.get("status") in FINAL
            if r["status"] == SUCCEEDED:
                pipe.set(key, codec.dumps(r), ex=self.ttl_s)
                if final:
                    pipe.rpush(done, 1)
                    pipe.expire(done, self.ttl_s)
                continue
            allowed = [s for s in REPLACES[r["status"]] if s is not None and not (r["status"] == s == FAILED)]
            is_failed = int(r["status"] == FAILED)
            checked_generation = generation_of(r) if r["status"] in GENERATION_CHECKED else 0
            args = [codec.dumps(r), self.ttl_s, int(final), r.get("attempts") or 0, is_failed, checked_generation,
                    *allowed]
            self._forward_script()(keys=[key, done], args=args, client=pipe)
            checked.append((len(pipe), r["id"]))
        replies = self._execute(pipe, deadline)
        return {job_id: text(replies[at - 1]) for at, job_id in checked if replies[at - 1] is not None}

    _script = None

    def _forward_script(self):
        if self._script is None:
            self._script = self.client.register_script(_FORWARD_ONLY)
        return self._script

    def get(self, job_id: str, *, deadline: float | None = None) -> dict | None:
        pipe = self.client.pipeline(transaction=False)
        pipe.get(self._key(job_id))
        (value,) = self._execute(pipe, deadline)
        return codec.loads(value) if value is not None else None

    def record(self, job_id: str, *, deadline: float | None = None) -> dict | None:
        """The job's record, or ``None``: a handle's reader (:mod:`kindling.producer.handles`), as
        :meth:`kindling.producer.client.Client.record`."""
        return self.get(job_id, deadline=deadline)

    def revoke(self, job_id: str, *, task: str | None = None) -> None:
        """Record the job ``revoked`` (:func:`kindling.core.records.revoke`), so no stream worker
        writing here starts it (as :meth:`kindling.producer.client.Client.revoke` does in DynamoDB).
        Raises :class:`~kindling.core.errors.KindlingError` if it has finished already (or is dead)."""
        from kindling.core.records import revoke

        revoke(self, job_id, task=task)

    def read_results(self, job_ids, *, deadline: float | None = None
                     ) -> dict[str, tuple[str, str | None, dict | None]]:
        """``{job_id: (status, result JSON text or None, its S3 pointer or None)}`` for the
        ids that have a record, in one ``MGET`` (chains and chords only)."""
        return {i: (record["status"], record.get("result"), record.get("result_payload"))
                for i, record in self._records(job_ids, deadline).items()}

    def count_member(self, key: str, index: int, size: int, *, ok: bool, reason: str | None = None, at_ms: int = 0,
                     ttl_s: int = 0, deadline: float | None = None, message: str | None = None) -> dict:
        """Count chord member ``index`` on the chord record ``key`` (one script, so counting
        twice changes nothing); return the record as it was (``{}`` if none). Unless ``ok``
        the chord is ``dead`` and its ``error`` (the first one kept) names the member."""
        from kindling.core.records import chord_error

        error = chord_error(index, reason, message)
        args = [key, str(index), size, at_ms, int(ok), codec.dumps(error), ttl_s or self.ttl_s]
        old = self._eval(_COUNT_MEMBER, [self._key(key)], args, deadline)
        return codec.loads(old) if old is not None else {}

    def take(self, key: str, want: int, limit: int, *, ttl_s: int, deadline: float | None = None) -> int:
        """Take up to ``want`` of the ``limit`` runs counted under ``key`` (a rate-limited
        task's window: :mod:`kindling.core.ratelimit`) in one script; return how many were taken."""
        from kindling.shared.valkey.scripts import TAKE

        return int(self._eval(TAKE, [self._key(key)], [want, limit, ttl_s], deadline))

    def give_back(self, key: str, count: int, *, deadline: float | None = None) -> None:
        """Return ``count`` runs taken under ``key`` (:mod:`kindling.core.ratelimit`) in one script."""
        from kindling.shared.valkey.scripts import GIVE_BACK

        self._eval(GIVE_BACK, [self._key(key)], [count], deadline)

    def claim_chord(self, key: str, callback: str | None, *, at_ms: int = 0, claimed_at: int | None = None,
                    deadline: float | None = None) -> bool:
        """Move the chord record from ``waiting`` to ``completed``, naming its callback, before
        it is sent (one script). ``False`` if it was not ``waiting`` (claimed already, ``dead``,
        or never counted). With ``claimed_at``, take over the claim made then instead, if its
        callback was never marked sent (as :meth:`kindling.stores.dynamo.DynamoResultStore.claim_chord`)."""
        args = [at_ms, callback or "", "" if claimed_at is None else claimed_at]
        reply = self._eval(_CLAIM_CHORD, [self._key(key)], args, deadline)
        return bool(reply)

    def mark_chord_sent(self, key: str, *, at_ms: int = 0, deadline: float | None = None) -> None:
        """Note on a claimed (``completed``) chord record that its callback was sent."""
        self._eval(_MARK_CHORD_SENT, [self._key(key)], [at_ms], deadline)

    def reopen_chord(self, key: str, index: int | str) -> bool:
        """Take member ``index`` off the chord's dead members; ``True`` if the chord is
        ``waiting`` again (see :func:`kindling.tools.ops.revive.reopen_chord`)."""
        reply = self._guard(lambda: self._scripts(_REOPEN_CHORD)(keys=[self._key(key)], args=[str(index)]))
        return bool(reply)

    def _eval(self, source: str, keys: list, args: list, deadline: float | None):
        """Run a script in one round trip that gives up at ``deadline``: queued on a pipeline,
        which loads it in the same write (a restarted server costs no second trip)."""
        pipe = self.client.pipeline(transaction=False)
        self._scripts(source)(keys=keys, args=args, client=pipe)
        (reply,) = self._execute(pipe, deadline)
        return reply

    def _execute(self, pipe, deadline: float | None) -> list:
        """The pipeline's replies; past ``deadline`` (nothing sent if it has passed already),
        :class:`~kindling.core.errors.StoreUnavailable`, as every store gives up at its deadline."""
        from kindling.drivers.valkey.client import Pipeline

        if deadline is None:
            return self._guard(pipe.execute)
        if isinstance(pipe, Pipeline):
            return self._guard(lambda: pipe.execute(deadline=deadline))
        if deadline <= time.monotonic():  # a valkey-py client: it takes no deadline of its own
            from kindling.core.errors import StoreUnavailable

            raise StoreUnavailable("Valkey result store: the deadline passed before the call was sent")
        return self._guard(pipe.execute)

    def _scripts(self, source: str):
        scripts = self.__dict__.setdefault("_registered", {})
        if source not in scripts:
            scripts[source] = self.client.register_script(source)
        return scripts[source]

    def wait(self, job_id: str, timeout: float = 30.0) -> dict | None:
        """The job's final record, blocking (``BLPOP``) up to ``timeout`` seconds for it;
        ``None`` if none arrived in time (a ``failed`` record is waited through)."""
        from kindling.core.status import FINAL

        deadline = time.monotonic() + timeout
        while True:
            record = self.get(job_id)
            if record is not None and record.get("status") in FINAL:
                return record
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            done = self._done(job_id)
            block_s = max(0.01, min(left, 5.0))
            popped = self._guard(lambda key=done, t=block_s: self.client.blpop([key], timeout=t))
            if popped:  # put the token back for any other waiter on the same job
                pipe = self.client.pipeline(transaction=False)
                pipe.rpush(done, 1)
                pipe.expire(done, self.ttl_s)
                self._guard(pipe.execute)

    @staticmethod
    def _guard(fn):
        from kindling.core.errors import StoreUnavailable
        from kindling.drivers.valkey import errors

        try:
            return fn()
        except errors.valkey_errors() as exc:
            raise StoreUnavailable(f"Valkey result store: {exc}") from exc
