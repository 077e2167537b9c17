"""The periodic tick: the ``PeriodicTasks`` ticker rule's ``{"kindling": "tick"}`` event, once a
minute, enqueues the declared schedules' due fires (:mod:`kindling.core.schedules`).

Loaded by tick events only; sends through the handler's :class:`kindling.triggers.sqs.port.SqsPort`.
"""

from __future__ import annotations

import os

from kindling.core.errors import KindlingError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kindling.core.registry import Registry
    from kindling.triggers.sqs.port import SqsPort


def run(registry: Registry, port: SqsPort) -> dict:
    """Enqueue the due fires of ``registry``'s schedules, each on its task's queue (the jobs
    queue, ``KINDLING_QUEUE_URL``, or its named queue from ``KINDLING_QUEUES``)."""
    from kindling.core import routing, schedules
    from kindling.core.envelope import encode_job, new_job, now_ms

    queue_url = os.environ.get("KINDLING_QUEUE_URL")
    if not queue_url:
        raise KindlingError("tick: KINDLING_QUEUE_URL is not set (the queue scheduled jobs go to)")
    queues = routing.parse_queues(os.environ.get("KINDLING_QUEUES", ""))
    log = port.runner.log
    sent, failed = [], []
    by_queue: dict[str, list] = {}
    for t, fire in schedules.due(registry, now_ms()):
        job = new_job(t.name, job_id=schedules.tick_job_id(t.name, fire))
        try:
            url = routing.resolve(routing.queue_name(None, t.queue), queue_url, queues)
        except KindlingError as exc:  # a deployment without the task's queue: said at every tick
            failed.append(job.id)
            if log:
                log({"level": "ERROR", "message": "tick not enqueued", "kindling": "tick_failed",
                     "error": str(exc)[:500]})
            continue
        by_queue.setdefault(url, []).append(job)
    client = port.client(None)
    for url, jobs in by_queue.items():
        sign = port.signer(url)
        fifo = url.endswith(".fifo")
        for start in range(0, len(jobs), 10):
            chunk = {job.id: job for job in jobs[start : start + 10]}
            entries = []
            for n, job in enumerate(chunk.values()):
                entry = {"Id": str(n), "MessageBody": encode_job(job).decode()}
                if fifo:  # one group per schedule keeps its fires in order; the id dedupes a doubled tick
                    entry["MessageGroupId"] = job.id.rpartition(".")[0]
                    entry["MessageDeduplicationId"] = job.id
                entries.append(sign(entry))
            try:
                response = client.send_message_batch(QueueUrl=url, Entries=entries)
            except port.errors as exc:  # the next tick sends these fires again (their window overlaps)
                failed += [job.id for job in chunk.values()]
                if log:
                    log({"level": "WARNING", "message": "tick not enqueued", "kindling": "tick_failed",
                         "error": str(exc)[:500]})
                continue
            ids = list(chunk)
            sent += [ids[int(e["Id"])] for e in response.get("Successful", [])]
            failed += [ids[int(e["Id"])] for e in response.get("Failed", [])]
    return {"kindling": "ticked", "enqueued": sent, "failed": failed}
