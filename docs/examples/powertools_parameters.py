"""Powertools' Parameters in a task: a setting from SSM, cached across jobs and invocations."""

from aws_lambda_powertools.utilities import parameters
from kindling import task


@task(name="emails.send")
def send(to: str) -> str:
    sender = parameters.get_parameter("/shop/email/sender", max_age=300)  # cached for 5 minutes
    return f"{sender} -> {to}"
