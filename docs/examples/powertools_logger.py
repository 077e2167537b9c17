"""Powertools' Logger in a task: each line carries the job's id, task and attempt."""

from aws_lambda_powertools import Logger
from kindling import current_job, task

logger = Logger()  # POWERTOOLS_SERVICE_NAME: the service of kindling's own lines too


@task(name="orders.ship")
def ship(order_id: str) -> str:
    job = current_job()
    with logger.append_context_keys(job_id=job.id, task=job.task, attempt=job.attempt):
        logger.info("shipping", extra={"order_id": order_id})
        return f"shipped {order_id}"
