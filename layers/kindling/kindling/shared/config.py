"""Configuration: every ``KINDLING_*`` environment variable kindling reads, in one table
(:data:`VARIABLES`: name, default, meaning, the modules that read it), the readers the
producers, the command line and the operator's tools share, and what ``kindling worker``
and the operator's commands need before they start (the task modules, the Valkey URL, the
stream worker's settings).

Variables are read when used, never at import. At import this module loads ``os`` alone.
The Lambda handler's cold path reads its own variables with ``os.environ`` (importing this
module would cost its first invocation one module more); tests/unit/test_config.py holds
every name the package reads, the handler's included, to this table, and the table to the
modules that read each name.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["VARIABLES", "Variable", "get", "load_tasks", "queues", "result_ttl_days", "signing_secret", "table",
           "valkey_url", "valkey_worker_options"]


class Variable:
    """One environment variable: its default (``None``: none, or the reader's own, named in
    the meaning), what it means, and the modules that read it."""

    __slots__ = ("name", "default", "meaning", "readers")

    def __init__(self, name: str, default: str | None, meaning: str, readers: tuple[str, ...]):
        self.name, self.default, self.meaning, self.readers = name, default, meaning, readers


VARIABLES: dict[str, Variable] = {v.name: v for v in (
    # Where jobs and outcomes go.
    Variable("KINDLING_TABLE", None, "the DynamoDB results table",
             ("tools.cli", "shared.config", "triggers.sqs.handler", "tools.ops.cli", "tools.pytest_plugin",
              "tools.dev")),
    Variable("KINDLING_QUEUE_URL", None, "the jobs queue (SQS URL); ticks enqueue scheduled jobs there",
             ("tools.cli", "producer.client", "triggers.sqs.handler", "tools.ops", "tools.ops.cli",
              "tools.pytest_plugin", "triggers.sqs.tick", "tools.dev")),
    Variable("KINDLING_QUEUES", None, "the named queues, name=url,... (template output QueueRoutes)",
             ("shared.config", "triggers.sqs.handler", "core.routing", "triggers.sqs.tick")),
    Variable("KINDLING_DLQ_URL", None, "the jobs queue's dead-letter queue: the worker moves dead jobs there",
             ("triggers.sqs.handler", "tools.ops", "tools.ops.cli", "tools.dev")),
    Variable("KINDLING_DLQ_URLS", None, "with several queues: each source queue's ARN=its own DLQ URL,...",
             ("triggers.sqs.handler",)),
    Variable("KINDLING_PAYLOAD_BUCKET", None, "the S3 bucket for arguments and results too large for a message "
             "or a record", ("producer.client", "engine.runner")),
    Variable("KINDLING_DASHBOARD_TOKEN", None, "`kindling dashboard`'s and `kindling dev`'s login token (default: "
             "one made and printed at start)", ("tools.ops.cli", "tools.dev")),
    Variable("KINDLING_DASHBOARD_TRUST_HEADER", None, "`kindling dashboard` behind an authenticating proxy: the "
             "header naming the user, trusted instead of a token", ("tools.ops.cli",)),
    Variable("KINDLING_DEBUG", None, "'1': the command line shows an error's traceback, as --debug does",
             ("tools.cli",)),
    Variable("KINDLING_RESULTS", None, "'valkey': outcomes in the Valkey result store instead of the table",
             ("tools.cli", "tools.ops.cli", "producer.valkey")),
    Variable("KINDLING_RESULTS_POLICY", "all", "which outcomes get a record for tasks without results=: all, "
             "failures (no record for a success) or none (only dead and rejected); the template's ResultsPolicy",
             ("core.policy",)),
    Variable("KINDLING_TASK_INDEX", "1", "0: records carry no task_shard, so the by_task index (off in the "
             "template: TaskIndex=false) costs nothing; listing by task then needs it on", ("stores.dynamo",)),
    Variable("KINDLING_RESULT_TTL_DAYS", None, "days an outcome record is kept (default "
             "policy.DEFAULT_RESULT_TTL_DAYS, 14; the template's ResultTtlDays); wins over KINDLING_RESULT_TTL_S",
             ("core.policy",)),
    Variable("KINDLING_STATUS_SHARDS", "4", "partitions per status in the results table's by_status index (the "
             "template's StatusIndexShards): the worker writes, revives, revokes and listings use the same number",
             ("core.records",)),
    Variable("KINDLING_RESULT_TTL_S", None, "seconds an outcome record is kept: the name `kindling worker "
             "--valkey` read before; honoured when KINDLING_RESULT_TTL_DAYS is not set", ("core.policy",)),
    Variable("KINDLING_SIGNING_SECRET", None, "the secret holding the job signing keys: producers sign, workers "
             "verify, operator tools check", ("shared.config", "triggers.sqs.handler", "triggers.sqs.loop")),
    # How the worker runs jobs.
    Variable("KINDLING_MAX_ATTEMPTS", None, "attempts before a failing job is dead when neither job nor task "
             "says (default policy.DEFAULT_MAX_ATTEMPTS, 3; the template's MaxAttempts): every trigger",
             ("core.policy",)),
    Variable("KINDLING_MAX_RECEIVES", None, "the queue's maxReceiveCount: the last delivery before the DLQ",
             ("triggers.sqs.handler",)),
    Variable("KINDLING_CONCURRENCY", "16", "jobs at once within a Lambda batch", ("triggers.sqs.handler",)),
    Variable("KINDLING_TIMEOUT", "300", "the default time limit of a job, in seconds", ("triggers.sqs.handler",)),
    Variable("KINDLING_SAFETY_MS", "1000", "milliseconds kept back at the end of an invocation",
             ("triggers.sqs.handler",)),
    Variable("KINDLING_RETRY_DELAY", None, "seconds before a failed job's first retry (default "
             "policy.DEFAULT_RETRY_DELAY_S)", ("core.policy", "tools.pytest_plugin")),
    Variable("KINDLING_METRICS", None, "1/0: EMF metrics on or off (default: on in Lambda)", ("engine.runner",)),
    Variable("KINDLING_OTEL", None, "1: OpenTelemetry spans", ("engine.runner",)),
    Variable("KINDLING_LOG", "1", "0: `kindling worker --valkey` logs no line per batch", ("shared.config",)),
    Variable("KINDLING_EAGER", None, "1: task handles run jobs inline (tests)",
             ("producer.dispatch", "tools.pytest_plugin")),
    Variable("KINDLING_TEST_VALKEY_URL", None, "the Valkey server of the pytest fixture kindling_valkey_worker "
             "(else --kindling-valkey-url; neither: its tests are skipped)", ("tools.pytest_plugin",)),
    # Valkey.
    Variable("KINDLING_VALKEY_URL", None, "the Valkey server (redis:// or rediss://)",
             ("shared.config", "shared.valkey.connection")),
    Variable("KINDLING_VALKEY_URL_SECRET", None, "the secret (Secrets Manager or SSM) holding the Valkey URL, "
             "when KINDLING_VALKEY_URL is not set", ("shared.config", "shared.valkey.connection")),
    Variable("KINDLING_VALKEY_STREAM", None, "the operator tools' job stream (default "
             "valkey.keys.DEFAULT_STREAM, kindling:jobs)", ("tools.ops.cli",)),
    Variable("KINDLING_VALKEY_STREAMS", None, "the streams Lambda drains read, comma-separated (default "
             "valkey.keys.DEFAULT_STREAM)",
             ("triggers.valkey.drain_event",)),
    Variable("KINDLING_VALKEY_GROUP", None, "the consumer group (default valkey.keys.DEFAULT_GROUP, kindling)",
             ("shared.config", "triggers.valkey.drain_event")),
    Variable("KINDLING_VALKEY_BATCH", "100", "entries `kindling worker --valkey` reads per round, to start with",
             ("shared.config",)),
    Variable("KINDLING_VALKEY_MAX_BATCH", "2000", "the most entries `kindling worker --valkey` reads per round "
             "once quick rounds have grown its reads", ("shared.config",)),
    Variable("KINDLING_VALKEY_CHUNK", "500", "the most entries `kindling worker --valkey` runs as one batch: a "
             "larger read is run this many at a time, so what it holds is bounded by this, not the read size",
             ("shared.config",)),
    Variable("KINDLING_VALKEY_BLOCK_MS", "1000", "how long one read of `kindling worker --valkey` blocks",
             ("shared.config",)),
    Variable("KINDLING_VALKEY_VISIBILITY_MS", "30000", "how long an entry of `kindling worker --valkey` stays "
             "pending before another consumer reclaims it", ("shared.config",)),
    Variable("KINDLING_VALKEY_DEAD_MAXLEN", "10000", "entries kept in a dead stream", ("triggers.valkey.consumer",)),
    Variable("KINDLING_VALKEY_MAX_DRAINS", "16", "drain flags per stream (Lambda drains at once)",
             ("triggers.valkey.drain_event",)),
    Variable("KINDLING_DRAIN_VISIBILITY_MS", "30000", "how long a drained entry stays pending",
             ("triggers.valkey.drain_event",)),
    Variable("KINDLING_DRAIN_HORIZON_MS", "60000", "how long one drain keeps reading",
             ("triggers.valkey.drain_event",)),
    Variable("KINDLING_DRAIN_BLOCK_MS", "100", "how long one drain read blocks", ("triggers.valkey.drain_event",)),
    Variable("KINDLING_DRAIN_BATCH", "100", "entries one drain read takes", ("triggers.valkey.drain_event",)),
    Variable("KINDLING_WORKER_FUNCTION", None, "the Lambda function a stream producer kicks to drain",
             ("producer.valkey",)),
    Variable("KINDLING_DEMO_CLOUD", "moto", "the demo's local cloud: moto or localstack", ("tools.cli",)),
)}


def get(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The variable's value, or the table's default when unset. ``KeyError`` for a name not
    in the table: a variable is added there before it is read."""
    default = VARIABLES[name].default
    return (os.environ if environ is None else environ).get(name, default)


def table(environ: Mapping[str, str] | None = None) -> str:
    """The results table (``KINDLING_TABLE``; empty: none)."""
    return get("KINDLING_TABLE", environ) or ""


def signing_secret(environ: Mapping[str, str] | None = None) -> str:
    """The signing keys' secret (``KINDLING_SIGNING_SECRET``; empty: jobs are not signed)."""
    return get("KINDLING_SIGNING_SECRET", environ) or ""


def queues(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The named queues' URLs by name (``KINDLING_QUEUES``), every name checked."""
    from kindling.core.routing import parse_queues

    return parse_queues(get("KINDLING_QUEUES", environ) or "")


def result_ttl_days(environ: Mapping[str, str] | None = None) -> float:
    """How long outcome records are kept, in days: ``KINDLING_RESULT_TTL_DAYS`` (what the
    template sets), else ``KINDLING_RESULT_TTL_S`` (the name ``kindling worker --valkey``
    read before, in seconds), else :data:`kindling.core.policy.DEFAULT_RESULT_TTL_DAYS`."""
    from kindling.core.policy import configured_result_ttl_days

    return configured_result_ttl_days(os.environ if environ is None else environ)


def valkey_worker_options(environ: Mapping[str, str] | None = None) -> dict:
    """``kindling worker --valkey``'s settings from the environment, as
    :class:`kindling.valkey.StreamWorker` takes them: the consumer group (when set), entries
    per round (the first reads' and the most) and run at once, block and visibility (ms), attempts,
    per-batch log lines, and how long outcomes are kept (``ttl_days``, for the records and
    the Valkey result store alike)."""
    from kindling.core.policy import configured_max_attempts

    def number(name: str) -> int:
        return int(get(name, environ))  # type: ignore[arg-type]

    options = {
        "batch": number("KINDLING_VALKEY_BATCH"), "max_batch": number("KINDLING_VALKEY_MAX_BATCH"),
        "chunk": number("KINDLING_VALKEY_CHUNK"),
        "block_ms": number("KINDLING_VALKEY_BLOCK_MS"),
        "visibility_ms": number("KINDLING_VALKEY_VISIBILITY_MS"),
        "max_attempts": configured_max_attempts(os.environ if environ is None else environ),
        "log": get("KINDLING_LOG", environ) != "0", "ttl_days": result_ttl_days(environ),
    }
    group = get("KINDLING_VALKEY_GROUP", environ)
    if group:
        options["group"] = group
    return options


def load_tasks(specs: list[str]) -> None:
    """Import task modules given as dotted names or ``.py`` paths, registering their tasks."""
    import importlib
    import sys

    for spec in specs:
        if spec.endswith(".py") or os.sep in spec:
            path = os.path.realpath(spec)
            if not os.path.exists(path):
                raise SystemExit(f"kindling: tasks file {spec} does not exist")
            sys.path.insert(0, os.path.dirname(path))  # so the file's own imports resolve as in Lambda
            stem = os.path.splitext(os.path.basename(path))[0]
            import importlib.util

            module_spec = importlib.util.spec_from_file_location(stem, path)
            module = importlib.util.module_from_spec(module_spec)  # type: ignore[arg-type]
            sys.modules[stem] = module
            module_spec.loader.exec_module(module)  # type: ignore[union-attr]
        else:
            importlib.import_module(spec)


def valkey_url(ns) -> str | None:
    """The Valkey URL of a command line ``ns``: ``--valkey``, else the secret
    ``--valkey-url-secret`` names, else the first line of ``--valkey-url-file``, else
    ``KINDLING_VALKEY_URL``, else the secret ``KINDLING_VALKEY_URL_SECRET`` names; ``None``
    for the SQS worker. A secret is read here, when the command starts (kindling's own AWS
    client), and its value is never printed."""
    if ns.valkey:
        return ns.valkey
    secret = getattr(ns, "valkey_url_secret", None)
    if secret:
        return url_from_secret(secret)
    if ns.valkey_url_file:
        try:
            with open(ns.valkey_url_file) as f:
                lines = f.read().split()
        except OSError as exc:
            raise SystemExit(f"kindling: --valkey-url-file: {exc}") from None
        if not lines:
            raise SystemExit(f"kindling: --valkey-url-file {ns.valkey_url_file} is empty")
        return lines[0]
    if not (get("KINDLING_VALKEY_URL") or get("KINDLING_VALKEY_URL_SECRET")):
        return None  # the SQS worker: it loads nothing of Valkey
    from kindling.core.errors import KindlingError, missing_layer

    try:
        from kindling.shared.valkey.connection import configured_url

        return configured_url()
    except ModuleNotFoundError as exc:
        raise SystemExit(f"kindling: {missing_layer(exc)}") from None
    except KindlingError as exc:  # names the secret and the error code, never a value
        raise SystemExit(f"kindling: {exc}") from None


def url_from_secret(ref: str) -> str:
    """The Valkey URL kept in the secret ``ref``; ``SystemExit`` naming the secret (never
    its value) if it cannot be read."""
    from kindling.core.errors import KindlingError, missing_layer

    try:
        from kindling.shared.valkey.connection import url_from_secret as read

        return read(ref)
    except ModuleNotFoundError as exc:
        raise SystemExit(f"kindling: {missing_layer(exc)}") from None
    except KindlingError as exc:  # names the secret and the error code, never a value
        raise SystemExit(f"kindling: {exc}") from None
