"""Faults between a producer and SQS, through toxiproxy: ``Client.enqueue_many`` either sends
every job or raises ``EnqueueError`` naming the ones it did not send; none is lost silently.

The producer's boto3 client reaches LocalStack's SQS through the proxy
(``AWS_ENDPOINT_URL_SQS``); the test reads the queue back straight from LocalStack.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter

import pytest
from chaos_support import record_summary

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

CALLS = 20
PER_CALL = 25  # 500 jobs: three SendMessageBatch calls per call, one call every 0.2 s at least


def test_enqueue_many_through_latency_and_resets(net, monkeypatch):
    import boto3
    from kindling.core.envelope import decode_job
    from kindling.core.errors import EnqueueError
    from kindling.producer.client import Client

    direct = net.aws_client("sqs")
    queue_url = direct.create_queue(QueueName=f"chaos-enqueue-{uuid.uuid4().hex[:6]}")["QueueUrl"]
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", net.sqs_proxied)
    # Few retries (boto3's and kindling's), so that the outages below make some calls give up
    # and the EnqueueError path is taken as well as the retry path.
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    monkeypatch.setenv("AWS_RETRY_MODE", "standard")
    monkeypatch.delenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", raising=False)
    session = boto3.Session(aws_access_key_id=net.aws_env["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=net.aws_env["AWS_SECRET_ACCESS_KEY"],
                            region_name=net.aws_env.get("AWS_DEFAULT_REGION", "us-east-1"))
    client = Client(queue_url=queue_url, table="unused", session=session, max_send_attempts=2)
    assert client.sqs.meta.endpoint_url == net.sqs_proxied  # the producer goes through the proxy

    faults: list[str] = []
    stop = threading.Event()

    def inject():
        """Faults in turn, until the producer is done: toxics for 0.4 s each and an outage
        of 2 s, with 0.3 s between them."""
        turns = [
            ("latency", {"latency": 300, "jitter": 200}),
            ("reset_peer", {"timeout": 0}),  # the reply is reset: SQS has the messages, the producer does not know
            ("outage", {}),  # connections refused
            ("limit_data", {"bytes": 1500, "stream": "upstream"}),  # the request is cut: SQS has nothing
            ("timeout", {"timeout": 300}),  # silence, then the connection closes
        ]
        i = 0
        while not stop.is_set():
            kind, options = turns[i % len(turns)]
            if kind == "outage":
                with net.sqs.disabled():
                    faults.append("outage 2 s")
                    stop.wait(2.0)
            else:
                with net.sqs.toxic(kind, **options):
                    faults.append(f"{kind} {options}")
                    stop.wait(0.4)
            stop.wait(0.3)
            i += 1

    t0 = time.monotonic()
    injector = threading.Thread(target=inject, name="chaos-inject", daemon=True)
    injector.start()
    meant: set[str] = set()
    sent: set[str] = set()
    reported: dict[str, str] = {}
    calls_raised = 0
    problems: list[str] = []
    try:
        for n in range(CALLS):
            calls = [("noop", [], {}) for _ in range(PER_CALL)]
            try:
                handles = client.enqueue_many(calls, concurrency=4)
            except EnqueueError as exc:
                calls_raised += 1
                ids = {h.id for h in exc.sent} | set(exc.failed)
                if len(ids) != PER_CALL or {h.id for h in exc.sent} & set(exc.failed):
                    problems.append(f"call {n}: EnqueueError accounts for {len(ids)} of {PER_CALL} jobs")
                sent |= {h.id for h in exc.sent}
                reported.update(exc.failed)
                meant |= ids
            else:
                if len({h.id for h in handles}) != PER_CALL:
                    problems.append(f"call {n}: {len(handles)} handles for {PER_CALL} jobs")
                sent |= {h.id for h in handles}
                meant |= {h.id for h in handles}
            time.sleep(0.2)
    finally:
        stop.set()
        injector.join(5)
    cleared = time.monotonic()

    queued = Counter()
    empty = 0
    while empty < 3:
        got = direct.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                     VisibilityTimeout=300).get("Messages", [])
        empty = 0 if got else empty + 1
        for m in got:
            queued[decode_job(m["Body"]).id] += 1
    direct.delete_queue(QueueUrl=queue_url)

    lost = sorted(sent - set(queued))
    unknown = sorted(set(queued) - meant)
    duplicates = sum(n - 1 for n in queued.values() if n > 1)
    unsent_but_queued = sorted(set(reported) & set(queued))
    if lost:
        problems.append(f"{len(lost)} jobs reported sent are not in the queue, e.g. {lost[:3]}")
    if unknown:
        problems.append(f"{len(unknown)} queued jobs the producer never made, e.g. {unknown[:3]}")
    summary = {
        "fault": "sqs_enqueue",
        "jobs": CALLS * PER_CALL,
        "faults_injected": len(faults),
        "lost": len(lost),
        "sent": len(sent),
        "reported_unsent": len(reported),
        "reported_unsent_but_queued": len(unsent_but_queued),
        "calls_raised": calls_raised,
        "duplicate_executions": duplicates,  # messages queued twice for one job: at-least-once, counted
        "duplicates_after_kill": 0,
        "drain_s": None,
        "total_s": round(cleared - t0, 2),
        "problems": problems,
    }
    print(f"\n[chaos] sqs_enqueue: jobs={summary['jobs']} faults={len(faults)} lost={len(lost)} "
          f"sent={len(sent)} reported_unsent={len(reported)} (of them queued anyway {len(unsent_but_queued)}) "
          f"calls_raising_EnqueueError={calls_raised} duplicate_messages={duplicates} "
          f"enqueue_time={summary['total_s']}s")
    record_summary(summary)
    assert not problems, "sqs_enqueue:\n  " + "\n  ".join(problems)
