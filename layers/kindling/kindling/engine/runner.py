"""The batch runner: deliveries in, one outcome per delivery out.

The runner is the same for every trigger (SQS through Lambda, the local SQS loop, the
Valkey stream consumer). A trigger turns its messages into :class:`Delivery` objects,
calls :meth:`Runner.run`, and maps the outcomes back to its own acknowledgement (what each
status asks of it: :mod:`kindling.core.batch`).

Attempts are counted in the result record, not from the queue's delivery count: a run
that ends ``failed`` records its attempt number, and the next run is that plus one. So a
hand-back (deferral, store outage, cut-off) never uses an attempt; the queue's delivery
count only bounds runs that crash the worker before anything is recorded.

Nothing one job does can fail its batch: a message that cannot be decoded is that
message's rejection, and anything a task raises (``SystemExit``, ``KeyboardInterrupt``,
``CancelledError`` included) or returns (a value that cannot be encoded) is that job's
failure. Only a store that cannot be reached hands the whole batch back, and a batch that
breaks the runner anyway is run again one delivery at a time (:mod:`kindling.engine.contain`).

Per batch the runner makes at most two round trips to the result store when every job
succeeds: one read of the batch's job ids (to skip duplicates and count attempts) and one
write of every outcome. Failures, rejections and dead jobs are written with conditions
(records only move forward; see :mod:`kindling.core.status`), by the store, on that rare path.

The runner keeps the batch's phases (admission, the duplicate check, attempts, recording)
and runs plain synchronous jobs itself; a thread pool, async tasks and FIFO group order are
strategies of :mod:`kindling.engine.execution`, each imported by the first batch that needs it,
which run jobs through the runner's public steps (:class:`kindling.core.batch.Steps`).
"""

from __future__ import annotations

import os
import time
from _thread import allocate_lock

from kindling.core import policy
from kindling.core.batch import (
    STORE_OUTAGE,
    STORE_UNAVAILABLE,
    Alarm,
    Batch,
    Budget,
    Delivery,
    JobContext,
    Outcome,
    current_job,
    drop_duplicates,
    hand_back,
    job_of,
    lambda_context,
    read_state,
    resend_last_deliveries,
    reset_current_job,
    set_current_job,
    settle_duplicates,
)
from kindling.core.envelope import Job, decode_job, now_ms
from kindling.core.errors import InvalidJob, NewerEnvelope, ResultTooLarge, StoreUnavailable
from kindling.core.records import (
    MAX_RESULT_BYTES,
    build_record,
    describe_error,
    encode_result,
    renumbered,
    scheduled_record,
)
from kindling.core.status import DEAD, DEFERRED, FAILED, FINAL, NEWER_GENERATION, REVOKED, SCHEDULED, SKIPPED, SUCCEEDED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Sequence

    from kindling.core.registry import Registry, Task
    from kindling.core.result_store import ResultStore
    from kindling.shared.otel import Tracer
    from kindling.shared.payloads import PayloadIO

__all__ = ["Batch", "Delivery", "JobContext", "Outcome", "Runner", "current_job", "MAX_RESULT_BYTES",
           "STORE_OUTAGE", "STORE_UNAVAILABLE"]

DAY_S = 86_400


def _log(entry: dict) -> None:
    """The default log: Powertools-layout JSON lines on stdout (:mod:`kindling.shared.logs`, loaded at the first)."""
    from kindling.shared import logs

    logs.sink()(entry)


class Runner:
    """Runs batches of deliveries against a registry and records outcomes in a store.

    Args:
        registry: where task names are looked up.
        store: the result store (:class:`kindling.stores.results.DynamoResultStore` in Lambda).
        max_attempts: attempts before a failing job is ``dead``, when neither the job
            nor its task says otherwise.
        attempts_cap: an upper bound on any job's attempts, whatever it asks for.
        max_deliveries: the delivery on which a job that still has no final record is
            recorded ``dead`` instead of being run (SQS: the redrive policy's
            maxReceiveCount, after which the queue moves the message anyway). Runs that
            crash the worker before recording anything are bounded only by this, or, for
            deliveries whose count counts runs only (``Delivery.counts_runs``: a Valkey
            stream), by the job's own attempts (:func:`kindling.core.policy.out_of_deliveries`).
            Either is judged after the message is decoded and its signature checked.
        retry_delay: seconds before a failed job's first retry, doubling per attempt
            (``Outcome.retry_in``), for tasks without retry options of their own; 0 leaves
            it to the queue. Default: the deployment's, the same for every trigger
            (:func:`kindling.core.policy.configured_retry_delay`: ``KINDLING_RETRY_DELAY``, else
            :data:`kindling.core.policy.DEFAULT_RETRY_DELAY_S`).
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
            Lambda sends to CloudWatch, in Powertools' key layout: :mod:`kindling.shared.logs`);
            ``None`` for silence.
        metrics: write CloudWatch EMF metrics per batch (:mod:`kindling.shared.metrics`) to stdout.
            Default: on in Lambda, or where ``KINDLING_METRICS=1``; ``KINDLING_METRICS=0``
            turns them off.
        payload_bucket: where a result too large for its record is kept, behind a pointer
            (default ``KINDLING_PAYLOAD_BUCKET``; empty: such a result fails the job as
            ``ResultTooLarge``). Jobs whose arguments are in S3 are read from the bucket
            their pointer names, whatever this says.
        s3: the :class:`kindling.drivers.aws.s3.S3Client` for payloads (default: the process's,
            made at the first payload).
        verifier: signed jobs (:class:`kindling.shared.signed.Verifier`): a delivery that is not
            validly signed is recorded ``rejected`` and never run; a batch for which the
            keys cannot be read is handed back. ``None`` (the default): no check at all.
        otel: open an OpenTelemetry span per job run (:mod:`kindling.shared.otel`). Default: only
            where ``KINDLING_OTEL=1``; without opentelemetry installed it is logged once and
            left off. Off, opentelemetry is never imported.
        results: the deployment's results policy, for tasks without their own
            (:data:`kindling.core.policy.RESULTS_POLICIES`; default ``KINDLING_RESULTS_POLICY``, else "all").
        retention_s: how long its queue keeps a message (default 14 days): a job due later is ``rejected``.
    """

    def __init__(self, registry: Registry, store: ResultStore, *, max_attempts: int | None = None,
                 attempts_cap: int | None = None, max_deliveries: int | None = None, retry_delay: float | None = None,
                 default_timeout: float = 300.0, concurrency: int = 16, threads: int = 0, safety_ms: int = 1000,
                 cutoff_ms: int = 500, worker: dict | None = None, ttl_days: float | None = None,
                 log=_log, metrics: bool | None = None, payload_bucket: str | None = None, s3=None, verifier=None,
                 otel: bool | None = None, results: str | None = None, retention_s: float | None = None):
        self.registry = registry
        self.store = store
        self.max_attempts = policy.configured_max_attempts() if max_attempts is None else max_attempts
        self.attempts_cap = attempts_cap
        self.max_deliveries = max_deliveries
        self.retry_delay = policy.configured_retry_delay() if retry_delay is None else retry_delay
        self.results = policy.configured_results() if results is None else policy.check_results(results)
        self.retention_s = policy.DEFAULT_RETENTION_S if retention_s is None else retention_s
        self.default_timeout = default_timeout
        self.concurrency = max(1, concurrency)
        self.threads = threads
        self.thread_pool: object | None = None  # kindling.engine.execution.threaded's, made at its first batch
        self.event_loop: object | None = None  # kindling.engine.execution.asyncrun's, likewise
        self.budget = Budget(safety_ms, cutoff_ms)
        self.worker = worker or {}
        self.ttl_s = int((policy.configured_result_ttl_days() if ttl_days is None else ttl_days) * DAY_S)
        self.log = log
        self._finishing = allocate_lock()
        self._batch_worker = self.worker  # the executing batch's
        self._admitting_worker = self.worker  # the batch being admitted's (Runner.begin)
        if metrics is None:
            flag = os.environ.get("KINDLING_METRICS")
            metrics = flag == "1" if flag in ("0", "1") else "AWS_LAMBDA_FUNCTION_NAME" in os.environ
        self.metrics = metrics
        self.verifier = verifier
        self.otel = os.environ.get("KINDLING_OTEL") == "1" if otel is None else otel
        self._tracer: Tracer | None = None  # made at the first batch with spans on
        self.batches = 0
        self.payload_bucket = os.getenv("KINDLING_PAYLOAD_BUCKET", "") if payload_bucket is None else payload_bucket
        self._s3 = s3
        self._payload_io: PayloadIO | None = None
        self._deadline: float | None = None  # the executing batch's

    safety_ms = property(lambda self: self.budget.safety_ms, doc="Kept back for recording (Budget).")
    cutoff_ms = property(lambda self: self.budget.cutoff_ms, doc="No job starts with less left (Budget).")

    # -- the batch, top to bottom ----------------------------------------------------

    def run(self, deliveries: Sequence[Delivery], remaining_ms: Callable[[], int] | None = None,
            request_id: str | None = None, send: Callable[[list[Job]], object] | None = None) -> list[Outcome]:
        """Run one batch; return an outcome for every delivery, in the same order: :meth:`begin`,
        :meth:`execute`, :meth:`finish` back to back. ``send`` enqueues a chain's next step or a
        chord's callback on the batch's trigger (:mod:`kindling.engine.followups`), once its
        outcomes are recorded. A batch that makes these raise anyway (a bug in kindling, never
        a job's failure) is run again one delivery at a time (:mod:`kindling.engine.contain`)."""
        try:
            return self.finish(self.execute(self.begin(deliveries, remaining_ms, request_id)), send=send)
        except Exception as exc:  # noqa: BLE001 - one delivery must not fail its batch-mates for ever
            from kindling.engine.contain import one_by_one  # the rare path

            return one_by_one(self, deliveries, exc, remaining_ms, request_id, send)

    def begin(self, deliveries: Sequence[Delivery], remaining_ms: Callable[[], int] | None = None,
              request_id: str | None = None, *, in_flight: Collection[str] = ()) -> Batch:
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
        deadline = self.budget.deadline(remaining_ms)
        # Past this there is no time left to run anything the read would allow.
        read_by = self.budget.run_by(deadline)
        if self.verifier is not None:
            trouble = self.verifier.prepare(read_by)
            if trouble is not None:  # no job is judged without the keys: the batch comes back
                outcomes = [Outcome(d.ref, None, None, None, d.attempts) for d in deliveries]
                batch = Batch(deliveries, outcomes, [], dict, deadline, read_by, worker)
                batch.handed_back = self._hand_back_all(outcomes, trouble, "signing_keys_unavailable")
                return batch
        outcomes = [self._decode(d) for d in deliveries]
        runnable = drop_duplicates(outcomes)
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
        tracer = self._tracing() if self.otel else None
        if tracer is None:
            return self._execute(batch, meanwhile)
        with tracer.running(batch):  # its spans stay open until finish() knows the outcomes as recorded
            return self._execute(batch, meanwhile)

    def _execute(self, batch: Batch, meanwhile: Callable[[], object] | None = None) -> Batch:
        # The batch's own, not the one begun since (a long-lived worker begins the next early).
        self._batch_worker, self._deadline = batch.worker, batch.deadline
        outcomes, deliveries, deadline, read_by = batch.outcomes, batch.deliveries, batch.deadline, batch.read_by
        runnable, fifo, grants = batch.runnable, any(d.group is not None for d in deliveries), None
        try:
            self._apply_previous(runnable, batch.collect())
            if not fifo and any(self.task_of(o).rate_limit is not None for o in runnable if o.status is None):
                from kindling.core.ratelimit import admit, give_back  # one round trip per rate-limited task

                grants = admit(self, runnable, read_by)
        except StoreUnavailable as exc:
            batch.handed_back = self._hand_back_all(outcomes, f"{STORE_UNAVAILABLE}: {exc}")
            return batch

        runnable = [o for o in runnable if o.status is None]
        sync_jobs = [o for o in runnable if not self.task_of(o).is_async]
        async_jobs = [o for o in runnable if self.task_of(o).is_async]
        try:
            # Each strategy but the plain one (kindling.engine.execution) is imported by the first
            # batch that needs it: a Lambda worker's batches of sync jobs never load them.
            if fifo:
                from kindling.engine.execution.fifo import run_in_group_order

                run_in_group_order(self, outcomes, deliveries, deadline)
            elif self.threads > 1 and len(sync_jobs) > 1:
                from kindling.engine.execution.threaded import run_threaded

                run_threaded(self, sync_jobs, deadline, meanwhile)
            else:
                for o in sync_jobs:
                    self.run_job(o, deadline)
            if async_jobs and not fifo:
                from kindling.engine.execution.asyncrun import run_async

                run_async(self, async_jobs, deadline)
        except BaseException as exc:  # noqa: BLE001 - kindling's own machinery was interrupted
            self._settle_unfinished(runnable, exc)
        if any(o.status is None for o in runnable):  # a run that ended without an outcome
            self._settle_unfinished(runnable, RuntimeError("the job's run ended without an outcome"))
        if grants:  # a rate limit's run granted to a job that did not start goes back (a FIFO batch: fifo.py)
            give_back(self, grants, self.budget.write_by(deadline))
        try:
            self._number_unread_failures(runnable, read_by)
        except StoreUnavailable as exc:
            batch.handed_back = self._hand_back_all(outcomes, f"{STORE_UNAVAILABLE}: {exc}")
            return batch

        settle_duplicates(outcomes)
        for o in outcomes:  # the store writes each record only over the generation it was read as
            if o.record is not None and o.job and not policy.keeps(self._results_of(o), o.status, o.attempts):
                o.record, o.unrecorded = None, True  # the results policy: not kept
            elif o.record is not None and o.generation > 1:
                o.record["generation"] = o.generation
        records = [o.record for o in outcomes if o.record is not None]
        if records:
            # The write has the time kept back for it, less a margin for the reply to Lambda.
            # Sent now, read back by finish(): {id: status} of the records the store refused.
            batch.collect_write = self._send_now(self.store.begin_write, records,
                                                 self.budget.write_by(deadline))
        return batch

    def finish(self, batch: Batch, send: Callable[[list[Job]], object] | None = None) -> list[Outcome]:
        """Read the write's reply back; return the batch's outcomes. A write that fails hands
        the batch back; a record the store refused (it holds a later outcome) is ``skipped``.
        Then, once every record is written, a chain's next step and a chord's count
        (:mod:`kindling.engine.followups`, enqueueing through ``send``)."""
        tracer = self._tracer
        if not batch.spans or tracer is None:
            return resend_last_deliveries(batch, self._finish_batch(batch, send), self.max_deliveries)
        with tracer.ending(batch):
            return resend_last_deliveries(batch, self._finish_batch(batch, send), self.max_deliveries)

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
                    if o.status == DEFERRED:  # a scheduled record over a later one: handed back until due all the same
                        continue
                    if refused[o.record["id"]] == NEWER_GENERATION:
                        from kindling.core.refusals import drop_stale  # the rare path

                        drop_stale(o, self.log)
                    else:
                        o.reason = f"not recorded: the store already holds a later outcome ({refused[o.record['id']]})"
                    o.status = SKIPPED
                    o.retry_in = None
        if any(o.job is not None and (o.job.chain or o.job.parent) for o in outcomes):
            from kindling.engine import followups  # only batches with chains or chords load it

            followups.run(self, outcomes, send, self.budget.write_by(batch.deadline))
        if self.registry.hooked:
            from kindling.engine import hooks  # only registries with a hook load it

            hooks.call(self.registry, outcomes, self.log, self._attempts_allowed, self.budget.hooks_by(batch.deadline))
        if self.log:
            from kindling.shared.logs import log_batch  # loaded by the first line already

            log_batch(outcomes, self.log)
        if self.metrics:
            from kindling.shared import metrics  # at the end of the first batch, not at import

            metrics.emit(outcomes, self.registry, cold_start=self.batches == 0)
        self.batches += 1
        return outcomes

    # -- steps -------------------------------------------------------------------------

    def _decode(self, d: Delivery) -> Outcome:
        """Decode and validate the envelope; a bad message becomes ``rejected`` right here."""
        if self.verifier is not None:
            unsigned = self.verifier.check(d)
            if unsigned is not None:
                return self._rejected(Outcome(d.ref, None, None, None, d.attempts), d, f"signature: {unsigned}",
                                      unsigned=True)
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
            return self._rejected(Outcome(d.ref, None, None, None, d.attempts), d, exc.reason, refusal=exc)
        except Exception as exc:  # noqa: BLE001 - whatever the body does to the decoder
            return self._rejected(Outcome(d.ref, None, None, None, d.attempts), d,
                                  f"message body cannot be decoded: {type(exc).__name__}: {exc}"[:1000])
        o = Outcome(d.ref, job.id, job.task, None, 1, d.attempts)
        o.job = job
        if d.trace:
            from kindling.shared.logs import trace_root

            o.trace_id = trace_root(d.trace)
            o.trace = d.trace
        return o

    def _check(self, o: Outcome, d: Delivery) -> None:
        """The rest of admission: a task this worker runs, arguments that bind, a job that is due."""
        job = job_of(o)
        try:
            task = self.registry.get(job.task)
            if job.payload is None:  # arguments in S3: checked once read
                task.check_arguments(job.args, job.kwargs)
        except Exception as exc:  # noqa: BLE001 - a valid envelope this worker cannot run
            reason = exc.reason if isinstance(exc, InvalidJob) else f"{type(exc).__name__}: {exc}"
            self._rejected(o, d, reason, claimed_id=job.id, task=job.task, job=job)
            return
        o.results = policy.results_for(job, task, self.results, group=d.group, counts_runs=d.counts_runs)
        # The crash-loop rule: judged here, on a decoded and verified job, for every trigger.
        o.exhausted = policy.out_of_deliveries(o.deliveries, self._attempts_allowed(o), self.max_deliveries,
                                               d.counts_runs)
        if job.not_before is not None and job.not_before > (now := now_ms()) and not o.exhausted:  # last one: dead
            refusal = policy.due_refusal(job, now, o.deliveries, self.max_deliveries, self.retention_s, d.counts_runs)
            if refusal is not None:
                self._rejected(o, d, refusal, claimed_id=job.id, task=job.task, job=job)
                return
            o.status, o.reason = DEFERRED, "not_before is in the future"
            o.retry_in = min(-(-(job.not_before - now) // 1000), policy.MAX_DELAY_S)
            if policy.keeps(self._results_of(o), SCHEDULED):  # "all" only: none is left scheduled for ever
                o.record = scheduled_record(job, worker=self._admitting_worker, ttl_s=self.ttl_s,
                                            trace_id=o.trace_id, redact=task.redact)

    def _rejected(self, o: Outcome, d: Delivery, reason: str, **claims) -> Outcome:
        """A message that is not a job this worker can run: recorded, never run."""
        from kindling.core import refusals  # the first such message loads it

        return refusals.reject(o, d, reason, registry=self.registry, worker=self._admitting_worker, ttl_s=self.ttl_s,
                                **claims)

    def _begin_read(self, runnable: list[Outcome], deadline: float | None,
                    later: Collection[str] = ()) -> Callable[[], dict]:
        """Send the batch's one read now; the returned callable collects its reply.

        Jobs of tasks that opted out of duplicate skipping (``skip_succeeded=False``) are
        not read: a batch of only those makes no read at all. Ids in ``later`` are read
        when the reply is collected, not now (see :meth:`begin`).
        """
        ids = []
        for o in runnable:
            task = self.registry.find(o.task)  # type: ignore[arg-type]
            if task is None or policy.read_first(task, self._results_of(o)):  # unknown: rejected by _check
                ids.append(o.job_id)
        if not ids:
            return dict
        if later:
            late = [i for i in ids if i in later]
            if late:
                now = [i for i in ids if i not in later]
                first = self._send_now(self.store.begin_read, now, deadline) if now else dict

                def collect() -> dict:
                    states = first()
                    states.update(self._send_now(self.store.begin_read, late, deadline)())
                    return states

                return collect
        return self._send_now(self.store.begin_read, ids, deadline)

    def _send_now(self, begin: Callable, items: list, deadline: float | None) -> Callable[[], dict]:
        """The store's ``begin_*`` (send now, read later). A send that fails already fails
        again when collected, where the batch handles it."""
        try:
            return begin(items, deadline=deadline)
        except StoreUnavailable as exc:
            def fail(exc=exc):
                raise exc
            return fail

    def _apply_previous(self, runnable: list[Outcome], states: dict) -> None:
        """Skip finished jobs, number this attempt, stop a job on its last delivery."""
        for o in runnable:
            if o.status is not None:
                continue
            task = self.task_of(o)
            last_delivery = o.exhausted
            if not policy.read_first(task, self._results_of(o)):
                # Unread: numbered after the run if it fails (see _number_unread_failures).
                # Opting out of duplicate skipping means running again is fine, even after
                # ``dead``: a success replaces the dead record, a failure is refused by it.
                # Under results="none" no failed record is kept to count from: deliveries count.
                o.unread = self._results_of(o) != policy.RESULTS_NONE
                o.attempts = o.deliveries
                if last_delivery:
                    self._dead_undelivered(o)
                continue
            previous, attempts = read_state(o, states)
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

    def _results_of(self, o: Outcome) -> str:
        return o.results or policy.results_for(job_of(o), self.registry.find(job_of(o).task), self.results)

    def _number_unread_failures(self, runnable: list[Outcome], deadline: float | None) -> None:
        """Failed jobs that were not read before running learn their attempt number now.

        The rare path pays the read the all-succeeded opted-out batch skipped.
        """
        unread = [o for o in runnable if o.unread and o.status in (FAILED, DEAD) and o.record is not None]
        if not unread:
            return
        states = self.store.read_states([o.job_id for o in unread], deadline=deadline)  # type: ignore[misc]
        for o in unread:
            previous, attempts = read_state(o, states)
            if o.status == DEAD:  # on its last delivery: only its generation was wanted
                continue
            o.attempts = attempts + 1 if previous == FAILED else 1
            status = self._after_failure(o)
            o.record = renumbered(o.record, status, o.attempts)  # type: ignore[arg-type]
            o.status = status

    def _dead_undelivered(self, o: Outcome) -> None:
        from kindling.core import refusals  # the crash-loop rule's rare end

        known = self.registry.find(o.task) if o.task else None  # no preview of a redacted task's arguments
        refusals.dead_undelivered(o, worker=self._batch_worker, ttl_s=self.ttl_s, redact=bool(known and known.redact))

    def _after_failure(self, o: Outcome) -> str:
        """``dead`` or ``failed`` for a run that failed with ``o.error``, and when to retry."""
        task = self.task_of(o)
        if o.attempts >= self._attempts_allowed(o) or not policy.should_retry(task, o.error):  # type: ignore[arg-type]
            o.retry_in = None
            return DEAD
        o.retry_in = policy.retry_in_s(task, o.error, o.attempts, self.retry_delay)  # type: ignore[arg-type]
        return FAILED

    def _attempts_allowed(self, o: Outcome) -> int:
        return policy.attempts_allowed(job_of(o), self.task_of(o), self.max_attempts, self.attempts_cap)

    # -- the steps an execution strategy takes (kindling.core.batch.Steps) ---------------------

    def task_of(self, o: Outcome) -> Task:
        """The registered task an admitted outcome's job runs."""
        return self.registry.get(job_of(o).task)

    def defer_job(self, o: Outcome) -> None:
        """Hand an unstarted job back: the invocation's time ran short."""
        o.status = DEFERRED
        o.reason = "not started: the invocation's remaining time ran short"
        o.retry_in = 0

    def start_job(self, o: Outcome, deadline: float | None) -> tuple[float, bool] | None:
        """Claim the job for running: its time limit starts now. ``None``: too little time is
        left to start it (:meth:`defer_job` it)."""
        limit = self.budget.job_limit(deadline, policy.timeout_for(job_of(o), self.task_of(o), self.default_timeout))
        if limit is None:
            return None
        o.started_ms = now_ms()
        o.t0 = time.perf_counter()
        o.limit = limit
        o.limit_at = time.monotonic() + limit[0]
        return limit

    def job_context(self, o: Outcome, seconds: float) -> JobContext:
        """What the job's task sees through :func:`kindling.core.batch.current_job` while it runs."""
        job = job_of(o)
        return JobContext(job.id, job.task, o.attempts, self._attempts_allowed(o), time.monotonic() + seconds,
                          lambda_context(), job.headers)

    def run_job(self, o: Outcome, deadline: float | None) -> None:
        """Run one synchronous job on this thread, under an :class:`~kindling.core.batch.Alarm` on
        the main thread: the plain strategy, and the step the pool and FIFO order run each
        sync job with."""
        if o.status is not None:  # settled while it waited for a thread
            return
        limit = self.start_job(o, deadline)
        if limit is None:
            return self.defer_job(o)
        seconds, by_invocation = limit
        job, task = job_of(o), self.task_of(o)
        token = set_current_job(self.job_context(o, seconds))
        tracer = self._tracer if self.otel else None
        traced = None if tracer is None else tracer.open(o)
        alarm = Alarm(seconds, by_invocation)
        try:
            with alarm:
                if job.payload is not None:
                    self.load_arguments(o)
                value = task.fn(*job.args, **job.kwargs)
        except BaseException as exc:  # noqa: BLE001 - whatever a task raises is its job's failure
            self.finish_job(o, error=exc)
        else:
            # A task that swallowed its timeout and returned late still ran past its limit.
            self.finish_job(o, value=value, error=alarm.fired)
        finally:
            if tracer is not None:
                tracer.close(traced)
            reset_current_job(token)

    def load_arguments(self, o: Outcome) -> None:
        """Read a job's arguments from S3 and bind them to its task (:class:`kindling.shared.payloads.PayloadIO`)."""
        self.payload_io().load_arguments(job_of(o), self.task_of(o), deadline=o.limit_at)

    def payload_io(self) -> PayloadIO:
        """Payload I/O in S3 (:class:`kindling.shared.payloads.PayloadIO`): made by the first job,
        result or follow-up that needs it, with the runner's bucket and S3 client."""
        if self._payload_io is None:
            from kindling.shared.payloads import PayloadIO

            self._payload_io = PayloadIO(self.payload_bucket, self._s3)
        return self._payload_io

    def open_span(self, o: Outcome) -> object | None:
        """With spans on, open the job's span and make it current; the token to detach it."""
        tracer = self._tracer if self.otel else None
        return None if tracer is None else tracer.open(o)

    def _tracing(self) -> Tracer | None:
        """The runner's :class:`kindling.shared.otel.Tracer`, made at its first batch with spans on;
        without opentelemetry that is logged once and spans stay off."""
        if self._tracer is None:
            try:
                from kindling.shared import otel  # only where KINDLING_OTEL=1: it imports opentelemetry
            except ImportError as exc:
                self.otel = False
                if self.log:
                    self.log({"level": "WARNING", "kindling": "otel_unavailable",
                              "message": "KINDLING_OTEL=1 but opentelemetry cannot be imported: no spans",
                              "error": f"{type(exc).__name__}: {exc}"[:300]})
                return None
            self._tracer = otel.Tracer(lambda name: name in self.registry and self.registry.get(name).redact)  # type: ignore[arg-type]
        return self._tracer

    def finish_job(self, o: Outcome, *, value: object = None, error: BaseException | None = None) -> None:
        """Record a job's run: its value (encoded, kept in S3 when too large for its record)
        or what it raised. Once only: a thread past its timeout finishing later changes nothing."""
        if o.status is not None:  # a thread that outlived its timeout: already recorded
            return
        result = result_payload = text = None
        if error is None:
            # Outside the lock: encoding runs the task's own code (__str__, isoformat), and a
            # large result goes to S3, while a pool's waiter may need the lock to time out others.
            result, error = encode_result(value)
            text = result
            if (isinstance(error, ResultTooLarge) and error.text is not None and self.payload_bucket
                    and not self.task_of(o).redact):
                text = error.text
                # Half the time kept back for writing results is left for the write itself.
                result_payload, error = self.payload_io().store_result(o.job_id, text,  # type: ignore[arg-type]
                                                                       deadline=self.budget.upload_by(self._deadline))
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
            if self.task_of(o).redact:  # what the worker logs and the DLQ carries, too
                o.reason = f"{type(error).__name__}: [redacted]"
            o.record = self._record(o, status, duration, None, None, error)
            o.status = status

    def _record(self, o: Outcome, status: str, duration: float, result: str | None, result_payload: dict | None,
                error: BaseException | None) -> dict:
        return build_record(key=o.job_id, task=o.task, status=status, attempts=o.attempts,  # type: ignore[arg-type]
                            started_at=o.started_ms or now_ms(), finished_at=now_ms(), duration_ms=duration,
                            job=o.job, result=result, result_payload=result_payload,
                            error=describe_error(error) if error else None, worker=self._batch_worker,
                            ttl_s=self.ttl_s, trace_id=o.trace_id, redact=self.task_of(o).redact)

    def _settle_unfinished(self, outcomes: list[Outcome], exc: BaseException) -> None:
        """After kindling's own machinery was interrupted: a job that started is a failed
        attempt (it may have had effects), one that never started goes back unspent."""
        for o in outcomes:
            if o.status is None:
                if o.limit_at is not None:
                    self.finish_job(o, error=exc if isinstance(exc, Exception) else RuntimeError(
                        f"the run was interrupted: {type(exc).__name__}: {exc}"))
                else:
                    o.status = DEFERRED
                    o.reason = f"not started: the batch was interrupted ({type(exc).__name__})"
                    o.retry_in = 0
        if self.log:
            self.log({"level": "ERROR", "message": "batch interrupted",
                      "kindling": "batch_interrupted", "error": f"{type(exc).__name__}: {exc}"[:500]})

    def _hand_back_all(self, outcomes: list[Outcome], reason: str, kind: str = STORE_OUTAGE) -> list[Outcome]:
        hand_back(outcomes, reason, kind)
        if self.log:
            self.log({"level": "WARNING", "message": "batch handed back",
                      "kindling": kind, "error": reason[:500], "handed_back": len(outcomes)})
        return outcomes

