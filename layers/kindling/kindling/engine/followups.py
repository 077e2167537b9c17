"""Chains and chords on the worker: what a finished job enqueues next.

Imported by the runner only for a batch holding a job with a ``chain`` or a ``parent``
(envelope version 2); a batch of plain jobs never loads it.

Chain. A job that succeeds with ``chain`` enqueues ``chain[0]`` with its result prepended
as the first positional argument (Celery's rule) and ``chain[1:]`` as that job's own chain.
A job that does not succeed ends its chain: nothing after it runs.

Chord. A job with ``parent`` is member ``index`` of a group of ``size``. When it reaches a
final status it is counted on the chord's record (key ``chord#<chord id>`` in the results
table: ``#`` occurs in no job id) by one atomic ``UpdateItem`` that ADDs its index to the
string set ``done``, and to ``dead`` unless it succeeded, returning the item as it was
(``ReturnValues=ALL_OLD``). Adding to a set is idempotent, so a member counted twice (a
duplicate delivery, a retried update, a worker that died after counting) counts once. A
count that finds ``done`` holding every index reads every member's result (one
``BatchGetItem`` per 100 ids, members being ``<chord id>.<index>``), claims the chord
(``waiting`` -> ``completed``, naming the callback, in one conditional update), sends
``then`` with the list of results in index order as its first argument, and marks the
callback sent (``sent_at``). See "The callback, step by step" for why it runs once.

Failure rule: a member that ends ``dead`` (or ``rejected``, or revoked) fails the chord.
Its count marks the record ``dead`` with the member's index and reason, and the callback is
never enqueued, whatever the other members do. Celery's chord does the same (its error
callback aside). So does a member whose result is lost (below). An operator's revive of
a dead member (:func:`kindling.tools.ops.revive.reopen_chord`) takes it off ``dead``, and with
none left the chord is ``waiting`` again.

Ids are derived, never drawn: the next step of a chain is :func:`next_id` of the job that
ran, the callback is :func:`callback_id` of the chord. A worker that enqueues a chain's next
step and dies before acknowledging sends it again on redelivery (the job is then skipped as
already succeeded): the copy carries the same id, so the batch's duplicate check skips it
once the first has succeeded.

The callback, step by step. The runner records the member's outcome, then its follow-ups
make these steps; here is what a failure (an exception: the member's outcome becomes
``deferred`` and its message comes back, unless said otherwise) or a death of the worker
(nothing after that point runs; the message comes back after its visibility timeout or the
stream's reclaim) at each of them leads to. "Comes back" means the member is delivered
again, is skipped as already succeeded, and runs its follow-ups again.

1. *Record the member* (the runner's batch write). Fails or dies: nothing is counted; the
   member comes back and runs again or is skipped by its record.
2. *Count it* (``count_member``). Fails or dies before or after it took effect: adding to
   a set is idempotent, so the count on return finds ``done`` full and the chord still
   ``waiting``, and carries on from step 3.
3. *Collect the results* (``read_results``, S3 for large ones). Reads only; fails: comes
   back and reads again. A result lost for good fails the chord instead (below).
4. *Claim the chord* (``claim_chord``: ``waiting`` -> ``completed`` with ``callback`` and
   ``completed_at``, one conditional update; every store does it atomically: DynamoDB's
   ``ConditionExpression``, a Valkey script, the memory store's dict). Of every delivery
   that reaches this step, concurrent copies of the member included, one claims; the others
   send nothing. Fails before it took effect: comes back, claims. Took effect but the reply
   was lost, or dies after it: comes back and finds the claim without ``sent_at``: step 7.
5. *Send the callback* (the trigger's ``send``). Fails, or dies before it: comes back and
   finds the claim without ``sent_at`` (step 7). Dies after it (or the send raised after
   the message went out): the same, and nothing tells this from never sent.
6. *Mark it sent* (``mark_chord_sent``: ``sent_at``). Fails: logged, and NOT handed back:
   the callback is on its queue, and a redelivery would only send another copy. Dies
   before it: step 7.
7. *A claim without* ``sent_at`` (found by a member that comes back, or by a duplicate
   delivery of any member). If the callback has a record (any status), it was sent: mark
   it sent, send nothing. If not, and the claim is younger than its lease (the callback's
   time limit, from its job, its task on this worker or the worker's default, plus
   :data:`CLAIM_MARGIN_S`), its copy may be on the queue or running right now: the member
   is handed back until the lease is over (:class:`ClaimHeld`, ``retry_in`` the lease
   left), sending nothing. Past the lease, with still no record: take the claim over (the
   same conditional update, on the ``completed_at`` read: one delivery wins and the lease
   starts again), send the callback, mark it sent.
8. *Settle the member* (the trigger acknowledges it). Fails or dies: comes back, finds
   ``sent_at`` (or step 7), sends nothing.

So the callback is sent once, except after a death (or a send with an unknown outcome)
between steps 5 and 6 whose callback has no record within its lease: a callback sent but
held on its queue longer than that. That second copy carries the same job id; the runner
skips a delivery of a job whose record says ``succeeded`` (the duplicate check; a task with
``skip_succeeded=False`` opts out of it), so the copy delivered after the other has
succeeded does not run. The runner records no ``running`` state, so two copies delivered at
the same moment to two workers would both run: the callback runs effectively once, not
exactly once, in that case alone. A chord with no callback is claimed and needs no send.

A chord record ``completed`` without ``completed_at`` was marked by an older kindling after
its send, and counts as sent.

Large values. A result kept in S3 (a record's ``result_payload``: too large for DynamoDB's
item) is passed on like any other: a step that just ran has it in memory; a duplicate
delivery and a chord's collection read the record and fetch the object with kindling's S3
client (size and sha256 checked) within the batch's deadline. A follow-up over its queue's
``MaximumMessageSize`` (read once per queue) is sent as the producer sends a large job
(:func:`kindling.shared.payloads.fit`): its arguments go to the payload bucket
(``args/<job id>/<sha256>``, so a retried upload writes the same object) and the message
carries the envelope's ``payload`` pointer. The triggers' ``send`` applies it on SQS. A
Valkey stream entry has no such limit (Valkey takes bulk strings up to 512 MB), and the
Valkey producer keeps arguments inline too, so the stream worker sends follow-ups whole:
no S3 round trip, and no bucket needed beside a stream; the entry's memory is freed when
it is acknowledged (acked entries are deleted).

Lost results. An object can be gone for good when its result is needed: deleted, expired by
the bucket's lifecycle rule (a chord that waited longer than ``PayloadExpirationDays``), or
not the bytes its pointer names (a :class:`~kindling.core.errors.PayloadUnavailable` that is
``lost``, told apart in :func:`kindling.shared.payloads.fetch` alone). No redelivery brings it back,
so handing the job back would only carry it to the DLQ, the chord ``waiting`` for ever with
nothing saying why. Instead:

* a chord's collection that finds member ``i``'s result lost fails the chord by the failure
  rule: ``i`` is counted ``dead`` on the record, whose ``error`` says "member i's result is
  lost: <object and why>" (readers show it as any failed chord), the callback is never
  enqueued, one WARNING says so, and the completing job, which did succeed, is acknowledged;
  a member whose record is gone (expired after the results' TTL, or deleted: every member
  is recorded before it is counted, so a record missing at collection never comes back)
  fails the chord the same way;
* a chain step's duplicate delivery that finds its own result lost ends the chain, as a step
  that does not succeed does: the next step cannot run without it, so it is not sent, one
  WARNING names it and why, and the delivery is acknowledged. No record is written for the
  step not sent: a copy sent by an earlier delivery may still be on its queue, and a record
  would have it skipped.

Any other failure to read hands the job back as below: S3 throttled, failing, out of reach
or past the deadline may answer next time, and one that refuses the worker
(``AccessDenied``, ``NoSuchBucket``, credentials) is a setup an operator can fix, after which
the message, redriven from the DLQ if it got there, finishes the chord.

If a follow-up cannot be sent or counted (the queue, the table or S3 is down, or a large
follow-up has no bucket to go to), the job's outcome becomes ``deferred``: its message comes
back, the job is skipped as already finished, and its follow-ups are tried again. Its record
is already written, so nothing runs twice.
"""

from __future__ import annotations

from kindling.core import codec, policy
from kindling.core.envelope import MAX_CHORD_ID_LENGTH, callback_id, check_chord_id, member_id, new_job, next_id, now_ms
from kindling.core.errors import PayloadUnavailable
from kindling.core.records import CHORD_PREFIX, chord_key
from kindling.core.status import COMPLETED, DEAD, DEFERRED, REJECTED, REVOKED, SKIPPED, SUCCEEDED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    from kindling.core.batch import Outcome
    from kindling.core.envelope import Job
    from kindling.core.registry import Registry, Task
    from kindling.core.result_store import ResultStore
    from kindling.shared.payloads import PayloadIO

    class Runner(Protocol):
        """What follow-ups use of the runner that loads them (:class:`kindling.engine.runner.Runner`):
        named here, so that this module does not import the runner, even for its annotations."""

        registry: Registry
        store: ResultStore
        default_timeout: float
        ttl_s: int
        log: Callable[..., object] | None

        def task_of(self, o: Outcome) -> Task: ...

        def payload_io(self) -> PayloadIO: ...

# The ids live in kindling.core.envelope and the chord's record key in kindling.core.records; they are
# named here too, where callers found them before.
__all__ = ["CHORD_PREFIX", "MAX_CHORD_ID_LENGTH", "callback", "callback_id", "check_chord_id", "chord_key", "member_id",
           "next_id", "next_step", "run"]

CLAIM_MARGIN_S = 60
"""Seconds a chord's claim outlasts its callback's time limit: for the send, the queue and
the start of the run (see "The callback, step by step")."""


class ClaimHeld(Exception):
    """A chord's claim is within its lease: the member comes back after ``retry_in`` seconds."""

    def __init__(self, message: str, retry_in: int):
        super().__init__(message)
        self.retry_in = retry_in


# -- which outcomes have follow-ups ---------------------------------------------------------


def _ended(o: Outcome) -> str | None:
    """``succeeded`` or ``dead`` if this delivery leaves its job finished, else ``None``."""
    if o.status == SUCCEEDED or (o.status == SKIPPED and o.previous == SUCCEEDED):
        return SUCCEEDED
    if o.status in (DEAD, REJECTED) or (o.status == SKIPPED and o.previous == REVOKED):
        return DEAD
    return None


# -- the step after a batch --------------------------------------------------------------------


def run(runner: Runner, outcomes: list[Outcome], send: Callable[[list[Job]], object] | None,
        deadline: float | None) -> None:
    """Enqueue every chain step and count every chord member this batch finished.

    An outcome whose follow-ups fail becomes ``deferred`` (see the module's docstring).
    """
    for o in outcomes:
        job = o.job
        if job is None or not (job.chain or job.parent):
            continue
        ended = _ended(o)
        if ended is None:
            continue
        if send is None:
            _log(runner, "ERROR", o, "follow-ups not sent: this trigger cannot enqueue jobs")
            continue
        try:
            # The count first: it hands the job back only before anything is sent, so a
            # chain step sent is never followed by a hand-back that sends it again.
            if job.parent:
                _count(runner, o, ended, send, deadline)
            if job.chain and ended == SUCCEEDED:
                _continue(runner, o, send, deadline)
        except Exception as exc:  # noqa: BLE001 - the message comes back and tries again
            reason = f"follow-ups not sent: {type(exc).__name__}: {exc}"[:1000]
            _log(runner, "WARNING", o, reason)
            o.status = DEFERRED
            o.reason = reason
            o.retry_in = exc.retry_in if isinstance(exc, ClaimHeld) else policy.store_backoff_s(o.deliveries)


def next_step(job: Job, result: object) -> Job:
    """The chain's next job: ``chain[0]`` called with ``result`` first, carrying ``chain[1:]``."""
    step, rest = job.chain[0], job.chain[1:]
    args = step["args"] if step.get("immutable") else [result, *step.get("args", [])]  # task.si(): no result
    return new_job(step["task"], args, step.get("kwargs", {}), job_id=next_id(job.id),
                   max_attempts=step.get("max_attempts"), timeout=step.get("timeout"), chain=rest or None)


def callback(parent: dict, results: list) -> Job:
    """The chord's callback job: ``then`` called with the members' results first."""
    then = parent["then"]
    args = then["args"] if then.get("immutable") else [results, *then.get("args", [])]
    return new_job(then["task"], args, then.get("kwargs", {}),
                   job_id=callback_id(parent["id"]), max_attempts=then.get("max_attempts"),
                   timeout=then.get("timeout"))


def _continue(runner: Runner, o: Outcome, send, deadline: float | None) -> None:
    """Send the chain's next step, or end the chain if the result it takes is lost."""
    if o.status != SUCCEEDED and runner.task_of(o).redact:
        # Its result was never recorded (only a digest): the record's None is not the result.
        _log(runner, "WARNING", o, f"chain ends after {o.job_id}: a redact=True task's result is not recorded, "
                                   f"so a repeated delivery cannot send its next step {next_id(o.job_id)}")
        return
    try:
        result = _result_of(runner, o, deadline)
    except PayloadUnavailable as exc:
        if not exc.lost:
            raise
        _log(runner, "WARNING", o, f"chain ends after {o.job_id}: its result is lost, so its next step "
                                   f"{next_id(o.job_id)} is not sent: {exc}")
        return
    send([next_step(o.job, result)])  # type: ignore[arg-type]


def _result_of(runner: Runner, o: Outcome, deadline: float | None) -> object:
    """The job's result: from this run (in memory, even when its record points to S3), or
    (a duplicate delivery) from its record, read from S3 if it is kept there."""
    if o.status == SUCCEEDED:
        text = o.result
    else:
        found = runner.store.read_results([o.job_id], deadline=deadline).get(o.job_id)
        if found is None or found[0] != SUCCEEDED:
            raise LookupError(f"job {o.job_id} has no succeeded record to read its result from")
        text = _text(runner, found, deadline)
    return None if text is None else codec.loads(text)


def _text(runner: Runner, found: tuple[str, str | None, dict | None], deadline: float | None) -> str | None:
    """A succeeded record's result as JSON text: inline, or fetched through its pointer with
    kindling's S3 client (size and sha256 checked). Raises PayloadUnavailable: ``lost`` for
    an object gone for good, else the job is handed back."""
    _, text, ref = found
    if ref is None:
        return text
    return runner.payload_io().read_text(ref, deadline=deadline)


def _count(runner: Runner, o: Outcome, ended: str, send, deadline: float | None) -> None:
    """Count the member; if that completes the chord, claim it and send its callback (the
    module's docstring: "The callback, step by step")."""
    parent = o.job.parent  # type: ignore[union-attr]
    chord, index, size = parent["id"], parent["index"], parent["size"]
    key = chord_key(chord)
    ok = ended == SUCCEEDED
    old = runner.store.count_member(key, index, size, ok=ok, reason=None if ok else (o.reason or ended),
                                    at_ms=now_ms(), ttl_s=runner.ttl_s, deadline=deadline)
    done = set(old.get("done") or ()) | {str(index)}
    dead = set(old.get("dead") or ()) | (set() if ok else {str(index)})
    if dead:
        if not ok and str(index) not in (old.get("dead") or ()):
            _log(runner, "WARNING", o, f"chord {chord} failed: member {index} ended {o.status}; its callback "
                                       "will not run")
        return
    if len(done) < size:
        return
    then = parent.get("then")
    cb = callback_id(chord) if then is not None else None
    if old.get("status") == COMPLETED:
        # A record without ``completed_at`` was marked by an older kindling, after its send.
        if cb is not None and old.get("sent_at") is None and old.get("completed_at") is not None:
            _recover(runner, o, parent, old, send, deadline)
        return
    results = _collect(runner, o, parent, deadline) if then is not None else []
    if results is None:
        return
    if not runner.store.claim_chord(key, cb, at_ms=now_ms(), deadline=deadline):
        return  # a copy of this member claimed it first (and sends it), or a member failed it meanwhile
    if runner.log:  # one line per claim: a second one would show here
        runner.log({"level": "INFO", "message": "chord completed",
                    "kindling": "chord_completed", "chord": chord, "members": size, "callback": cb})
    if then is not None:
        send([callback(parent, results)])
        _mark_sent(runner, o, key, deadline)


def _recover(runner: Runner, o: Outcome, parent: dict, old: dict, send, deadline: float | None) -> None:
    """The chord was claimed but its callback never marked sent: its claimer failed or died
    after the claim, or is between its claim and its mark right now. Send the callback
    only if it has no record and the claim's lease is over, taking the claim over first."""
    chord = parent["id"]
    key, cb = chord_key(chord), callback_id(chord)
    if runner.store.read_states([cb], deadline=deadline):  # a callback with a record was sent
        _mark_sent(runner, o, key, deadline)
        return
    claimed_at = int(old.get("completed_at") or 0)
    held_ms = claimed_at + _lease_ms(runner, parent) - now_ms()
    if held_ms > 0:
        raise ClaimHeld(f"chord {chord}: its callback {cb} was claimed {max(0, now_ms() - claimed_at) // 1000}s ago "
                        "and not marked sent; a copy may still be on its way or running", -(-held_ms // 1000))
    results = _collect(runner, o, parent, deadline)
    if results is None or not runner.store.claim_chord(key, cb, at_ms=now_ms(), claimed_at=claimed_at,
                                                       deadline=deadline):
        return  # failed since, or another delivery took the claim over (and sends it)
    _log(runner, "WARNING", o, f"chord {chord}: its callback {cb} was claimed but never marked sent and has no "
                               "record after its lease: sent again (a copy sent before carries the same id, and "
                               "is skipped by the record of whichever runs first)")
    send([callback(parent, results)])
    _mark_sent(runner, o, key, deadline)


def _lease_ms(runner: Runner, parent: dict) -> int:
    """How long a claim is left to its claimer: the callback's time limit (its job's, its
    task's if this worker has it, else the worker's default) and :data:`CLAIM_MARGIN_S`."""
    job = callback(parent, [])
    task = runner.registry.get(job.task) if job.task in runner.registry else None
    return int((policy.timeout_for(job, task, runner.default_timeout) + CLAIM_MARGIN_S) * 1000)


def _collect(runner: Runner, o: Outcome, parent: dict, deadline: float | None) -> list | None:
    """Every member's result in index order, or ``None`` once the chord is failed because
    one is lost for good. Raises (the member is handed back) for anything that may pass."""
    chord, size = parent["id"], parent["size"]
    ids = [member_id(chord, i) for i in range(size)]
    found = runner.store.read_results(ids, deadline=deadline)
    gone = [i for i, job_id in enumerate(ids) if job_id not in found]
    if gone:
        # Every counted member was recorded before it was counted (a consistent read):
        # a record missing now expired (the results' TTL) or was deleted, and stays so.
        _lost(runner, o, parent, gone[0], f"member {gone[0]} has no record any more (expired after the "
                                          "results' TTL, or deleted), so its result cannot be passed on", deadline)
        return None
    missing = [i for i in ids if found[i][0] != SUCCEEDED]
    if missing:
        raise LookupError(f"chord {chord}: {len(missing)} counted member(s) have no succeeded record "
                          f"({', '.join(missing[:3])})")
    results = []
    for i, job_id in enumerate(ids):
        try:
            text = _text(runner, found[job_id], deadline)
        except PayloadUnavailable as exc:
            if not exc.lost:
                raise
            _lost(runner, o, parent, i, f"member {i}'s result is lost: {exc}", deadline)
            return None
        results.append(None if text is None else codec.loads(text))
    return results


def _mark_sent(runner: Runner, o: Outcome, key: str, deadline: float | None) -> None:
    """Mark the claimed chord's callback sent. Its failure is logged, never handed back:
    the callback is on its queue, and a redelivery would only send another copy."""
    try:
        runner.store.mark_chord_sent(key, at_ms=now_ms(), deadline=deadline)
    except Exception as exc:  # noqa: BLE001 - the send is done; only its mark is missing
        _log(runner, "WARNING", o, f"chord {key[len(CHORD_PREFIX):]}: its callback was sent but not marked so "
                                   f"({type(exc).__name__}: {exc}); a later delivery of a member reads the "
                                   "callback's record before sending it again")


def _lost(runner: Runner, o: Outcome, parent: dict, index: int, message: str, deadline: float | None) -> None:
    """Fail the chord as a dead member would: member ``index`` succeeded, but its result is lost."""
    chord = parent["id"]
    old = runner.store.count_member(chord_key(chord), index, parent["size"], ok=False, message=message,
                                    at_ms=now_ms(), ttl_s=runner.ttl_s, deadline=deadline)
    if str(index) not in (old.get("dead") or ()):  # a duplicate delivery finds it dead already
        _log(runner, "WARNING", o, f"chord {chord} failed: {message}; its callback will not run")


def _log(runner: Runner, level: str, o: Outcome, message: str) -> None:
    if runner.log:
        runner.log({"level": level, "message": message,
                    "kindling": "followups", "job_id": o.job_id, "task": o.task})

