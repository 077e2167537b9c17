"""Report failed and dead jobs to Sentry: kindling's hooks, in the worker's app.py."""

import os

import sentry_sdk
from kindling import on_dead, on_failure

# In Lambda, Sentry's AwsLambdaIntegration (on by default there) sends what a hook captured
# before the invocation ends.
sentry_sdk.init(dsn=os.environ.get("SENTRY_DSN"), environment=os.environ.get("STAGE", "production"))


@on_failure
def report_failure(job, error):
    """Every run that raised: its exception, with the task's frames, tagged with the job."""
    with sentry_sdk.new_scope() as scope:
        scope.set_tag("kindling.task", job.task)
        scope.set_tag("kindling.job_id", job.id)
        scope.set_context("kindling", {"attempt": job.attempt, "max_attempts": job.max_attempts})
        # Retries of one job group together with its other failures, not per attempt.
        scope.fingerprint = ["kindling", job.task, type(error).__name__]
        sentry_sdk.capture_exception(error)


@on_dead
def report_dead(job, error):
    """A job that will not run again; one that died unrun has no exception to show."""
    if error is None:
        with sentry_sdk.new_scope() as scope:
            scope.set_tag("kindling.task", job.task)
            scope.set_tag("kindling.job_id", job.id)
            sentry_sdk.capture_message(f"{job.task} job {job.id} is dead: delivered too often", level="error")
