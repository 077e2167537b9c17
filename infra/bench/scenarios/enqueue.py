"""``enqueue``: the enqueue rate of each producer, N noop jobs, round-robin.

Celery (``delay()`` one at a time and ``group().apply_async()``), kindling's StreamProducer
(``enqueue_many`` and one at a time), kindling's Client on SQS against SendMessageBatch
alone and, with the peers' virtualenv, arq and dramatiq one at a time.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import stats
from harness import PEERS_BIN, log, new_job, peer_enqueue

if TYPE_CHECKING:
    from services import Services


def scenario(ns, svc: Services, layer: str, env: dict, results: dict) -> None:
    import celery_app
    from celery import group
    from kindling.producer.client import Client
    from kindling.valkey import StreamProducer

    n = ns.n
    producer = StreamProducer(svc.valkey_url)
    client = Client(queue_url=svc.queue_url, table=svc.table)
    celery_app.noop.delay()  # connect first, outside the timing

    import boto3

    sqs = boto3.client("sqs")

    def sqs_batch():
        client.enqueue_many(noops * ns.n_sqs)

    def sqs_alone():
        """What the SQS endpoint accepts: ready-made bodies, SendMessageBatch of 10, 8 threads."""
        from concurrent.futures import ThreadPoolExecutor

        body = json.dumps(new_job())
        entries = [{"Id": str(i), "MessageBody": body} for i in range(10)]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: sqs.send_message_batch(QueueUrl=client.queue_url, Entries=entries),
                          range(ns.n_sqs // 10)))

    def t(fn, count: int = n) -> float:
        if fn in (sqs_batch, sqs_alone):  # a fresh queue each time: an SQS emulator may slow down as a queue grows
            client.queue_url = sqs.create_queue(QueueName=f"kindling-bench-{time.time_ns()}")["QueueUrl"]
        svc.valkey(0).flushall()
        t0 = time.perf_counter()
        fn()
        return count / (time.perf_counter() - t0)

    noops = [("noop", [], {})]
    where = "LocalStack" if svc.localstack else "moto"
    systems = {
        "Celery delay() one at a time": lambda: t(lambda: [celery_app.noop.delay() for _ in range(n)]),
        "Celery group().apply_async()": lambda: t(lambda: group(celery_app.noop.s() for _ in range(n)).apply_async()),
        "kindling StreamProducer.enqueue_many (Valkey)": lambda: t(lambda: producer.enqueue_many(noops * n)),
        "kindling StreamProducer.enqueue one at a time":
            lambda: t(lambda: [producer.enqueue("noop") for _ in range(n)]),
        f"kindling Client.enqueue_many (SQS on {where})":
            lambda: t(sqs_batch, ns.n_sqs),
        f"SendMessageBatch alone (boto3, 8 threads, {where})": lambda: t(sqs_alone, ns.n_sqs // 10 * 10),
    }
    if (PEERS_BIN / "python").exists():
        def peer(kind: str) -> float:
            svc.valkey(0).flushall()
            return n / peer_enqueue(kind, env, "noop", n, timed=True)[1]

        systems["arq enqueue_job() one at a time"] = lambda: peer("arq")
        systems["dramatiq send() one at a time"] = lambda: peer("dramatiq")
    samples: dict[str, list[float]] = {k: [] for k in systems}
    for i in range(ns.enq_reps):
        for name, fn in systems.items():
            samples[name].append(fn())
        log(f"enqueue {i + 1}/{ns.enq_reps} (n={n}): " + ", ".join(f"{v[-1]:.0f}/s" for v in samples.values()))
    results["enqueue"] = {"unit": "jobs/s", "baseline": "Celery delay() one at a time", "samples": samples,
                          "n": n, "n_sqs": ns.n_sqs}


def report(c: dict) -> str:
    return (stats.markdown_table(f"Enqueue rate ({c['n']} noop jobs; {c['n_sqs']} for SQS)", c["unit"],
                                   stats.table_rows(c["samples"], c["baseline"], higher_is_better=True),
                                   c["baseline"]))


def ratio_lines(c: dict) -> list[str]:
    lines = []
    med = lambda xs: stats.summary(xs)["median"]  # noqa: E731
    s = c["samples"]
    group = med(s["Celery group().apply_async()"])
    lines.append(stats.verdict("enqueue_many on Valkey / Celery group().apply_async()",
                               stats.ratio(med(s["kindling StreamProducer.enqueue_many (Valkey)"]), group), 20,
                               at_most=False))
    sqs_key = next(k for k in s if k.startswith("kindling Client.enqueue_many (SQS"))
    lines.append(stats.verdict(f"{sqs_key} / Celery group().apply_async() on Valkey",
                               stats.ratio(med(s[sqs_key]), group), 5, at_most=False))
    one = [k for k in ("Celery delay() one at a time", "arq enqueue_job() one at a time",
                       "dramatiq send() one at a time") if k in s]
    best = max(one, key=lambda k: med(s[k]))
    ours_one = med(s["kindling StreamProducer.enqueue one at a time"])
    lines.append(f"single-call enqueue: kindling StreamProducer.enqueue / best peer ({best}) = "
                 f"{stats.fmt_ratio(stats.ratio(ours_one, med(s[best])))}")
    base = med(s[c["baseline"]])
    for k, v in s.items():
        if k != c["baseline"]:
            lines.append(f"enqueue: {k} / Celery delay() = {stats.fmt_ratio(stats.ratio(med(v), base))}")
    return lines
