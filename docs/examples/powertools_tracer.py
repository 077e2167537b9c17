"""Powertools' Tracer in a task: a subsegment per job, annotated with its id, in the
invocation's X-Ray trace (the template's Tracing=Active)."""

from aws_lambda_powertools import Tracer
from kindling import current_job, task

tracer = Tracer()  # POWERTOOLS_SERVICE_NAME


@task(name="images.resize")
@tracer.capture_method
def resize(key: str, width: int = 256) -> str:
    job = current_job()
    tracer.put_annotation(key="job_id", value=job.id)
    tracer.put_annotation(key="attempt", value=job.attempt)
    return f"thumbs/{width}/{key}"
