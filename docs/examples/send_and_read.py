from kindling import Client, JobFailed
from kindling.client import Call

client = Client()   # KINDLING_QUEUE_URL and KINDLING_TABLE from the environment
job = client.enqueue("emails.send", "ada@example.com", body="hi")
try:
    print(job.result(timeout=30))        # waits through retries; consistent reads
except JobFailed as exc:                 # dead or rejected: the recorded error
    print(exc.error["type"], exc.error["message"])

handles = client.enqueue_many(
    [("tasks.resize", ["a.png"], {}), Call("tasks.resize", ["b.png"], delay=60, job_id="b-png")]
)
