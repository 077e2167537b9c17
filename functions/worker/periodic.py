"""Example periodic task, registered when the stack's PeriodicTasks parameter is "true".

Declaring a schedule loads :mod:`kindling.core.schedules` at import, so app.py imports this
module only when the ticker rule exists (``KINDLING_PERIODIC_TASKS``): a worker without
periodic tasks keeps the plain cold path.
"""

from kindling import current_job, task


@task(name="heartbeat", schedule="rate(1 minute)")
def heartbeat() -> int:
    """Runs once a minute; returns its fire time (epoch ms), the end of its job id."""
    return int(current_job().id.rpartition(".")[2])
