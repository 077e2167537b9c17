"""The deployed stack as a conformance path: template.yaml on LocalStack, its function
shipping the conformance tasks, fed by its own event source mapping.

Unlike the in-process paths (paths.py), nothing here drives the worker: LocalStack's event
source mapping invokes the function, and real visibility timeouts pass. So the deployed
path runs its scenarios at once, in threads, and a scenario "settles" when the stack's queue
is quiet (nothing visible, in flight or delayed). What it cannot see is named in known.py:
the delays the function asked for (its own ChangeMessageVisibility calls, made inside
LocalStack) and the runs counted in the test's process.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path as FsPath

from conformance import paths
from conformance import scenario_tasks as tasks

STACK = "deployed_stack"
APP = '''"""The worker function, shipping the conformance suite's tasks instead of the examples."""

from conformance import scenario_tasks
from kindling.triggers.sqs.handler import LambdaWorker

handler = LambdaWorker(scenario_tasks.registry)
'''
# What the stack is deployed with: the test queues' maxReceiveCount, the template's MaxAttempts,
# and the RetryDelay that configured_retry_delay's DEPLOYMENT sets (the deployed path cannot
# change its function's environment per scenario; its delays are not observed anyway).
PARAMETERS = {"MaxAttempts": str(paths.MAX_ATTEMPTS), "MaxReceiveCount": str(paths.MAX_RECEIVES),
              "RetryDelay": "3", "FunctionTimeout": "10"}
QUIET_POLLS = 3  # consecutive polls that see the queue empty: ESM receives every second or so
POLL_S = 0.5
SETTLE_TIMEOUT_S = 180


def ship_conformance_tasks(build: FsPath) -> None:
    """``deploy(prepare=...)``: the built function's code gets the conformance tasks and an
    app.py that registers only them."""
    code = build / "WorkerFunction"
    package = code / "conformance"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    shutil.copy(FsPath(tasks.__file__), package / "scenario_tasks.py")
    (code / "app.py").write_text(APP)
    shutil.rmtree(code / "__pycache__", ignore_errors=True)  # app.pyc is the examples' app


class _Producer:
    """The stack's Client, noting in the calling thread that it sent something."""

    def __init__(self, client, sent: threading.local):
        self._client, self._sent = client, sent

    def __getattr__(self, name):
        attribute = getattr(self._client, name)
        if not callable(attribute) or name in {"record", "status", "result", "records"}:
            return attribute

        def call(*args, **kwargs):
            value = attribute(*args, **kwargs)
            self._sent.any = True
            return value

        return call


class DeployedStack(paths.Path):
    """One deployed stack, shared by scenarios running at once in threads."""

    name = STACK

    def __init__(self, outputs: dict):
        super().__init__()
        import boto3
        from kindling.producer.client import Client

        self.outputs = outputs
        self.sqs = boto3.client("sqs")
        self.queue_url, self.dlq_url = outputs["QueueUrl"], outputs["DeadLetterQueueUrl"]
        self.table = outputs["ResultsTableName"]
        self._sent = threading.local()
        self._dead: set[str] = set()
        self._dead_lock = threading.Lock()
        self._baseline: set[str] = set()
        self.holding = False  # True: a scenario whose job the function hands back for later
        with paths.codec_of(True):
            self.client = Client(self.queue_url, self.table, payload_bucket=outputs["PayloadBucketName"])

    def producer(self):
        return _Producer(self.client, self._sent)

    def send(self, calls: list) -> list[str]:
        ids = super().send(calls)
        self._sent.any = True
        return ids

    def enqueue_raw(self, body: bytes, signature: str | None = "sign") -> None:
        if signature not in ("sign", None):
            raise paths.NotApplicable("the deployed stack is deployed without signing")
        self.sqs.send_message(QueueUrl=self.queue_url, MessageBody=body.decode())
        self._sent.any = True

    # -- driving ---------------------------------------------------------------------------------

    def purge(self) -> None:
        """Empty the stack's queue and DLQ: what a run left (held jobs, dead letters) is not this run's."""
        for url in (self.queue_url, self.dlq_url):
            self.sqs.purge_queue(QueueUrl=url)

    def depth(self) -> int:
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=[
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed"])["Attributes"]
        return sum(int(v) for v in attributes.values())

    def run_until_settled(self, max_rounds: int = 10) -> int:
        """0 if this thread sent nothing since it last settled (nothing to do, as on every
        path); else waits until the queue is quiet, which other scenarios' work delays too."""
        if not getattr(self._sent, "any", False):
            return 0
        if self.holding:
            self.wait_until_held()
            return 1
        self._sent.any = False
        deadline, quiet = time.monotonic() + SETTLE_TIMEOUT_S, 0
        while quiet < QUIET_POLLS:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: the queue still holds {self.depth()} messages")
            quiet = quiet + 1 if self.depth() == 0 else 0
            time.sleep(POLL_S)
        return 1

    def wait_until_held(self) -> None:
        """Jobs held back for later (a not_before the function hands back, a delay SQS keeps):
        settled once nothing is left to take now (nothing visible, whatever is in flight or delayed)."""
        self._sent.any = False
        deadline, held = time.monotonic() + SETTLE_TIMEOUT_S, 0
        while held < QUIET_POLLS:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: the job was never taken")
            visible = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=[
                "ApproximateNumberOfMessages"])["Attributes"]["ApproximateNumberOfMessages"]
            held = held + 1 if visible == "0" else 0
            time.sleep(POLL_S)

    # -- observing --------------------------------------------------------------------------------

    def begin(self) -> None:
        """A scenario that reads every record starts here: records() leaves out what was
        written before (such scenarios run one at a time)."""
        self._baseline = {r["id"] for r in self._all_records()}

    def store(self):
        from kindling.stores.results import DynamoResultStore

        return DynamoResultStore(self.table)

    def record(self, key: str) -> dict | None:
        return self.client.record(key)

    def _all_records(self) -> list[dict]:
        import boto3
        from kindling.stores.results import from_item

        pages = boto3.client("dynamodb").get_paginator("scan").paginate(TableName=self.table, ConsistentRead=True)
        return [from_item(i) for page in pages for i in page["Items"]]

    def records(self) -> list[dict]:
        return [r for r in self._all_records() if r["id"] not in self._baseline]

    def dead_letters(self) -> list[str]:
        """Every job id moved to the stack's DLQ so far (read once, kept: scenarios share it)."""
        with self._dead_lock:
            while True:
                got = self.sqs.receive_message(QueueUrl=self.dlq_url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                               MessageAttributeNames=["All"]).get("Messages", [])
                if not got:
                    return sorted(self._dead)
                for m in got:
                    attribute = m.get("MessageAttributes", {}).get("kindling_job_id")
                    self._dead.add(attribute["StringValue"] if attribute else paths.job_of(m["Body"]).get("id"))
                    self.sqs.delete_message(QueueUrl=self.dlq_url, ReceiptHandle=m["ReceiptHandle"])
