"""The Lambda entry point.

Build the worker at module level (it does no I/O, so the init phase stays close to a bare
interpreter's) and hand Lambda its bound method::

    # functions/worker/app.py
    from kindling.handler import LambdaWorker
    import tasks  # noqa: F401  (registers the @task functions)

    handler = LambdaWorker()

Configuration comes from the function's environment (template.yaml sets it):

========================== ===========================================================
``KINDLING_TABLE``          results table name (required)
``KINDLING_MAX_ATTEMPTS``   deliveries before a job is dead; set it to the queue's
                            maxReceiveCount so the last attempt is recorded ``dead``
``KINDLING_CONCURRENCY``    async jobs running at once within a batch (default 16)
``KINDLING_TIMEOUT``        default per-job timeout in seconds (default 300)
``KINDLING_SAFETY_MS``      time kept back at the end of an invocation (default 1000)
``KINDLING_RESULT_TTL_DAYS`` days before result records expire (default 7)
``KINDLING_RETRY_DELAY``    seconds before a failed job's first retry, doubling with
                            each attempt; unset or 0 leaves retries to the queue's
                            visibility timeout (see :func:`kindling.sqs.visibility_changes`)
========================== ===========================================================
"""

from __future__ import annotations

import os

from kindling import sqs
from kindling.errors import KindlingError
from kindling.registry import default_registry
from kindling.runner import Runner

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kindling.registry import Registry
    from kindling.results import ResultStore


class LambdaWorker:
    """A callable Lambda handler running kindling jobs from SQS (and Valkey drain events).

    Args:
        registry: the tasks to run (default: everything registered with ``@task``).
        store: where outcomes go (default: a DynamoDB store on ``KINDLING_TABLE``).
        **runner_options: passed to :class:`kindling.runner.Runner`, over the environment.
    """

    def __init__(self, registry: Registry | None = None, *, store: ResultStore | None = None,
                 **runner_options):
        env = os.environ
        self.registry = registry or default_registry
        self._store = store
        self.table = env.get("KINDLING_TABLE", "")
        max_attempts = int(env.get("KINDLING_MAX_ATTEMPTS", "3"))
        options = {
            "max_attempts": max_attempts,
            # Past maxReceiveCount the message is in the DLQ whatever a task asks for.
            "attempts_cap": max_attempts if "KINDLING_MAX_ATTEMPTS" in env else None,
            "concurrency": int(env.get("KINDLING_CONCURRENCY", "16")),
            "default_timeout": float(env.get("KINDLING_TIMEOUT", "300")),
            "safety_ms": int(env.get("KINDLING_SAFETY_MS", "1000")),
            "ttl_days": float(env.get("KINDLING_RESULT_TTL_DAYS", "7")),
            "worker": {
                "function": env.get("AWS_LAMBDA_FUNCTION_NAME", ""),
                "version": env.get("AWS_LAMBDA_FUNCTION_VERSION", ""),
            },
        }
        options.update(runner_options)
        self._options = options
        self.retry_delay = float(env.get("KINDLING_RETRY_DELAY", "0"))
        self._runner: Runner | None = None

    @property
    def runner(self) -> Runner:
        if self._runner is None:
            self._runner = Runner(self.registry, self.store, **self._options)
        return self._runner

    @property
    def store(self) -> ResultStore:
        if self._store is None:
            if not self.table:
                raise KindlingError("KINDLING_TABLE is not set: the worker needs a results table")
            from kindling.results import DynamoResultStore

            self._store = DynamoResultStore(self.table)
        return self._store

    def __call__(self, event: dict, context=None) -> dict:
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        request_id = getattr(context, "aws_request_id", None)
        if sqs.is_sqs_event(event):
            outcomes = self.runner.run(sqs.deliveries(event), remaining, request_id)
            response = sqs.batch_response(outcomes)
            if response["batchItemFailures"] and self.retry_delay > 0:
                self._change_visibility(event, outcomes)
            return response
        if isinstance(event, dict) and event.get("kindling") == "drain":
            from kindling import valkey  # the Valkey client is never on the SQS path

            return valkey.drain(self.runner, event, remaining)
        kind = type(event).__name__ if not isinstance(event, dict) else f"keys {sorted(event)[:5]}"
        raise KindlingError(f"kindling worker: not an SQS event or a drain event ({kind})")

    def _change_visibility(self, event: dict, outcomes) -> None:
        """Bring handed-back messages back sooner. Best effort: if SQS refuses, they still
        return after the queue's visibility timeout, so nothing is lost either way."""
        from kindling import aws

        client = aws.sqs()
        for arn, entries in sqs.visibility_changes(event, outcomes, self.retry_delay).items():
            url = sqs.queue_url(client.endpoint, arn)
            for start in range(0, len(entries), 10):
                try:
                    batch = {"QueueUrl": url, "Entries": entries[start : start + 10]}
                    client.call("ChangeMessageVisibilityBatch", batch)
                except aws.AwsError as exc:
                    if self.runner.log:
                        self.runner.log({"kindling": "visibility_not_changed", "queue": arn, "error": str(exc)})
