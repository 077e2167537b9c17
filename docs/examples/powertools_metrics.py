"""Powertools' Metrics in a task: a business metric per job, flushed as the job ends."""

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from kindling import current_job, task

metrics = Metrics()  # POWERTOOLS_METRICS_NAMESPACE and POWERTOOLS_SERVICE_NAME, as kindling's


@task(name="orders.charge")
def charge(order_id: str, cents: int) -> int:
    try:
        metrics.add_dimension(name="task", value=current_job().task)
        metrics.add_metric(name="OrdersCharged", unit=MetricUnit.Count, value=1)
        metrics.add_metric(name="Revenue", unit=MetricUnit.Count, value=cents)
        return cents
    finally:
        # No handler decorator runs around a task: flush per job (one EMF line), or the
        # metrics would wait for the next job of the same process, or be lost.
        metrics.flush_metrics()
