"""The Lambda entry point.

Build the worker at module level (it does no I/O, so the init phase stays close to a bare
interpreter's) and hand Lambda its bound method::

    # functions/worker/app.py
    from kindling.triggers.sqs.handler import LambdaWorker
    import tasks  # noqa: F401  (registers the @task functions)

    handler = LambdaWorker()

Configuration comes from the function's environment (template.yaml sets it):

========================== ===========================================================
``KINDLING_TABLE``          results table name (required)
``KINDLING_QUEUE_URL``      the jobs queue, where a ``{"kindling": "tick"}`` event (the
                            ``PeriodicTasks`` ticker rule) enqueues due scheduled tasks
``KINDLING_QUEUES``         the named queues (``name=url,...``), for scheduled tasks
                            routed to one (:mod:`kindling.core.routing`)
``KINDLING_MAX_ATTEMPTS``   attempts before a failing job is dead, when neither job nor
                            task says (default 3); counted in the result record
``KINDLING_MAX_RECEIVES``   the queue's maxReceiveCount: on that delivery a job with no
                            final record is recorded ``dead`` instead of being run (or
                            handed back), so nothing reaches the DLQ by redrive without a
                            record; a delay needing more 12-hour hops is ``rejected``
``KINDLING_DLQ_URL``        the dead-letter queue: the worker moves a job it records
                            ``dead`` there itself (without it, the redrive policy does,
                            after the message's remaining deliveries)
``KINDLING_DLQ_URLS``       with several queues: each source queue's ARN to its own
                            dead-letter queue's URL (``arn=url,...``), over
                            ``KINDLING_DLQ_URL``; a queue missing from it is left to its
                            redrive policy
``KINDLING_CONCURRENCY``    async jobs running at once within a batch (default 16)
``KINDLING_TIMEOUT``        default per-job timeout in seconds (default 300)
``KINDLING_SAFETY_MS``      time kept back at the end of an invocation (default 1000)
``KINDLING_RESULT_TTL_DAYS`` days before result records expire (default 14)
``KINDLING_RETRY_DELAY``    seconds before a failed job's first retry, doubling with
                            each attempt (default 5, every trigger's:
                            :func:`kindling.core.policy.configured_retry_delay`); 0 leaves
                            retries to the queue's visibility timeout (see
                            :func:`kindling.triggers.sqs.events.settlement`)
``KINDLING_PAYLOAD_BUCKET`` where results too large for their record are kept (S3, behind
                            a pointer in the record; :mod:`kindling.shared.payloads`); unset: such
                            results fail as ``ResultTooLarge``
``KINDLING_VALKEY_URL``      the Valkey server drains read (or ``KINDLING_VALKEY_URL_SECRET``:
                            the secret holding it, read at the first drain)
``KINDLING_VALKEY_STREAMS`` the streams drains read (comma-separated; default
                            ``kindling:jobs``; the first when an event names none). A drain
                            event only selects one of these and one of its kick flags;
                            anything else is refused (:mod:`kindling.triggers.valkey.drain_event`)
``KINDLING_VALKEY_GROUP``   the drains' consumer group (default ``kindling``)
``KINDLING_DRAIN_*``         ``_VISIBILITY_MS`` (30000: how long an entry stays pending
                            before another drain reclaims it), ``_HORIZON_MS``,
                            ``_BLOCK_MS``, ``_BATCH``; ``KINDLING_VALKEY_MAX_DRAINS``: flags
                            per stream (16). Never taken from an event
``KINDLING_SIGNING_SECRET`` signed jobs: the secret holding the signing keys
                            (:mod:`kindling.shared.signed`); a message not validly signed is
                            recorded ``rejected``, never run. Unset or empty: off, and
                            nothing about signing is imported
========================== ===========================================================

Handed-back messages that were never attempted come back when they should, without
using an attempt: a job not due yet when it is due, a batch handed back because the
results table is down after a growing backoff (2, 4, 8 ... s, at most 15 min), one cut
off by the invocation's end at once.
"""

from __future__ import annotations

import os
import time

from kindling.core.batch import Budget, set_lambda_context
from kindling.core.errors import KindlingError
from kindling.core.registry import default_registry
from kindling.core.status import DEAD
from kindling.engine.runner import Runner
from kindling.triggers.sqs import events as sqs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kindling.core.registry import Registry
    from kindling.core.result_store import ResultStore
    from kindling.triggers.sqs.port import SqsPort


class LambdaWorker:
    """A callable Lambda handler running kindling jobs from SQS (and Valkey drain events).

    Args:
        registry: the tasks to run (default: everything registered with ``@task``).
        store: where outcomes go (default: a DynamoDB store on ``KINDLING_TABLE``).
        **runner_options: passed to :class:`kindling.engine.runner.Runner`, over the environment.
    """

    def __init__(self, registry: Registry | None = None, *, store: ResultStore | None = None,
                 **runner_options):
        env = os.environ
        if any(name.lower().endswith("_proxy") for name in env):  # never in Lambda unless set by hand
            from kindling.drivers.aws.proxy import check_environment

            check_environment()  # a proxy kindling cannot use is refused here, at init, not in a batch
        self.registry = registry or default_registry
        self._store = store
        self.table = env.get("KINDLING_TABLE", "")
        receives = env.get("KINDLING_MAX_RECEIVES")
        options = {
            # Past maxReceiveCount the message is in the DLQ whatever a task asks for.
            "attempts_cap": int(receives) - 1 if receives else None,
            "max_deliveries": int(receives) if receives else None,
            "concurrency": int(env.get("KINDLING_CONCURRENCY", "16")),
            "default_timeout": float(env.get("KINDLING_TIMEOUT", "300")),
            "safety_ms": int(env.get("KINDLING_SAFETY_MS", "1000")),
            "worker": {
                "function": env.get("AWS_LAMBDA_FUNCTION_NAME", ""),
                "version": env.get("AWS_LAMBDA_FUNCTION_VERSION", ""),
            },
        }
        options.update(runner_options)
        self._options = options
        self.dlq_url = env.get("KINDLING_DLQ_URL", "")
        self.dlq_urls = env.get("KINDLING_DLQ_URLS", "")  # parsed when a job first dies
        self.signing_secret = env.get("KINDLING_SIGNING_SECRET", "")
        self._runner: Runner | None = None
        self._cold = True
        self._deadline: float | None = None  # the invocation's, for sends after the batch
        self._port: SqsPort | None = None
        if env.get("AWS_LAMBDA_INITIALIZATION_TYPE") == "snap-start":  # the init a snapshot is taken of
            from kindling.shared import snapstart

            snapstart.install()

    @property
    def runner(self) -> Runner:
        if self._runner is None:
            options = self._options
            if self.signing_secret and "verifier" not in options:
                from kindling.shared.signed import Keyring, Verifier

                options = dict(options, verifier=Verifier(Keyring(self.signing_secret)))
            self._runner = Runner(self.registry, self.store, **options)
        return self._runner

    @property
    def store(self) -> ResultStore:
        if self._store is None:
            if not self.table:
                raise KindlingError("KINDLING_TABLE is not set: the worker needs a results table")
            from kindling.stores.dynamo import DynamoResultStore

            self._store = DynamoResultStore(self.table)
        return self._store

    @property
    def port(self) -> SqsPort:
        """The SQS I/O of settlement and of the worker's own sends (:mod:`kindling.triggers.sqs.port`),
        loaded by the first batch that has something to send, move or bring back."""
        if self._port is None:
            from kindling.drivers import aws
            from kindling.triggers.sqs.port import AwsSqs, SqsPort

            self._port = SqsPort(self.runner, AwsSqs, route=self._route, errors=(aws.AwsError,),
                                 queue_url=lambda arn: sqs.queue_url(aws.sqs().endpoint, arn),
                                 dead_letters=self._dead_letter_queues)
        return self._port

    def __call__(self, event: dict, context=None) -> dict:
        set_lambda_context(context)  # a task's current_job().lambda_context, for this invocation only
        try:
            return self._serve(event, context)
        finally:
            set_lambda_context(None)

    def _serve(self, event: dict, context) -> dict:
        remaining = Budget.remaining_of(context)
        request_id = getattr(context, "aws_request_id", None)
        # The invocation's calls outside the runner's batch (follow-ups sent by a task, the
        # settlement's SQS calls) end before Lambda's deadline, with a margin for the reply.
        self._deadline = Budget.deadline(remaining, Budget.REPLY_MS)
        from kindling.shared import logs  # with the first batch: its lines are the first thing logged

        logs.invocation(context, cold_start=self._cold)
        self._cold = False
        if sqs.is_sqs_event(event):
            runner = self.runner
            started = time.monotonic()
            batch = sqs.deliveries(event, signed=runner.verifier is not None)
            outcomes = runner.run(batch, remaining, request_id, send=self._send)
            # Held by Lambda's poller up to sqs.LAMBDA_HOLD_S before this invocation saw them.
            settlement = sqs.settlement(batch, outcomes, **self._dead_letter_queues(outcomes),
                                        in_flight_s=time.monotonic() - started + sqs.LAMBDA_HOLD_S)
            if not (settlement.dlq_moves or settlement.resends or settlement.visibility or settlement.unrouted):
                return settlement.response  # Lambda deletes the rest: nothing for the worker to call
            return self.port.apply(settlement, self._deadline)  # SQS calls after the batch: within the invocation too
        if isinstance(event, dict) and event.get("kindling") == "tick":
            from kindling.triggers.sqs import tick  # tick events only

            return tick.run(self.registry, self.port)
        if isinstance(event, dict) and event.get("kindling") == "drain":
            try:  # the Valkey client is never on the SQS path, nor in the SQS worker's layer
                from kindling.triggers.valkey import lambda_drain
            except ModuleNotFoundError as exc:
                from kindling.core.errors import missing_layer

                raise missing_layer(exc) from None
            return lambda_drain.drain(self.runner, event, remaining, request_id=request_id)
        kind = type(event).__name__ if not isinstance(event, dict) else f"keys {sorted(event)[:5]}"
        raise KindlingError(f"kindling worker: not an SQS event or a drain event ({kind})")

    def _dead_letter_queues(self, outcomes) -> dict:
        """Where dead jobs' messages go (``KINDLING_DLQ_URLS``, ``KINDLING_DLQ_URL``), read when
        a job first dies. Nothing when neither is set, or the map does not parse: each queue's
        redrive policy moves them then."""
        if not (self.dlq_url or self.dlq_urls) or not any(o.status == DEAD for o in outcomes):
            return {}
        from kindling.core import routing

        try:
            return {"dlq_urls": routing.parse_pairs(self.dlq_urls, "KINDLING_DLQ_URLS"), "dlq_url": self.dlq_url}
        except KindlingError as exc:
            if self.runner.log:
                self.runner.log({"level": "ERROR", "kindling": "dlq_config_invalid", "error": str(exc)[:500]})
            return {}

    def _route(self, job) -> str:
        """A follow-up's queue: its task's (the jobs queue, ``KINDLING_QUEUE_URL``, or the
        task's named queue from ``KINDLING_QUEUES``)."""
        from kindling.core import routing  # batches with chains or chords only

        queues = routing.parse_queues(os.environ.get("KINDLING_QUEUES", ""))
        task = self.registry.find(job.task)  # a task this worker does not run: the default queue
        name = routing.queue_name(None, getattr(task, "queue", None))
        return routing.resolve(name, os.environ.get("KINDLING_QUEUE_URL", ""), queues)

    def _send(self, jobs: list) -> None:
        """Enqueue a chain's next step or a chord's callback on its task's queue; raises unless
        SQS took every one."""
        self.port.send(jobs, self._deadline)
