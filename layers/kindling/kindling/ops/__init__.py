"""Operating kindling from outside Lambda: find jobs, look at one, retry it, drain the DLQ.

Everything here runs on an operator's machine (the ``kindling`` command, the dashboard)
with boto3 (the ``client`` extra). Nothing in the worker imports it: the Lambda cold path
does not pay for it.

* :mod:`kindling.ops.query` - jobs by status or by task over time, through the results
  table's ``by_status`` and ``by_task`` indexes (four shards each, merged newest first;
  never a Scan), and one job's record.
* :mod:`kindling.ops.revive` - ``retry``: send a job again under its own id; for a ``dead``
  job first a new generation of its record, so the worker runs it instead of bouncing it.
* :mod:`kindling.ops.dlq` - peek at the dead-letter queue, move it back to the jobs queue.
* :mod:`kindling.ops.cli` - the ``jobs``, ``dlq`` and ``dashboard`` subcommands.

Example::

    from kindling.ops import Stack
    from kindling.ops.query import list_jobs

    stack = Stack(table="kindling-results", queue_url="https://sqs.../jobs")
    for record in list_jobs(stack, status="dead", task="emails.send", since_ms=...):
        print(record["id"], record["error"]["message"])
"""

from __future__ import annotations

import os

__all__ = ["Stack", "OpsError"]


class OpsError(Exception):
    """An operation that cannot be done as asked; the message says why and what to do."""


class Stack:
    """The resources of one deployment: results table, jobs queue and its dead-letter queue.

    Args:
        table: the results table (default ``KINDLING_TABLE``).
        queue_url: the jobs queue (default ``KINDLING_QUEUE_URL``); needed to retry and redrive.
        dlq_url: the dead-letter queue (default ``KINDLING_DLQ_URL``, else the jobs queue's
            redrive policy names it).
        session: a ``boto3.Session`` (default: a new one; region, credentials and
            ``AWS_ENDPOINT_URL`` as boto3 finds them).

    ``receive_wait_s`` is the long poll of the DLQ receives that look through it (1 s: a
    short poll samples only some of SQS's servers and may answer empty while messages wait).
    """

    receive_wait_s = 1

    def __init__(self, table: str | None = None, queue_url: str | None = None, dlq_url: str | None = None, *,
                 session=None):
        self.table = table or os.environ.get("KINDLING_TABLE", "")
        self.queue_url = queue_url or os.environ.get("KINDLING_QUEUE_URL", "")
        self._dlq_url = dlq_url or os.environ.get("KINDLING_DLQ_URL", "")
        self._session = session
        self._ddb = None
        self._sqs = None
        self._arns: dict[str, str] = {}
        self._keyring = None

    def signature_attributes(self, queue_url: str, body: str) -> dict:
        """``MessageAttributes`` signing ``body`` for ``queue_url`` when the deployment signs
        jobs (``KINDLING_SIGNING_SECRET``, read with this session), else none: a job sent
        again by an operator must pass the worker's check like a producer's."""
        secret = os.environ.get("KINDLING_SIGNING_SECRET", "")
        if not secret:
            return {}
        from kindling import jobsig
        from kindling.signed import Keyring, boto3_fetch

        if self._keyring is None:
            self._keyring = Keyring(secret, fetch=boto3_fetch(self.session))
        value = self._keyring.sign(jobsig.sqs_destination(queue_url), body)
        return {"MessageAttributes": {jobsig.ATTRIBUTE: {"DataType": "String", "StringValue": value}}}

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
                raise OpsError("no results table: pass --table or set KINDLING_TABLE")
            self._ddb = self.session.client("dynamodb")
        return self._ddb

    @property
    def sqs(self):
        if self._sqs is None:
            self._sqs = self.session.client("sqs")
        return self._sqs

    def need_queue(self) -> str:
        if not self.queue_url:
            raise OpsError("no jobs queue: pass --queue-url or set KINDLING_QUEUE_URL")
        return self.queue_url

    @property
    def dlq_url(self) -> str:
        """The dead-letter queue: given, or the one the jobs queue's redrive policy names."""
        if not self._dlq_url:
            from kindling import codec

            attrs = self.sqs.get_queue_attributes(QueueUrl=self.need_queue(), AttributeNames=["RedrivePolicy"])
            policy = attrs.get("Attributes", {}).get("RedrivePolicy")
            if not policy:
                raise OpsError(f"the jobs queue {self.queue_url} has no redrive policy: pass --dlq-url")
            arn = codec.loads(policy)["deadLetterTargetArn"]
            self._dlq_url = self.sqs.get_queue_url(QueueName=arn.rsplit(":", 1)[1])["QueueUrl"]
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
