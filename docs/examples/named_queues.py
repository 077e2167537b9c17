from kindling import Client, task
from kindling.client import Call

client = Client()                                  # KINDLING_QUEUES names the queues


@task(queue="reports")                             # every job of this task goes to "reports"
def monthly_report(month: str) -> str: ...


monthly_report.delay("2026-11")                    # -> the reports queue
monthly_report.apply_async(["2026-11"], queue="bulk")   # the send's queue wins over the task's
client.send(Call("tasks.resize", ["a.png"], queue="bulk"))
