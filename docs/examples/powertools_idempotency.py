"""Powertools' Idempotency in a task: a payment taken once, however often its job runs.

The config is given the invocation's Lambda context, so an interrupted call's record
expires with its invocation (without it, Powertools warns on every call).
"""

import os

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from kindling import current_job, task

persistence = DynamoDBPersistenceLayer(table_name=os.environ["IDEMPOTENCY_TABLE"])
config = IdempotencyConfig(event_key_jmespath="order_id", expires_after_seconds=24 * 3600)


@idempotent_function(data_keyword_argument="payment", persistence_store=persistence, config=config)
def take_payment(payment: dict) -> dict:
    return {"order_id": payment["order_id"], "charged": payment["cents"]}


@task(name="payments.take")
def take(order_id: str, cents: int) -> dict:
    config.register_lambda_context(current_job().lambda_context)
    return take_payment(payment={"order_id": order_id, "cents": cents})
