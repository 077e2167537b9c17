from kindling import group, task
from kindling.errors import JobFailed, ResultNotRecorded


@task(results="failures")               # no record for a success: no write, no duplicate check
def track(event: dict) -> None:
    ...


@task(ignore_result=True)               # Celery's spelling: results="none"
def ping() -> None:
    ...


@task(results="none", max_attempts=1)
def flaky() -> None:
    raise ConnectionError("refused")


handle = track.delay({"page": "/"})
try:
    handle.result()                     # raised at once: no wait could see the success
except ResultNotRecorded as exc:
    print(exc)

try:
    flaky.delay().result()              # dead and rejected are recorded under every policy
except JobFailed as exc:
    print(exc)

try:
    group([track.s({"page": "/a"})])    # a chord is built from its members' records
except ValueError as exc:
    print(exc)
