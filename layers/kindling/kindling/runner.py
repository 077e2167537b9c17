"""The batch runner: deliveries in, one outcome per delivery out.

The runner is the same for every trigger (SQS through Lambda, the local SQS loop, the
Valkey stream consumer). A trigger turns its messages into :class:`Delivery` objects,
calls :meth:`Runner.run`, and maps the outcomes back to its own acknowledgement:

* ``succeeded``, ``rejected``, ``skipped`` (a duplicate of a job already finished) are
  settled: acknowledge / delete the message.
* ``failed`` (will be retried, after ``Outcome.retry_in`` seconds when set) and
  ``deferred`` (not started: the invocation's time ran short, ``not_before`` is ahead, the
  result store is down, the envelope needs a newer worker) go back to the queue for
  redelivery. A deferred job has not used an attempt.
* ``dead`` (failed on its last attempt, or delivered past its allowance without an outcome:
  :func:`kindling.policy.out_of_deliveries`, judged only after the message is decoded and its
  signature checked) is the trigger's to move to its dead letters (SQS DLQ, Valkey dead stream).

Attempts are counted in the result record, not from the queue's delivery count: a run
that ends ``failed`` records its attempt number, and the next run is that plus one. So a
hand-back (deferral, store outage, cut-off) never uses an attempt; the queue's delivery
count only bounds runs that crash the worker before anything is recorded.

Nothing one job does can fail its batch: a message that cannot be decoded is that
message's rejection, and anything a task raises (``SystemExit``, ``KeyboardInterrupt``,
``CancelledError`` included) or returns (a value that cannot be encoded) is that job's
failure. Only a store that cannot be reached hands the whole batch back.

Per batch the runner makes at most two round trips to the result store when every job
succeeds: one read of the batch's job ids (to skip duplicates and count attempts) and one
write of every outcome. Failures, rejections and dead jobs are written with conditions
(records only move forward; see :mod:`kindling.status`), by the store, on that rare path.

The runner keeps the batch's phases (admission, the duplicate check, recording) and runs
plain synchronous jobs itself; a thread pool, async tasks and FIFO group order are
strategies of :mod:`kindling.execution`, each imported by the first batch that needs it.
"""

from __future__ import annotations

import os
import sys
import time
from _thread import allocate_lock

from kindling import policy
from kindling.batch import (
    STORE_UNAVAILABLE,
    Alarm,
    Batch,
    Delivery,
    JobContext,
    Outcome,
    current_job,
    reset_current_job,
    set_current_job,
)
from kindling.envelope import Job, decode_job, now_ms
from kindling.errors import InvalidJob, NewerEnvelope, PayloadUnavailable, ResultTooLarge, StoreUnavailable
from kindling.records import MAX_RESULT_BYTES, build_record, describe_error, encode_result, rejected_key, renumbered
from kindling.status import (
    DEAD,
    DEFERRED,
    DUPLICATE,
    FAILED,
    FINAL,
    HANDED_BACK,
    NEWER_GENERATION,
    REJECTED,
    REVOKED,
    SETTLED,
    SKIPPED,
    SUCCEEDED,
    Status,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Sequence

    from kindling.registry import Registry, Task
    from kindling.results import ResultStore

__all__ = ["Batch", "Delivery", "JobContext", "Outcome", "Runner", "current_job", "Status", "SUCCEEDED", "FAILED",
           "DEAD", "REJECTED", "SKIPPED", "DEFERRED", "DUPLICATE", "SETTLED", "HANDED_BACK", "MAX_RESULT_BYTES",
           "STORE_UNAVAILABLE"]

DAY_S = 86_400


def _log(entry: dict) -> None:
    """The default log: Powertools-layout JSON lines on stdout (:mod:`kindling.logs`, loaded
    with the first line, not at import)."""
    from kindling import logs

    logs.sink()(entry)


class Runner:
    """Runs batches of deliveries against a registry and records outcomes in a store.

    Args:
        registry: where task names are looked up.
        store: the result store (:class:`kindling.results.DynamoResultStore` in Lambda).
        max_attempts: attempts before a failing job is ``dead``, when neither the job
            nor its task says otherwise.
        attempts_cap: an upper bound on any job's attempts, whatever it asks for.
        max_deliveries: the delivery on which a job that still has no final record is
            recorded ``dead`` instead of being run (SQS: the redrive policy's
            maxReceiveCount, after which the queue moves the message anyway). Runs that
            crash the worker before recording anything are bounded only by this, or, for
            deliveries whose count counts runs only (``Delivery.counts_runs``: a Valkey
            stream), by the job's own attempts (:func:`kindling.policy.out_of_deliveries`).
            Either is judged after the message is decoded and its signature checked.
        retry_delay: seconds before a failed job's first retry, doubling per attempt
            (``Outcome.retry_in``), for tasks without retry options of their own; 0 leaves
            it to the queue. Default: the deployment's, the same for every trigger
            (:func:`kindling.policy.configured_retry_delay`: ``KINDLING_RETRY_DELAY``, else
            :data:`kindling.policy.DEFAULT_RETRY_DELAY_S`).
        default_timeout: seconds a job may run when neither job nor task sets a timeout.
        concurrency: async jobs of one batch that run at the same time.
        threads: synchronous jobs of one batch that run at the same time, in a thread pool
            (long-lived workers). ``0`` (the default, and what Lambda uses) runs them one by
            one on the calling thread, where SIGALRM enforces their timeouts; in threads a
            job past its timeout is recorded as timed out, but its thread runs on.
        safety_ms: time kept back from the invocation's remaining time for writing results.
        cutoff_ms: no job is started once less than this is left (after ``safety_ms``).
        worker: recorded with each outcome (function name, version, ...).
        ttl_days: results expire this many days after they are written (DynamoDB TTL).
        log: where one JSON line per batch and per failed job goes (default: stdout, which
            Lambda sends to CloudWatch, in Powertools' key layout: :mod:`kindling.logs`);
            ``None`` for silence.
        metrics: write CloudWatch EMF metrics per batch (:mod:`kindling.metrics`) to stdout.
            Default: on in Lambda, or where ``KINDLING_METRICS=1``; ``KINDLING_METRICS=0``
            turns them off.
        payload_bucket: where a result too large for its record is kept, behind a pointer
            (default ``KINDLING_PAYLOAD_BUCKET``; empty: such a result fails the job as
            ``ResultTooLarge``). Jobs whose arguments are in S3 are read from the bucket
            their pointer names, whatever this says.
        s3: the :class:`kindling.aws.s3.S3Client` for payloads (default: the process's,
            made at the first payload).
        verifier: signed jobs (:class:`kindling.signed.Verifier`): a delivery that is not
            validly signed is recorded ``rejected`` and never run; a batch for which the
            keys cannot be read is handed back. ``None`` (the default): no check at all.
        otel: open an OpenTelemetry span per job run (:mod:`kindling.otel`). Default: only
            where ``KINDLING_OTEL=1``; without opentelemetry installed it is logged once and
            left off. Off, opentelemetry is never imported.
    """

    def __init__(
        self,
        registry: Registry,
        store: ResultStore,
        *,
        max_attempts: int = 3,
        attempts_cap: int | None = None,
        max_deliveries: int | None = None,
        retry_delay: float | None = None,
        default_timeout: float = 300.0,
        concurrency: int = 16,
        threads: int = 0,
        safety_ms: int = 1000,
        cutoff_ms: int = 500,
        worker: dict | None = None,
        ttl_days: float = 14.0,
        log=_log,
        metrics: bool | None = None,
        payload_bucket: str | None = None,
        s3=None,
        verifier=None,
        otel: bool | None = None,
    ):
        self.registry = registry
        self.store = store
        self.max_attempts = max_attempts
        self.attempts_cap = attempts_cap
        self.max_deliveries = max_deliveries
        self.retry_delay = policy.configured_retry_delay() if retry_delay is None else retry_delay
        self.default_timeout = default_timeout
        self.concurrency = max(1, concurrency)
        self.threads = threads
        self._pool = None  # the thread pool (kindling.execution.threaded), made at its first batch
        self.safety_ms = safety_ms
        self.cutoff_ms = cutoff_ms
        self.worker = worker or {}
        self.ttl_s = int(ttl_days * DAY_S)
        self.log = log
        self._loop = None  # the event loop for async tasks (kindling.execution.asyncrun), likewise
        self._finishing = allocate_lock()
        self._batch_worker = self.worker  # the executing batch's
        self._admitting_worker = self.worker  # the batch being admitted's (Runner.begin)
        if metrics is None:
            flag = os.environ.get("KINDLING_METRICS")
            metrics = flag == "1" if flag in ("0", "1") else "AWS_LAMBDA_FUNCTION_NAME" in os.environ
        self.metrics = metrics
        self.verifier = verifier
        self.otel = os.environ.get("KINDLING_OTEL") == "1" if otel is None else otel
        self._spans: list = []  # the executing batch's spans (Batch.spans), while otel is on
        self.batches = 0
        if payload_bucket is None:
            payload_bucket = os.environ.get("KINDLING_PAYLOAD_BUCKET", "")
        self.payload_bucket = payload_bucket
        self._s3 = s3
        self._deadline: float | None = None  # the running batch's

    # -- the batch, top to bottom ----------------------------------------------------

    def run(
        self,
        deliveries: Sequence[Delivery],
        remaining_ms: Callable[[], int] | None = None,
        request_id: str | None = None,
        send: Callable[[list[Job]], object] | None = None,
    ) -> list[Outcome]:
        """Run one batch; return an outcome for every delivery, in the same order.

        ``send`` enqueues jobs on the trigger the batch came from: the next step of a chain
        and a chord's callback go through it (:mod:`kindling.followups`), once the batch's
        outcomes are recorded.

        Never raises because of one message or one task; raises only for a bug in
        kindling itself outside any job. The three phases back to back: :meth:`begin`,
        :meth:`execute`, :meth:`finish`.
        """
        return self.finish(self.execute(self.begin(deliveries, remaining_ms, request_id)), send=send)

    def begin(
        self,
        deliveries: Sequence[Delivery],
        remaining_ms: Callable[[], int] | None = None,
        request_id: str | None = None,
        *,
        in_flight: Collection[str] = (),
    ) -> Batch:
        """Admit a batch: decode it and send its duplicate check (the store's one read).

        ``in_flight``: the job ids of an earlier batch whose write has been sent but not
        read back (:meth:`Batch.writing`). A read sent now might not see that write, so
        those ids are read when this batch is executed, which must come after that earlier
        batch's :meth:`finish`: a job just run is then skipped, not run twice.
        """
        worker = dict(self.worker, request_id=request_id) if request_id else self.worker
        # Not the running batch's worker and deadline: a long-lived worker admits its next
        # batch while this one's jobs still run in threads (Runner.execute's ``meanwhile``).
        self._admitting_worker = worker
        deadline = None if remaining_ms is None else time.monotonic() + remaining_ms() / 1000
        # Past this there is no time left to run anything the read would allow.
        read_by = None if deadline is None else deadline - self.safety_ms / 1000
        if self.verifier is not None:
            trouble = self.verifier.prepare(read_by)
            if trouble is not None:  # no job is judged without the keys: the batch comes back
                outcomes = [Outcome(d.ref, None, None, None, d.attempts) for d in deliveries]
                batch = Batch(deliveries, outcomes, [], dict, deadline, read_by, worker)
                batch.handed_back = self._hand_back_all(outcomes, trouble, "signing_keys_unavailable")
                return batch
        outcomes = [self._decode(d) for d in deliveries]
        runnable = self._drop_duplicates(outcomes)
        # The duplicate check goes out as soon as the ids are known; the rest of admission
        # (task lookup, argument binding, due time) happens while it is in flight.
        collect = self._begin_read(runnable, read_by, in_flight)
        for o, d in zip(outcomes, deliveries, strict=True):
            if o.status is None:
                self._check(o, d)
        return Batch(deliveries, outcomes, runnable, collect, deadline, read_by, worker)

    def execute(self, batch: Batch, meanwhile: Callable[[], object] | None = None) -> Batch:
        """Read the duplicate check's reply, run the jobs, and send the write (not read back:
        :meth:`finish` does that). A check that fails hands the batch back unrun.

        ``meanwhile`` is called once on this thread while the batch's jobs run in threads
        (``threads`` > 1), and not at all by the other strategies: a long-lived worker reads
        and admits its next batch then (:meth:`begin` with this batch's
        :meth:`Batch.job_ids` in flight). It must not raise."""
        if batch.handed_back is not None:  # handed back at admission (no signing keys)
            return batch
        if not self.otel:
            return self._execute(batch, meanwhile)
        # The jobs' spans stay open until finish() knows their outcomes as recorded.
        self._spans = batch.spans = []
        try:
            return self._execute(batch, meanwhile)
        except BaseException:
            spans, batch.spans = batch.spans, []
            self._end_spans(spans)
            raise

    def _execute(self, batch: Batch, meanwhile: Callable[[], object] | None = None) -> Batch:
        # The batch's own, not the one begun since (a long-lived worker begins the next early).
        self._batch_worker, self._deadline = batch.worker, batch.deadline
        outcomes, deliveries, deadline, read_by = batch.outcomes, batch.deliveries, batch.deadline, batch.read_by
        runnable = batch.runnable
        try:
            self._apply_previous(runnable, batch.collect())
        except StoreUnavailable as exc:
            batch.handed_back = self._hand_back_all(outcomes, f"{STORE_UNAVAILABLE}: {exc}")
            return batch

        runnable = [o for o in runnable if o.status is None]
        sync_jobs = [o for o in runnable if not self._task(o).is_async]
        async_jobs = [o for o in runnable if self._task(o).is_async]
        fifo = any(d.group is not None for d in deliveries)
        try:
            # Each strategy but the plain one (kindling.execution) is imported by the first
            # batch that needs it: a Lambda worker's batches of sync jobs never load them.
            if fifo:
                from kindling.execution.fifo import run_in_group_order

                run_in_group_order(self, outcomes, deliveries, deadline)
            elif self.threads > 1 and len(sync_jobs) > 1:
                from kindling.execution.threaded import run_threaded

                run_threaded(self, sync_jobs, deadline, meanwhile)
            else:
                for o in sync_jobs:
                    self._run_sync(o, deadline)
            if async_jobs and not fifo:
                from kindling.execution.asyncrun import run_async

                run_async(self, async_jobs, deadline)
        except BaseException as exc:  # noqa: BLE001 - kindling's own machinery was interrupted
            self._settle_unfinished(runnable, exc)
        if any(o.status is None for o in runnable):  # a run that ended without an outcome
            self._settle_unfinished(runnable, RuntimeError("the job's run ended without an outcome"))
        try:
            self._number_unread_failures(runnable, read_by)
        except StoreUnavailable as exc:
            batch.handed_back = self._hand_back_all(outcomes, f"{STORE_UNAVAILABLE}: {exc}")
            return batch

        self._settle_duplicates(outcomes)
        for o in outcomes:  # the store writes each record only over the generation it was read as
            if o.record is not None and o.generation > 1:
                o.record["generation"] = o.generation
        records = [o.record for o in outcomes if o.record is not None]
        if records:
            # The write has the time kept back for it, less a margin for the reply to Lambda.
            write_by = None if deadline is None else deadline - self.safety_ms / 4000
            batch.collect_write = self._begin_write(records, write_by)
        return batch

    def finish(self, batch: Batch, send: Callable[[list[Job]], object] | None = None) -> list[Outcome]:
        """Read the write's reply back; return the batch's outcomes. A write that fails hands
        the batch back; a record the store refused (it holds a later outcome) is ``skipped``.
        Then, once every record is written, a chain's next step and a chord's count
        (:mod:`kindling.followups`, enqueueing through ``send``)."""
        if not batch.spans:
            return self._finish_batch(batch, send)
        try:
            return self._finish_batch(batch, send)
        finally:
            spans, batch.spans = batch.spans, []
            self._end_spans(spans)

    def _finish_batch(self, batch: Batch, send: Callable[[list[Job]], object] | None) -> list[Outcome]:
        if batch.handed_back is not None:
            return batch.handed_back
        outcomes = batch.outcomes
        if batch.collect_write is not None:
            try:
                refused = batch.collect_write() or {}
            except StoreUnavailable as exc:
                return self._hand_back_all(outcomes, f"{STORE_UNAVAILABLE}: {exc}")
            for o in outcomes:
                if o.record is not None and o.record["id"] in refused:
                    if refused[o.record["id"]] == NEWER_GENERATION:
                        self._drop_stale(o)
                    else:
                        o.reason = f"not recorded: the store already holds a later outcome ({refused[o.record['id']]})"
                    o.status = SKIPPED
                    o.retry_in = None
        if any(o.job is not None and (o.job.chain or o.job.parent) for o in outcomes):
            from kindling import followups  # only batches with chains or chords load it

            deadline = batch.deadline
            followups.run(self, outcomes, send, None if deadline is None else deadline - self.safety_ms / 4000)
        if self.log:
            _log_batch(outcomes, self.log)
        if self.metrics:
            self._emit_metrics(outcomes)
        self.batches += 1
        return outcomes

    def _emit_metrics(self, outcomes: list[Outcome]) -> None:
        from kindling import metrics  # at the end of the first batch, not at import

        docs = metrics.documents(outcomes, self.registry, cold_start=self.batches == 0, at_ms=now_ms())
        sys.stdout.write(metrics.lines(docs))

    # -- steps -------------------------------------------------------------------------

    def _decode(self, d: Delivery) -> Outcome:
        """Decode and validate the envelope; a bad message becomes ``rejected`` right here."""
        if self.verifier is not None:
            unsigned = self.verifier.check(d)
            if unsigned is not None:
                return self._unsigned(d, unsigned)
        try:
            job = decode_job(d.body)
        except NewerEnvelope as exc:
            o = Outcome(d.ref, exc.job_id, exc.task, DEFERRED, 0, d.attempts)
            if self.max_deliveries and d.attempts >= self.max_deliveries:
                # Its last delivery: no newer worker took it in time. Recorded, not lost.
                return self._rejected(o, d, f"{exc.reason}; no worker that reads it took it in {d.attempts} "
                                            "deliveries", claimed_id=exc.job_id, task=exc.task)
            o.reason = exc.reason
            o.retry_in = policy.store_backoff_s(d.attempts)
            return o
        except InvalidJob as exc:
            return self._rejected(Outcome(d.ref, None, None, None, d.attempts), d, exc.reason,
                                  claimed_id=exc.job_id, task=exc.task)
        except Exception as exc:  # noqa: BLE001 - whatever the body does to the decoder
            return self._rejected(Outcome(d.ref, None, None, None, d.attempts), d,
                                  f"message body cannot be decoded: {type(exc).__name__}: {exc}"[:1000])
        o = Outcome(d.ref, job.id, job.task, None, 1, d.attempts)
        o.job = job
        if d.trace:
            from kindling.logs import trace_root

            o.trace_id = trace_root(d.trace)
            o.trace = d.trace
        return o

    def _check(self, o: Outcome, d: Delivery) -> None:
        """The rest of admission: a task this worker runs, arguments that bind, a job that is due."""
        job = o.job
        try:
            task = self.registry.get(job.task)  # type: ignore[union-attr]
            if job.payload is None:  # type: ignore[union-attr]  (arguments in S3: checked once read)
                task.check_arguments(job.args, job.kwargs)  # type: ignore[union-attr]
        except Exception as exc:  # noqa: BLE001 - a valid envelope this worker cannot run
            reason = exc.reason if isinstance(exc, InvalidJob) else f"{type(exc).__name__}: {exc}"
            self._rejected(o, d, reason, claimed_id=job.id, task=job.task, job=job)  # type: ignore[union-attr]
            return
        # The crash-loop rule: judged here, on a decoded and verified job, for every trigger.
        o.exhausted = policy.out_of_deliveries(o.deliveries, self._attempts_allowed(o), self.max_deliveries,
                                               d.counts_runs)
        if job.not_before is not None and job.not_before > now_ms():  # type: ignore[union-attr]
            o.status = DEFERRED
            o.reason = "not_before is in the future"
            o.retry_in = min(-(-(job.not_before - now_ms()) // 1000), policy.MAX_DELAY_S)  # type: ignore[union-attr]

    def _rejected(self, o: Outcome, d: Delivery, reason: str, *, claimed_id: str | None = None,
                  task: str | None = None, job: Job | None = None) -> Outcome:
        """A message that is not a job this worker can run: recorded, never run.

        A well-formed envelope (unknown task, arguments that do not bind) is recorded
        under its job id, so its sender sees the rejection; anything else under a key of
        its own message (:func:`kindling.records.rejected_key`).
        """
        key = job.id if job is not None else rejected_key(d.ref)
        known = self.registry._tasks.get(task) if task else None  # type: ignore[arg-type]
        redact = known is not None and known.redact  # its arguments may be in the reason and the body
        o.job_id, o.task, o.status, o.attempts = key, task, REJECTED, d.attempts
        o.reason = "InvalidJob: [redacted]" if redact else reason
        at = now_ms()
        o.record = build_record(key=key, task=task, status=REJECTED, attempts=d.attempts, started_at=at,
                                finished_at=at, job=job, error={"type": "InvalidJob", "message": reason},
                                raw=d.body, job_id=claimed_id, worker=self._admitting_worker, ttl_s=self.ttl_s,
                                redact=redact)
        return o

    def _unsigned(self, d: Delivery, reason: str) -> Outcome:
        """A message without a valid signature: recorded under a key of its own message
        (never the job id it claims, which it could take from a real job), never run.
        The claimed id and task are read only to tell the sender what arrived."""
        claimed_id = task = None
        try:
            job = decode_job(d.body)
            claimed_id, task = job.id, job.task
        except InvalidJob as exc:
            claimed_id, task = exc.job_id, exc.task
        except Exception:  # noqa: BLE001, S110 - the body is only for the record
            pass
        return self._rejected(Outcome(d.ref, None, None, None, d.attempts), d, f"signature: {reason}",
                              claimed_id=claimed_id, task=task)

    def _drop_duplicates(self, outcomes: list[Outcome]) -> list[Outcome]:
        """The same job id twice in one batch runs once; the copies follow the first."""
        seen: set[str] = set()
        runnable = []
        for o in outcomes:
            if o.status is not None:
                continue
            if o.job_id in seen:
                o.status = DUPLICATE
                continue
            seen.add(o.job_id)  # type: ignore[arg-type]
            runnable.append(o)
        return runnable

    def _begin_read(self, runnable: list[Outcome], deadline: float | None,
                    later: Collection[str] = ()) -> Callable[[], dict]:
        """Send the batch's one read now; the returned callable collects its reply.

        Jobs of tasks that opted out of duplicate skipping (``skip_succeeded=False``) are
        not read: a batch of only those makes no read at all. Ids in ``later`` are read
        when the reply is collected, not now (see :meth:`begin`).
        """
        ids = []
        for o in runnable:
            task = self.registry._tasks.get(o.task)  # type: ignore[arg-type]
            if task is None or task.skip_succeeded:  # unknown tasks are rejected by _check anyway
                ids.append(o.job_id)
        if not ids:
            return dict
        if later:
            late = [i for i in ids if i in later]
            if late:
                now = [i for i in ids if i not in later]
                first = self._send_read(now, deadline) if now else dict

                def collect() -> dict:
                    states = first()
                    states.update(self._send_read(late, deadline)())
                    return states

                return collect
        return self._send_read(ids, deadline)

    def _send_read(self, ids: list[str], deadline: float | None) -> Callable[[], dict]:
        return self._send_now("begin_read", self.store.read_states, ids, deadline)

    def _begin_write(self, records: list[dict], deadline: float | None) -> Callable[[], dict]:
        """Send the batch's write now; the returned callable reads it back (``{id: status}``
        of the records refused)."""
        return self._send_now("begin_write", self.store.write, records, deadline)

    def _send_now(self, begin_name: str, call: Callable, items: list, deadline: float | None) -> Callable[[], dict]:
        """The store's ``begin_*`` (send now, read later); a store without it is called now, and
        its answer kept (a long-lived worker collects the write only after its next read of
        the stream: called then, a result would wait that long to be seen). A send that fails
        already fails again when collected, where the batch handles it."""
        begin = getattr(self.store, begin_name, None)
        try:
            if begin is not None:
                return begin(items, deadline=deadline)
            answer = call(items, deadline=deadline)
        except StoreUnavailable as exc:
            def fail(exc=exc):
                raise exc
            return fail
        return lambda: answer

    def _apply_previous(self, runnable: list[Outcome], states: dict) -> None:
        """Skip finished jobs, number this attempt, stop a job on its last delivery."""
        for o in runnable:
            if o.status is not None:
                continue
            task = self._task(o)
            last_delivery = o.exhausted
            if not task.skip_succeeded:
                # Unread: numbered after the run if it fails (see _number_unread_failures).
                # Opting out of duplicate skipping means running again is fine, even after
                # ``dead``: a success replaces the dead record, a failure is refused by it.
                o.unread = True
                o.attempts = o.deliveries
                if last_delivery:
                    self._dead_undelivered(o)
                continue
            previous, attempts = self._read_state(o, states)
            o.previous = previous
            if previous == SUCCEEDED:
                o.status = SKIPPED
                o.reason = "already succeeded (duplicate delivery)"
            elif previous == DEAD:
                o.status = DEAD
                o.reason = "already dead; not run again"
            elif previous == REVOKED:
                o.status = SKIPPED
                o.reason = "revoked; not run"
            elif last_delivery and previous not in FINAL:
                self._dead_undelivered(o)
            else:
                o.attempts = attempts + 1 if previous == FAILED else 1

    def _number_unread_failures(self, runnable: list[Outcome], deadline: float | None) -> None:
        """Failed jobs that were not read before running learn their attempt number now.

        The rare path pays the read the all-succeeded opted-out batch skipped.
        """
        unread = [o for o in runnable if o.unread and o.status in (FAILED, DEAD) and o.record is not None]
        if not unread:
            return
        states = self.store.read_states([o.job_id for o in unread], deadline=deadline)  # type: ignore[misc]
        for o in unread:
            previous, attempts = self._read_state(o, states)
            if o.status == DEAD:  # on its last delivery: only its generation was wanted
                continue
            o.attempts = attempts + 1 if previous == FAILED else 1
            status = self._after_failure(o)
            o.record = renumbered(o.record, status, o.attempts)  # type: ignore[arg-type]
            o.status = status

    @staticmethod
    def _read_state(o: Outcome, states: dict) -> tuple[str | None, int]:
        """The status and attempts read for ``o``'s job; notes the generation read on ``o``."""
        state = states.get(o.job_id, (None, 0))  # type: ignore[arg-type]
        o.generation = state[2] if len(state) > 2 else 1  # a store gives it for revived jobs only
        return state[0], state[1]

    def _drop_stale(self, o: Outcome) -> None:
        """An outcome the store refused as of an older generation: the job was revived while
        this delivery ran, and the revive's own message runs it. Dropped (acknowledged, not
        retried, not recorded anywhere), said in one log line."""
        o.reason = (f"not recorded: the job was revived while this delivery of generation {o.generation} ran; "
                    f"its outcome ({o.status}) is dropped")
        if self.log:
            self.log({"level": "WARNING", "location": "kindling.runner:run", "message": "stale outcome dropped",
                      "kindling": "stale_generation", "job_id": o.job_id, "task": o.task, "generation": o.generation,
                      "outcome": o.status, "attempt": o.attempts, "ref": o.ref, "xray_trace_id": o.trace_id})

    def _dead_undelivered(self, o: Outcome) -> None:
        o.reason = (f"delivered {o.deliveries} times without a recorded outcome (its runs crashed or timed out "
                    "the worker, or it was handed back every time); not run again")
        at = now_ms()
        o.record = build_record(key=o.job_id, task=o.task, status=DEAD, attempts=o.attempts,  # type: ignore[arg-type]
                                started_at=at, finished_at=at, job=o.job,
                                error={"type": "TooManyDeliveries", "message": o.reason},
                                worker=self._batch_worker, ttl_s=self.ttl_s)
        o.status = DEAD

    def _after_failure(self, o: Outcome) -> str:
        """``dead`` or ``failed`` for a run that failed with ``o.error``, and when to retry."""
        task = self._task(o)
        if o.attempts >= self._attempts_allowed(o) or not policy.should_retry(task, o.error):  # type: ignore[arg-type]
            o.retry_in = None
            return DEAD
        o.retry_in = policy.retry_in_s(task, o.error, o.attempts, self.retry_delay)  # type: ignore[arg-type]
        return FAILED

    def _attempts_allowed(self, o: Outcome) -> int:
        return policy.attempts_allowed(o.job, self._task(o), self.max_attempts, self.attempts_cap)  # type: ignore[arg-type]

    def _timeout(self, o: Outcome, deadline: float | None) -> tuple[float, bool] | None:
        """Seconds this job may run, and whether the invocation (not the job) bounds it.

        ``None`` means there is not enough time left to start it.
        """
        own = policy.timeout_for(o.job, self._task(o), self.default_timeout)  # type: ignore[arg-type]
        if deadline is None:
            return own, False
        left = deadline - time.monotonic() - self.safety_ms / 1000
        if left < self.cutoff_ms / 1000:
            return None
        return (left, True) if left < own else (own, False)

    def _defer(self, o: Outcome) -> None:
        o.status = DEFERRED
        o.reason = "not started: the invocation's remaining time ran short"
        o.retry_in = 0

    def _start(self, o: Outcome, deadline: float | None) -> tuple[float, bool] | None:
        """Claim the job for running: its time limit starts now."""
        limit = self._timeout(o, deadline)
        if limit is None:
            return None
        o.started_ms = now_ms()
        o.t0 = time.perf_counter()
        o.limit = limit
        o.limit_at = time.monotonic() + limit[0]
        return limit

    def _context(self, o: Outcome, seconds: float) -> JobContext:
        job = o.job
        return JobContext(job.id, job.task, o.attempts, self._attempts_allowed(o),  # type: ignore[union-attr]
                          time.monotonic() + seconds)

    def _run_sync(self, o: Outcome, deadline: float | None) -> None:
        """Run one synchronous job on this thread, under an :class:`~kindling.batch.Alarm` on the main thread.

        The plain strategy, and the step the pool and FIFO order run each sync job with."""
        if o.status is not None:  # settled while it waited for a thread
            return
        limit = self._start(o, deadline)
        if limit is None:
            return self._defer(o)
        seconds, by_invocation = limit
        job, task = o.job, self._task(o)
        token = set_current_job(self._context(o, seconds))
        traced = self._open_span(o) if self.otel else None
        alarm = Alarm(seconds, by_invocation)
        try:
            with alarm:
                if job.payload is not None:  # type: ignore[union-attr]
                    self._load_arguments(o, task)
                value = task.fn(*job.args, **job.kwargs)  # type: ignore[union-attr]
        except BaseException as exc:  # noqa: BLE001 - whatever a task raises is its job's failure
            self._finish(o, error=exc)
        else:
            # A task that swallowed its timeout and returned late still ran past its limit.
            self._finish(o, value=value, error=alarm.fired)
        finally:
            if traced is not None:
                _otel().detach(traced)
            reset_current_job(token)

    def _payloads(self):
        """The S3 client for payloads, and :mod:`kindling.payloads`: loaded by the first job that needs them."""
        from kindling import payloads

        if self._s3 is None:
            from kindling.aws.s3 import client

            self._s3 = client()
        return self._s3, payloads

    def _load_arguments(self, o: Outcome, task: Task) -> None:
        """Read the job's arguments from S3 (size and sha256 checked) and bind them to its task.

        Raises :class:`PayloadUnavailable`: this job's failure, retried only when S3 itself failed."""
        s3, payloads = self._payloads()
        job = o.job
        args, kwargs = payloads.fetch_arguments(s3, job.payload, bucket=self.payload_bucket,  # type: ignore[union-attr,arg-type]
                                                job_id=job.id, deadline=o.limit_at)  # type: ignore[union-attr]
        try:
            task.check_arguments(args, kwargs)
        except Exception as exc:  # noqa: BLE001 - what the object holds does not fit the task
            reason = exc.reason if isinstance(exc, InvalidJob) else f"{type(exc).__name__}: {exc}"
            raise PayloadUnavailable(f"the payload's arguments do not fit the task: {reason}",
                                     retryable=False) from None
        job.args, job.kwargs = args, kwargs  # type: ignore[union-attr]

    def _store_result(self, o: Outcome, text: str) -> tuple[dict | None, BaseException | None]:
        """Keep a result too large for its record in the payload bucket: (its pointer, None),
        or (None, the failure) when S3 refused it."""
        from kindling.aws.errors import AwsError

        s3, payloads = self._payloads()
        # Half the time kept back for writing results is left for the write itself.
        by = None if self._deadline is None else self._deadline - self.safety_ms / 2000
        try:
            return payloads.put(s3, self.payload_bucket, "results", o.job_id, text.encode(),  # type: ignore[arg-type]
                                deadline=by), None
        except AwsError as exc:
            return None, PayloadUnavailable(f"the result ({len(text.encode()):,} bytes) is too large for its record "
                                            f"and could not be stored in s3://{self.payload_bucket}: {exc}",
                                            retryable=exc.retryable)

    def _open_span(self, o: Outcome):
        """Open the job's span and make it current; the token to detach it, or ``None``."""
        try:
            otel = _otel()
        except ImportError as exc:
            self.otel = False
            if self.log:
                self.log({"level": "WARNING", "location": "kindling.runner:run", "kindling": "otel_unavailable",
                          "message": "KINDLING_OTEL=1 but opentelemetry cannot be imported: no spans",
                          "error": f"{type(exc).__name__}: {exc}"[:300]})
            return None
        span, started = otel.start(o, o.trace)
        self._spans.append((o, span, started))
        return otel.attach(span)

    def _end_spans(self, spans: list) -> None:
        otel = _otel()
        for o, span, started in spans:
            known = self.registry._tasks.get(o.task)  # type: ignore[arg-type]
            otel.end(span, started, o, redact=known is not None and known.redact)

    def _finish(self, o: Outcome, *, value=None, error: BaseException | None = None) -> None:
        if o.status is not None:  # a thread that outlived its timeout: already recorded
            return
        result = result_payload = text = None
        if error is None:
            # Outside the lock: encoding runs the task's own code (__str__, isoformat), and a
            # large result goes to S3, while a pool's waiter may need the lock to time out others.
            result, error = encode_result(value)
            text = result
            if (isinstance(error, ResultTooLarge) and error.text is not None and self.payload_bucket
                    and not self._task(o).redact):
                text = error.text
                result_payload, error = self._store_result(o, text)
        duration = round((time.perf_counter() - o.t0) * 1000, 3)
        if error is None:
            # A success's record is built outside the lock too: a hundred threads finishing
            # jobs would otherwise queue on it behind one another's records.
            record = self._record(o, SUCCEEDED, duration, result, result_payload, None)
            with self._finishing:  # a pool thread and the batch's waiter may both get here
                if o.status is not None:
                    return
                o.result = text  # kept in S3 or not: a chain's next step gets it from here
                o.record, o.status = record, SUCCEEDED
            return
        with self._finishing:
            if o.status is not None:
                return
            o.error = error
            o.reason = f"{type(error).__name__}: {describe_error(error)['message']}"[:1000]
            # An unread job's attempt number is known only after the run.
            status = FAILED if o.unread else self._after_failure(o)
            if self._task(o).redact:  # what the worker logs and the DLQ carries, too
                o.reason = f"{type(error).__name__}: [redacted]"
            o.record = self._record(o, status, duration, None, None, error)
            o.status = status

    def _record(self, o: Outcome, status: str, duration: float, result: str | None, result_payload: dict | None,
                error: BaseException | None) -> dict:
        return build_record(key=o.job_id, task=o.task, status=status, attempts=o.attempts,  # type: ignore[arg-type]
                            started_at=o.started_ms or now_ms(), finished_at=now_ms(), duration_ms=duration,
                            job=o.job, result=result, result_payload=result_payload,
                            error=describe_error(error) if error else None, worker=self._batch_worker,
                            ttl_s=self.ttl_s, trace_id=o.trace_id, redact=self._task(o).redact)

    def _settle_unfinished(self, outcomes: list[Outcome], exc: BaseException) -> None:
        """After kindling's own machinery was interrupted: a job that started is a failed
        attempt (it may have had effects), one that never started goes back unspent."""
        for o in outcomes:
            if o.status is None:
                if o.limit_at is not None:
                    self._finish(o, error=exc if isinstance(exc, Exception) else RuntimeError(
                        f"the run was interrupted: {type(exc).__name__}: {exc}"))
                else:
                    o.status = DEFERRED
                    o.reason = f"not started: the batch was interrupted ({type(exc).__name__})"
                    o.retry_in = 0
        if self.log:
            self.log({"level": "ERROR", "location": "kindling.runner:run", "message": "batch interrupted",
                      "kindling": "batch_interrupted", "error": f"{type(exc).__name__}: {exc}"[:500]})

    def _settle_duplicates(self, outcomes: list[Outcome]) -> None:
        first: dict[str, Outcome] = {}
        for o in outcomes:
            if o.status == DUPLICATE:
                original = first[o.job_id]  # type: ignore[index]
                if original.status in (SUCCEEDED, SKIPPED):
                    o.status = SKIPPED
                    o.reason = "duplicate of a job in the same batch"
                else:
                    o.status = DEFERRED
                    o.reason = "duplicate of a job in the same batch that did not succeed"
                    o.retry_in = original.retry_in
            elif o.job_id is not None and o.job_id not in first:
                first[o.job_id] = o

    def _hand_back_all(self, outcomes: list[Outcome], reason: str, kind: str = "store_unavailable") -> list[Outcome]:
        for o in outcomes:
            if o.status != SKIPPED:
                o.status = DEFERRED
                o.reason = reason
                o.record = None
                o.retry_in = policy.store_backoff_s(o.deliveries)
        if self.log:
            self.log({"level": "WARNING", "location": "kindling.runner:run", "message": "batch handed back",
                      "kindling": kind, "error": reason[:500], "handed_back": len(outcomes)})
        return outcomes

    def _task(self, o: Outcome) -> Task:
        return self.registry.get(o.task)  # type: ignore[arg-type]


def _otel():
    from kindling import otel  # only where KINDLING_OTEL=1: it imports opentelemetry

    return otel


_LEVEL = {FAILED: "WARNING", DEAD: "ERROR", REJECTED: "WARNING"}


def _log_batch(outcomes: list[Outcome], log) -> None:
    """One line per batch, and one per job that failed, died or was rejected."""
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1  # type: ignore[index]
    log({"level": "INFO", "location": "kindling.runner:run", "message": "batch done", "kindling": "batch",
         "messages": len(outcomes), **counts})
    for o in outcomes:
        if o.status in _LEVEL:
            record = o.record or {}
            log({"level": _LEVEL[o.status], "location": "kindling.runner:run", "message": f"job {o.status}",
                 "kindling": o.status, "job_id": o.job_id, "task": record.get("task", o.task), "attempt": o.attempts,
                 "status": o.status, "duration_ms": record.get("duration_ms"), "ref": o.ref, "error": o.reason,
                 "xray_trace_id": o.trace_id})
