"""Named queues: which queue a job goes to, and which dead-letter queue a dead job goes to.

A task may name a queue (``@task(queue="reports")``) and a send may name another
(``apply_async(..., queue=...)``, ``Call(..., queue=...)``): the send's name wins, then
the task's, then the default queue (``KINDLING_QUEUE_URL``). Names resolve to URLs from
``KINDLING_QUEUES``, which template.yaml's ``QueueRoutes`` output gives::

    KINDLING_QUEUES="reports=https://sqs.../kindling-reports,bulk=https://sqs.../kindling-bulk"

so an enqueue makes no call to find its queue. An unknown name is an error, never the
default queue: a job meant for a rate-limited queue must not run unlimited.

The worker moves a dead job's message to the dead-letter queue of the queue it came from:
``KINDLING_DLQ_URLS`` maps each source queue's ARN (an SQS event's ``eventSourceARN``) to
its DLQ's URL, in the same ``key=value,...`` form.

Pure functions only; the producer (:mod:`kindling.producer.client`) and the worker
(:mod:`kindling.triggers.sqs.handler`) do the I/O.
"""

from __future__ import annotations

from kindling.core.errors import KindlingError, UnknownQueue

DEFAULT = "default"
MAX_NAME_LENGTH = 40
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def check_name(name: object) -> str | None:
    """Why ``name`` is not a valid queue name (1-40 of ``A-Z a-z 0-9 _ -``), or ``None``."""
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_LENGTH or not set(name) <= _NAME_CHARS:
        return f"a queue name is 1-{MAX_NAME_LENGTH} characters of A-Z, a-z, 0-9, _ and -, got {name!r:.80}"
    return None


def parse_pairs(text: str, variable: str) -> dict[str, str]:
    """``"a=x,b=y"`` (commas or whitespace between pairs; empty items skipped) as a dict.

    Raises :class:`KindlingError` naming ``variable`` for an item without ``=``, an empty
    key or value, or a key given twice.
    """
    pairs: dict[str, str] = {}
    for item in text.replace(",", " ").split():
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise KindlingError(f"{variable}: {item!r:.200} is not key=value")
        if key in pairs:
            raise KindlingError(f"{variable}: {key!r} is given twice")
        pairs[key] = value
    return pairs


def parse_queues(text: str) -> dict[str, str]:
    """``KINDLING_QUEUES`` as ``{name: url}``, every name checked."""
    queues = parse_pairs(text, "KINDLING_QUEUES")
    for name in queues:
        if name == DEFAULT:
            raise KindlingError("KINDLING_QUEUES: 'default' is the jobs queue (KINDLING_QUEUE_URL), not a named queue")
        problem = check_name(name)
        if problem:
            raise KindlingError(f"KINDLING_QUEUES: {problem}")
    return queues


def queue_name(send_queue: str | None, task_queue: str | None) -> str:
    """The queue a job goes to: the send's choice, else the task's, else ``default``."""
    return send_queue or task_queue or DEFAULT


def resolve(name: str, default_url: str, queues: dict[str, str]) -> str:
    """The URL of queue ``name``; raises :class:`UnknownQueue` for a name with none."""
    if name == DEFAULT:
        if not default_url:
            raise UnknownQueue("no default queue: pass queue_url= or set KINDLING_QUEUE_URL")
        return default_url
    url = queues.get(name)
    if url is None:
        known = ", ".join(sorted(queues)) or "none (KINDLING_QUEUES is not set)"
        raise UnknownQueue(f"unknown queue {name!r}: the named queues are {known} "
                           "(render it into template.yaml: make queues QUEUES=...; deploy; set KINDLING_QUEUES "
                           "from the QueueRoutes output)")
    return url


def dead_letter_url(source_arn: str, dlq_urls: dict[str, str], fallback: str) -> str | None:
    """Where a dead job's message from ``source_arn`` goes.

    With a map (``KINDLING_DLQ_URLS``), only the source queue's own DLQ: a queue missing
    from it gets ``None`` (its redrive policy moves the message, to its own DLQ). Without
    one, the single ``KINDLING_DLQ_URL`` of a one-queue deployment (or ``None``).
    """
    if dlq_urls:
        return dlq_urls.get(source_arn)
    return fallback or None
