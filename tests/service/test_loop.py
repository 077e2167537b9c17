"""The worker outside Lambda (``kindling worker``) against moto: it settles messages as the handler does."""

import uuid

import boto3
from kindling.producer.client import Client
from kindling.triggers.sqs.loop import SqsWorker


def test_the_local_loop_records_every_outcome_and_moves_dead_jobs_itself(table):
    import tasks  # noqa: F401  the example tasks

    sqs = boto3.client("sqs")
    dlq = sqs.create_queue(QueueName=f"dlq-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = sqs.create_queue(QueueName=f"jobs-{uuid.uuid4().hex[:8]}", Attributes={
        "VisibilityTimeout": "1",
        "RedrivePolicy": f'{{"deadLetterTargetArn": "{dlq_arn}", "maxReceiveCount": "10"}}',
    })["QueueUrl"]
    client = Client(queue_url=url, table=table)
    ok = client.enqueue("echo", 1)
    doomed = client.enqueue("always_fails", "no")
    sqs.send_message(QueueUrl=url, MessageBody="{not json")

    # retry delay 0: retries come back after the queue's 1 s visibility timeout
    counts = SqsWorker(url, table, wait=1, log=None, retry_delay=0).run(burst=True, idle_timeout=10)

    assert client.status(ok.id) == "succeeded"
    record = client.record(doomed.id)
    assert record["status"] == "dead" and record["attempts"] == 3  # attempts, not deliveries
    bodies = [m["Body"] for m in sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10)["Messages"]]
    assert len(bodies) == 1 and doomed.id in bodies[0]
    assert counts.get("rejected") == 1


def test_a_dlq_that_refuses_the_dead_job_does_not_stop_the_loop_or_leave_the_batch_unsettled(table, monkeypatch):
    """As the Lambda handler: the refusal is logged, the batch's other messages are settled, and
    the dead job's message stays on the queue to be moved later (its record already says dead)."""
    import tasks  # noqa: F401  the example tasks
    from botocore.exceptions import ClientError

    sqs = boto3.client("sqs")
    dlq = sqs.create_queue(QueueName=f"dlq-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = sqs.create_queue(QueueName=f"jobs-{uuid.uuid4().hex[:8]}", Attributes={
        "VisibilityTimeout": "30",
        "RedrivePolicy": f'{{"deadLetterTargetArn": "{dlq_arn}", "maxReceiveCount": "2"}}',  # one attempt
    })["QueueUrl"]
    client = Client(queue_url=url, table=table)
    ok = client.enqueue("echo", 1)
    doomed = client.enqueue("always_fails", "no")
    lines = []
    worker = SqsWorker(url, table, wait=1, log=lines.append)

    def refuse(**_):
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "SendMessageBatch")

    monkeypatch.setattr(worker.sqs, "send_message_batch", refuse)
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"],
                                   MessageAttributeNames=["All"])["Messages"]
    worker.run_batch(messages)

    assert client.status(ok.id) == "succeeded" and client.status(doomed.id) == "dead"
    assert any(line.get("kindling") == "dlq_send_failed" for line in lines)
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    left = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    assert sum(int(left[n]) for n in names) == 1  # the dead one only: the succeeded one was deleted


def test_the_local_loop_keeps_the_producers_trace_on_the_record(table, monkeypatch):
    import tasks  # noqa: F401  the example tasks

    root = "1-5759e988-bd862e3fe1be46a994272793"
    monkeypatch.setenv("_X_AMZN_TRACE_ID", f"Root={root};Parent=53995c3f42cd8ad8;Sampled=1")
    url = boto3.client("sqs").create_queue(QueueName=f"jobs-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    client = Client(queue_url=url, table=table)
    job = client.enqueue("echo", 1)
    monkeypatch.delenv("_X_AMZN_TRACE_ID")
    SqsWorker(url, table, wait=1, log=None).run(burst=True, idle_timeout=5)
    assert client.record(job.id)["trace_id"] == root


def test_a_refused_visibility_change_does_not_stop_the_loop_or_leave_the_batch_unsettled(table, monkeypatch):
    """As the Lambda handler: bringing a failed job back early is best effort (it returns after the
    queue's visibility timeout anyway), so a refusal is logged and the rest of the batch is settled."""
    import tasks  # noqa: F401  the example tasks
    from botocore.exceptions import ClientError

    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=f"jobs-{uuid.uuid4().hex[:8]}", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    client = Client(queue_url=url, table=table)
    ok = client.enqueue("echo", 1)
    failing = client.enqueue("always_fails", "no")
    lines = []
    worker = SqsWorker(url, table, wait=1, log=lines.append, retry_delay=5)

    def refuse(**_):
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "ChangeMessageVisibilityBatch")

    monkeypatch.setattr(worker.sqs, "change_message_visibility_batch", refuse)
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"],
                                   MessageAttributeNames=["All"])["Messages"]
    worker.run_batch(messages)

    assert client.status(ok.id) == "succeeded" and client.status(failing.id) == "failed"
    assert [line["queue"] for line in lines if line.get("kindling") == "visibility_not_changed"] == [worker.queue_arn]
    assert worker.counts == {"succeeded": 1, "failed": 1}
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    left = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    assert sum(int(left[n]) for n in names) == 1  # the failed one only: the succeeded one was deleted


def test_the_local_loop_refuses_a_due_time_past_its_queue_s_own_retention(table):
    """The loop reads MessageRetentionPeriod: on a queue that keeps messages an hour, a job due
    in two hours is recorded rejected at once (its message would be gone first); one due in
    half an hour waits, scheduled."""
    import tasks  # noqa: F401  the example tasks
    from kindling.core.envelope import encode_job, new_job, now_ms

    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=f"jobs-{uuid.uuid4().hex[:8]}",
                           Attributes={"MessageRetentionPeriod": "3600"})["QueueUrl"]
    far, near = (new_job("echo", [1], not_before=now_ms() + ms) for ms in (7_200_000, 1_800_000))
    for job in (far, near):
        sqs.send_message(QueueUrl=url, MessageBody=encode_job(job).decode())
    worker = SqsWorker(url, table, wait=0, log=None)
    assert worker.runner.retention_s == 3600
    worker.run(burst=True, idle_timeout=1)
    client = Client(queue_url=url, table=table)
    record = client.record(far.id)
    assert record["status"] == "rejected" and "retention (3600 s)" in record["error"]["message"]
    assert client.status(near.id) == "scheduled"
