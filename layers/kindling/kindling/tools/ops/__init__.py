"""Operating kindling from outside Lambda: find jobs, look at one, retry it, drain the DLQ.

Everything here runs on an operator's machine (the ``kindling`` command, the dashboard)
with boto3 (the ``client`` extra). Nothing in the worker imports it: the Lambda cold path
does not pay for it.

* :mod:`kindling.tools.ops.query` - jobs by status or by task over time, through the results
  table's ``by_status`` and ``by_task`` indexes (four shards each, merged newest first;
  never a Scan), and one job's record.
* :mod:`kindling.tools.ops.revive` - ``retry``: send a job again under its own id; for a ``dead``
  job first a new generation of its record, so the worker runs it instead of bouncing it.
* :mod:`kindling.tools.ops.dlq` - peek at the dead-letter queue, move it back to the jobs queue.
* :mod:`kindling.tools.ops.cli` - the ``jobs``, ``dlq`` and ``dashboard`` subcommands.

Example::

    from kindling.tools.ops import Stack
    from kindling.tools.ops.query import list_jobs

    stack = Stack(table="kindling-results", queue_url="https://sqs.../jobs")
    for record in list_jobs(stack, status="dead", task="emails.send", since_ms=...):
        print(record["id"], record["error"]["message"])
"""

from __future__ import annotations

import copy
import os

from kindling.core.errors import masked_url
from kindling.shared import config
from kindling.tools.exits import UsageError

__all__ = ["Stack", "OpsError", "OpsUsageError"]


class OpsError(Exception):
    """An operation that cannot be done as asked; the message says why and what to do."""


class OpsUsageError(OpsError, UsageError):
    """The command line cannot work as given: an option or setting the operation needs, neither
    passed nor set, or an option's value that does not parse. The command exits 2 (usage), as
    every command does for these (:mod:`kindling.tools.exits`)."""


class Stack:
    """The resources of one deployment: results table, jobs queue and its dead-letter queue,
    and the named queues, each with its own dead-letter queue (:mod:`kindling.core.routing`).

    Args:
        table: the results table (default ``KINDLING_TABLE``).
        queue_url: the jobs queue (default ``KINDLING_QUEUE_URL``); needed to retry and redrive.
        dlq_url: the jobs queue's dead-letter queue (default ``KINDLING_DLQ_URL``, else the jobs
            queue's redrive policy names it).
        queues: the named queues' URLs by name (default ``KINDLING_QUEUES``, as producers route).
        session: a ``boto3.Session`` (default: a new one; region, credentials and
            ``AWS_ENDPOINT_URL`` as boto3 finds them).

    A stack acts on one queue, ``queue_name`` (``default``: the jobs queue); :meth:`on_queue`
    gives the same deployment acting on another, whose dead-letter queue is the one its own
    redrive policy names (where the worker moves that queue's dead jobs).

    ``receive_wait_s`` is the long poll of the DLQ receives that look through it (1 s: a
    short poll samples only some of SQS's servers and may answer empty while messages wait).
    """

    receive_wait_s = 1

    def __init__(self, table: str | None = None, queue_url: str | None = None, dlq_url: str | None = None, *,
                 queues: dict[str, str] | None = None, session=None):
        self.table = table or config.table()
        self.queue_url = queue_url or os.environ.get("KINDLING_QUEUE_URL", "")
        self._dlq_url = dlq_url or os.environ.get("KINDLING_DLQ_URL", "")
        self._queues = dict(queues) if queues is not None else None
        self.queue_name = "default"
        self._session = session
        self._ddb = None
        self._sqs = None
        self._arns: dict[str, str] = {}
        self._keyring = None

    @property
    def queues(self) -> dict[str, str]:
        """The named queues' URLs by name (read from ``KINDLING_QUEUES`` when first asked)."""
        if self._queues is None:
            from kindling.core.errors import KindlingError

            try:
                self._queues = config.queues()
            except KindlingError as exc:
                raise OpsError(str(exc)) from None
        return self._queues

    def on_queue(self, name: str) -> Stack:
        """This deployment acting on queue ``name`` (``default``: the jobs queue, as given) and
        that queue's own dead-letter queue; clients and caches are shared."""
        from kindling.core import routing
        from kindling.core.errors import UnknownQueue

        if name == self.queue_name:
            return self
        if self.queue_name != routing.DEFAULT:
            raise OpsError(f"a stack acting on queue {self.queue_name!r} cannot switch to {name!r}")
        try:
            url = routing.resolve(name, self.queue_url, self.queues)
        except UnknownQueue as exc:
            raise OpsError(str(exc)) from None
        _ = self.sqs  # made before the copy, so every queue's view shares one session and client
        view = copy.copy(self)
        view.queue_url, view.queue_name = url, name
        view._dlq_url = ""  # --dlq-url / KINDLING_DLQ_URL is the jobs queue's: this one's policy names its own
        return view

    def every_queue(self) -> list[Stack]:
        """The jobs queue (when there is one), then each named queue, in ``KINDLING_QUEUES`` order."""
        first = [self] if self.queue_url else []
        return first + [self.on_queue(name) for name in self.queues]

    @property
    def signing(self):
        """The deployment's signing keys (a :class:`kindling.shared.signed.Keyring` read with this
        session) when ``KINDLING_SIGNING_SECRET`` names them, else ``None``: this operator can
        then neither sign a job nor check a signature."""
        secret = config.signing_secret()
        if not secret:
            return None
        if self._keyring is None or self._keyring.secret != secret:
            from kindling.shared.signed import Keyring, boto3_fetch

            self._keyring = Keyring(secret, fetch=boto3_fetch(self.session))
        return self._keyring

    def _keys(self, use):
        try:
            return use(self.signing)
        except Exception as exc:  # noqa: BLE001 - boto3's errors, a malformed key set: say which and why
            raise OpsError(f"cannot read the signing keys ({config.signing_secret()}): "
                           f"{type(exc).__name__}: {exc}") from None

    def signature_attributes(self, queue_url: str, body: str) -> dict:
        """``MessageAttributes`` signing ``body`` for ``queue_url`` when the deployment signs
        jobs (``KINDLING_SIGNING_SECRET``, read with this session), else none: a job sent
        again by an operator must pass the worker's check like a producer's."""
        if self.signing is None:
            return {}
        from kindling.core import jobsig

        value = self._keys(lambda keyring: keyring.sign(jobsig.sqs_destination(queue_url), body))
        return {"MessageAttributes": {jobsig.ATTRIBUTE: {"DataType": "String", "StringValue": value}}}

    def signature_problem(self, queue_url: str, body: str, signature: str | None) -> str | None:
        """Why ``body`` with ``signature`` would not pass the worker of ``queue_url``, or
        ``None`` if it would (:func:`kindling.core.jobsig.verify`). Needs :attr:`signing`."""
        from kindling.core import jobsig

        keys = self._keys(lambda keyring: keyring.keys())
        key_id = jobsig.key_id_of(signature)
        if key_id is not None and key_id not in keys:  # rotated in since the keys were read
            keys = self._keys(lambda keyring: (keyring.load(force=True), keyring.keys())[1])
        return jobsig.verify(keys, jobsig.sqs_destination(queue_url), body, signature)

    @property
    def session(self):
        if self._session is None:
            import boto3

            self._session = boto3.Session()
        return self._session

    @property
    def dynamodb(self):
        if self._ddb is None:
            if not self.table:
                raise OpsUsageError("no results table: pass --table or set KINDLING_TABLE")
            self._ddb = self.session.client("dynamodb")
        return self._ddb

    @property
    def sqs(self):
        if self._sqs is None:
            self._sqs = self.session.client("sqs")
        return self._sqs

    def need_queue(self) -> str:
        if not self.queue_url:
            raise OpsUsageError("no jobs queue: pass --queue-url or set KINDLING_QUEUE_URL")
        return self.queue_url

    @property
    def dlq_url(self) -> str:
        """The dead-letter queue: given, or the one the jobs queue's redrive policy names."""
        if not self._dlq_url:
            from kindling.core import codec

            queue = self.need_queue()  # before the client: a missing setting is said before any AWS call
            attrs = self.sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["RedrivePolicy"])
            policy = attrs.get("Attributes", {}).get("RedrivePolicy")
            if not policy:
                where = "pass --dlq-url" if self.queue_name == "default" else "deploy it as template.yaml does"
                raise OpsError(f"queue {self.queue_name!r} ({masked_url(self.queue_url)}) has no redrive policy: "
                               f"{where}")
            from kindling.triggers.sqs.events import queue_url

            arn = codec.loads(policy)["deadLetterTargetArn"]
            self._dlq_url = queue_url(self.sqs.meta.endpoint_url, arn)
            self._arns[self._dlq_url] = arn
        return self._dlq_url

    def arn(self, url: str) -> str:
        if url not in self._arns:
            attrs = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
            self._arns[url] = attrs["Attributes"]["QueueArn"]
        return self._arns[url]

    def depth(self, url: str) -> dict[str, int]:
        """A queue's backlog: ``visible``, ``in_flight`` and ``delayed`` messages (approximate)."""
        names = {"ApproximateNumberOfMessages": "visible", "ApproximateNumberOfMessagesNotVisible": "in_flight",
                 "ApproximateNumberOfMessagesDelayed": "delayed"}
        attrs = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(names))["Attributes"]
        return {short: int(attrs.get(name, 0)) for name, short in names.items()}
