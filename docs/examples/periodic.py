from kindling import task


@task(schedule="rate(5 minutes)")          # or "cron(0 3 * * ? *)": 03:00 UTC every day
def purge_expired() -> None: ...
