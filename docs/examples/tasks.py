# tasks.py (functions/worker/tasks.py in a project)
from kindling import current_job, task


@task                                   # name defaults to "tasks.resize"
def resize(key: str, width: int = 256) -> str:
    ...
    return f"thumbs/{key}"


@task(name="emails.send", timeout=30, max_attempts=5)
async def send_email(to: str, body: str) -> None:
    ...                                 # async tasks of a batch run concurrently


@task(skip_succeeded=False)             # run again even if a duplicate arrives
def count_visit(page: str) -> None:
    print(current_job().attempt)        # id, task, attempt, max_attempts, deadline, lambda_context, headers
