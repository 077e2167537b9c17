"""A task running in Lambda reaches its invocation's context through current_job(), as
Powertools' utilities need it (Idempotency's register_lambda_context)."""

from kindling import current_job
from kindling.core.envelope import encode_job, new_job
from kindling.core.registry import Registry
from kindling.engine.runner import Delivery, Runner
from kindling.stores.memory import MemoryResultStore
from kindling.triggers.sqs.handler import LambdaWorker


class Context:
    function_name = "kindling-worker"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:kindling-worker"
    aws_request_id = "req-1"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def sqs_event(*jobs) -> dict:
    return {"Records": [{"messageId": f"m{i}", "receiptHandle": "rh", "body": encode_job(job).decode(),
                         "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
                         "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:jobs"}
                        for i, job in enumerate(jobs)]}


def test_in_lambda_current_job_has_the_invocations_context():
    seen = []
    reg = Registry()
    reg.task(name="look")(lambda: seen.append(current_job().lambda_context))
    worker = LambdaWorker(reg, store=MemoryResultStore(), log=None, metrics=False)
    first, second = Context(), Context()
    assert worker(sqs_event(new_job("look"), new_job("look")), first) == {"batchItemFailures": []}
    assert worker(sqs_event(new_job("look")), second) == {"batchItemFailures": []}
    assert seen[0] is first and seen[1] is first and seen[2] is second


def test_hooks_get_the_invocations_context_too():
    seen = []
    reg = Registry()
    reg.task(name="ok", on_success=lambda job, error: seen.append(job.lambda_context))(lambda: 1)
    context = Context()
    LambdaWorker(reg, store=MemoryResultStore(), log=None, metrics=False)(sqs_event(new_job("ok")), context)
    assert seen == [context]


def test_outside_lambda_it_is_none():
    seen = []
    reg = Registry()
    reg.task(name="look")(lambda: seen.append(current_job().lambda_context))
    Runner(reg, MemoryResultStore(), log=None, metrics=False).run(
        [Delivery("m", encode_job(new_job("look")).decode(), 1)])
    assert seen == [None]
