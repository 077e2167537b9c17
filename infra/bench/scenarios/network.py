"""The network the cloud has: Valkey and DynamoDB one hop away, not on loopback.

Every other scenario runs on loopback, where a round trip costs microseconds. Here Valkey and
the AWS endpoint (LocalStack, DynamoDB) sit behind Toxiproxy (infra/toxiproxy, the chaos
suite's) with a ``latency`` toxic of 1 ms on each direction, as ElastiCache and DynamoDB are
from a Lambda function or a container in the same region; a second proxy to each without
the toxic is the control, so the proxy's own cost is not counted as the network's. The
round trip through each (PING; DynamoDB ListTables) is measured and reported.

Parts, each interleaved (one of each system per repetition):

- processing: 3,000 no-ops and 3,000 10 ms sleeps queued before one worker process starts,
  at concurrency 200: kindling's StreamWorker (through both proxies), Celery (threads),
  arq and dramatiq (through the latency proxy); spawn to last result;
- enqueue through the latency proxy: one call per job, one after another (kindling,
  Celery, arq, dramatiq), and 1,000 concurrent requests each enqueueing one job: kindling's
  ``await producer.aenqueue`` against Celery's ``delay()`` from asgiref's ``sync_to_async``;
- DynamoDB through both proxies: the warm SQS handler's rate (events of 10, one
  connection) and the cold critical path (first batch against floor + one round trip).

Targets: kindling's processing at least 30x Celery's; kindling with the latency at least
0.9 of kindling through the proxy without it; the async producer at least 10x Celery's
``delay()`` from ``sync_to_async``. A peer that fails under latency with its defaults is
recorded with its error, and run again with the setting that fixes it.

The report pieces at the end are pure (tests/tooling/test_bench_network.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import harness as h
import stats

HERE = Path(__file__).resolve().parents[1]  # infra/bench
ROOT = HERE.parents[1]
LATENCY_MS = 1  # each way
CONCURRENCY = 200
N_PROCESS = 3000
# The latency kept is judged on runs ten times longer: 3,000 no-ops take kindling about
# 0.16 s, of which the process's start (some 70 ms, the same through both proxies) pulls the
# ratio towards 1, the start's own round trips through the proxy (its connections, the
# group, the first blocking read and check: some five, 12 ms with the latency) away from
# it, and a 5 ms poll of the results is 3% of the run. On 30,000 they weigh a tenth as much:
# what is left is the worker's rate.
N_KEPT = 30_000
N_ASYNC = 1000
DRAIN_TIMEOUT_S = 180  # a peer stuck under latency fails its run after this, not after run.py's 10 minutes
WORKLOADS = {"noop": ("noop", []), "sleep 10 ms": ("sleep", [10])}

KINDLING = "kindling StreamWorker c=200"
KINDLING_ZERO = "kindling StreamWorker c=200, proxy without latency"
CELERY = "Celery threads c=200"
ARQ = "arq max_jobs=200"
DRAMATIQ = "dramatiq 1 process x 200 threads (defaults)"
DRAMATIQ_FIXED = "dramatiq 1 process x 200 threads, {fix}"

ENQ_KINDLING = "kindling StreamProducer.enqueue, one call per job"
ENQ_CELERY = "Celery delay(), one call per job"
ENQ_ARQ = "arq enqueue_job(), one call per job"
ENQ_DRAMATIQ = "dramatiq send(), one call per job"
ENQ_AKINDLING = "kindling await producer.aenqueue, 1,000 concurrent requests"
ENQ_ASQS = "kindling await client.aenqueue to SQS (LocalStack, 1 ms each way), 1,000 concurrent requests"
ENQ_ACELERY = "Celery delay() from sync_to_async, 1,000 concurrent requests"
ENQ_ACELERY_THREADS = "Celery delay() from sync_to_async(thread_sensitive=False), 1,000 concurrent requests"

DDB_LAT = "kindling SQS handler, warm, events of 10, 1 ms each way"
DDB_ZERO = "kindling SQS handler, warm, events of 10, proxy without latency"
CP_KINDLING = "kindling first batch (read + write)"
CP_FLOOR = "floor (bare -S + 1 PutItem)"
CP_RTT = "one round trip (BatchGetItem, open connection)"

TARGET_PROCESSING = 30.0
TARGET_LATENCY_KEPT = 0.9
TARGET_ASYNC = 10.0


# ----------------------------------------------------------------------------- the proxies

class Proxies:
    """A private toxiproxy server (infra/toxiproxy/ctl) and its four proxies: Valkey and the
    AWS endpoint, each with the latency toxic (``lat``) and without (``zero``)."""

    def __init__(self, svc, log):
        sys.path.insert(0, str(ROOT / "tests/chaos"))
        from services import free_port
        from toxiproxy import Toxiproxy

        self.ctl = str(ROOT / "infra/toxiproxy/ctl")
        self.env = dict(os.environ, KINDLING_TOXIPROXY_STATE=str(svc.tmp / "toxiproxy"))
        self.port = free_port()
        subprocess.run([self.ctl, "install"], check=True, env=self.env, stdout=subprocess.DEVNULL, timeout=900)
        subprocess.run([self.ctl, "start", str(self.port)], check=True, env=self.env, stdout=subprocess.DEVNULL,
                       timeout=60)
        self.api = Toxiproxy(f"http://127.0.0.1:{self.port}")
        valkey_port = int(svc.valkey_url.rsplit(":", 1)[1].split("/")[0])
        aws = svc.endpoint.split("://", 1)[1].rstrip("/")
        self.urls: dict[str, str] = {}
        for name, upstream, scheme in (("valkey", f"127.0.0.1:{valkey_port}", "redis"), ("aws", aws, "http")):
            for kind in ("lat", "zero"):
                proxy = self.api.create(f"bench-{name}-{kind}", f"127.0.0.1:{free_port()}", upstream)
                if kind == "lat":
                    proxy.latency(LATENCY_MS, stream="downstream")
                    proxy.latency(LATENCY_MS, stream="upstream")
                tail = "/0" if scheme == "redis" else ""
                self.urls[f"{name}-{kind}"] = f"{scheme}://{proxy.listen}{tail}"
        log(f"network: toxiproxy on {self.api.url}, {LATENCY_MS} ms each way: " +
            ", ".join(f"{k} {v}" for k, v in self.urls.items()))

    def close(self) -> None:
        subprocess.run([self.ctl, "stop", str(self.port)], env=self.env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)


def valkey_rtt_ms(url: str, n: int = 300) -> float:
    """The median PING round trip on an open connection (kindling's client), ms."""
    from kindling.valkey import connect

    client = connect(url)
    client.ping()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        client.ping()
        times.append((time.perf_counter() - t0) * 1000)
    return stats.summary(times)["median"]


def aws_rtt_ms(endpoint: str, n: int = 50) -> float:
    """The median DynamoDB ListTables round trip on an open connection (kindling's client), ms."""
    from kindling.drivers.aws import JsonClient

    saved = os.environ.get("AWS_ENDPOINT_URL")
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    try:
        client = JsonClient("dynamodb", "DynamoDB_20120810")
        client.call("ListTables", {"Limit": 1})
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            client.call("ListTables", {"Limit": 1})
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        if saved is None:
            os.environ.pop("AWS_ENDPOINT_URL", None)
        else:
            os.environ["AWS_ENDPOINT_URL"] = saved
    return stats.summary(times)["median"]


# ----------------------------------------------------------------------------- the scenario

class _Via:
    """``svc`` as the workers see it: Valkey at ``url`` (a proxy); the harness's own reads
    (``valkey()``: counting results, flushing) stay direct."""

    def __init__(self, svc, url: str):
        self._svc, self.valkey_url = svc, url

    def __getattr__(self, name):
        return getattr(self._svc, name)


def scenario(ns, svc, layer: str, env: dict, results: dict) -> None:
    """``h`` is the harness (harness.py): its drain, peer helpers, cold_child, span_of..."""
    proxies = Proxies(svc, h.log)
    try:
        out: dict = {"latency_ms_each_way": LATENCY_MS, "concurrency": CONCURRENCY}
        out["rtt_ms"] = {
            "Valkey direct": valkey_rtt_ms(svc.valkey_url),
            "Valkey through the proxy, no latency": valkey_rtt_ms(proxies.urls["valkey-zero"]),
            f"Valkey through the proxy, {LATENCY_MS} ms each way": valkey_rtt_ms(proxies.urls["valkey-lat"]),
            "DynamoDB direct": aws_rtt_ms(svc.endpoint),
            "DynamoDB through the proxy, no latency": aws_rtt_ms(proxies.urls["aws-zero"]),
            f"DynamoDB through the proxy, {LATENCY_MS} ms each way": aws_rtt_ms(proxies.urls["aws-lat"]),
        }
        h.log("network round trips: " + ", ".join(f"{k} {v:.2f} ms" for k, v in out["rtt_ms"].items()))
        results["network"] = out
        out["processing"] = processing(ns, svc, env, proxies)
        out["enqueue"] = enqueue(ns, svc, env, proxies)
        out["dynamodb"] = dynamodb(ns, svc, layer, env, proxies)
    finally:
        proxies.close()


def processing(ns, svc, env: dict, proxies: Proxies) -> dict:
    lat, zero = proxies.urls["valkey-lat"], proxies.urls["valkey-zero"]
    via = {url: _Via(svc, url) for url in (lat, zero)}
    envs = {url: dict(env, KINDLING_BENCH_VALKEY=url) for url in (lat, zero)}
    py = h.PY

    def kindling(url: str):
        def run(task: str, args: list, n: int) -> dict:
            from kindling.valkey import StreamProducer

            svc.valkey(0).flushall()
            StreamProducer(svc.valkey_url, reader=False).enqueue_many([(task, args, {})] * n)
            cmd = [py, str(HERE / "systems/kindling_valkey.py"), "--url", url, "--concurrency", str(CONCURRENCY),
                   "--threads", str(CONCURRENCY) if task == "sleep" else "0", "--batch", "500"]
            return h.drain(via[url], lambda: [h.children.popen(cmd, env=envs[url], stdout=subprocess.DEVNULL)],
                           n, "kindling-result:")
        return run

    def celery(task: str, args: list, n: int) -> dict:
        import celery_app
        from celery import group

        svc.valkey(0).flushall()
        group(celery_app.app.signature(task, args=args) for _ in range(n)).apply_async()  # direct, untimed
        cmd = h.celery_cmd("threads", CONCURRENCY)
        return h.drain(via[lat], lambda: [h.children.popen(cmd, env=envs[lat], cwd=HERE / "systems",
                                                           stdout=subprocess.DEVNULL)], n, "celery-task-meta-")

    def peer(kind: str, extra: dict | None = None):
        def run(task: str, args: list, n: int) -> dict:
            r0 = svc.valkey(0)
            r0.flushall()
            h.peer_enqueue(kind, env, task, n, args)  # direct, untimed
            penv = dict(envs[lat], **(extra or {}))
            if kind == "arq":
                cmd, penv["ARQ_MAX_JOBS"] = h.peer_cmd("arq", quiet=True), str(CONCURRENCY)
                count, prefix, db = (lambda: n - r0.zcard("arq:queue")), "arq:result:", 0
            else:
                cmd, count, prefix, db = h.peer_cmd("dramatiq", CONCURRENCY, 1), None, "", 1
            return h.drain(via[lat], lambda: [h.children.popen(cmd, env=penv, cwd=HERE / "systems",
                                                               stdout=subprocess.DEVNULL, start_new_session=True)],
                           n, prefix, count=count, db=db, stop_proc=h.kill_group, timeout=DRAIN_TIMEOUT_S)
        return run

    systems = {KINDLING: kindling(lat), KINDLING_ZERO: kindling(zero), CELERY: celery}
    peers = (h.PEERS_BIN / "python").exists()
    if peers:
        systems[ARQ] = peer("arq")
        systems[DRAMATIQ] = peer("dramatiq")
    else:
        h.log(f"network: arq and dramatiq SKIPPED: no {h.PEERS_BIN / 'python'} (make bench installs them)")
    failures: dict[str, str] = {}
    fix_name = DRAMATIQ_FIXED.format(fix=DRAMATIQ_FIX_LABEL)
    n = ns.n_net
    out: dict = {"n": n, "workloads": {}, "failures": failures}
    for workload, (task, args) in WORKLOADS.items():
        runs: dict[str, list[dict]] = {k: [] for k in systems}
        for i in range(ns.tp_reps):
            for name, fn in h.rotated(list(systems.items()), i):
                if name in failures:
                    continue
                try:
                    runs[name].append(fn(task, args, n))
                except RuntimeError as exc:
                    if name != DRAMATIQ:
                        raise
                    # a peer that fails under latency with its defaults: recorded, and run fixed
                    failures[name] = f"{workload}: {str(exc)[-600:]}"
                    h.log(f"network: {name} FAILED: {failures[name][:300]}; running it with {DRAMATIQ_FIX_LABEL}")
                    systems[fix_name] = peer("dramatiq", DRAMATIQ_FIX_ENV)
                    runs[fix_name] = [systems[fix_name](task, args, n)]
            h.log(f"network {workload} {i + 1}/{ns.tp_reps}: " + ", ".join(
                f"{k} {v[-1]['jobs_per_s']:.0f}/s" for k, v in runs.items() if v))
        out["workloads"][workload] = {k: v for k, v in runs.items() if v}
    # The latency kept: kindling alone, through both proxies, on N_KEPT jobs (see N_KEPT).
    kept_n = max(n, ns.n_kept)
    out["kept"] = {"n": kept_n, "workloads": {}}
    pair = {KINDLING: systems[KINDLING], KINDLING_ZERO: systems[KINDLING_ZERO]}
    for workload, (task, args) in WORKLOADS.items():
        runs = {k: [] for k in pair}
        for i in range(ns.tp_reps):
            for name, fn in h.rotated(list(pair.items()), i):
                runs[name].append(fn(task, args, kept_n))
            h.log(f"network kept {workload} {i + 1}/{ns.tp_reps} (n={kept_n}): " + ", ".join(
                f"{k} {v[-1]['jobs_per_s']:.0f}/s" for k, v in runs.items()))
        out["kept"]["workloads"][workload] = runs
    return out


# dramatiq's broker and result backend each keep a redis-py pool; its worker threads each hold
# a connection. This is the setting the fixed run passes (dramatiq_app.py reads it).
DRAMATIQ_FIX_ENV = {"DRAMATIQ_BENCH_MAX_CONNECTIONS": "400"}
DRAMATIQ_FIX_LABEL = "BlockingConnectionPool(max_connections=400)"


def enqueue(ns, svc, env: dict, proxies: Proxies) -> dict:
    lat = proxies.urls["valkey-lat"]
    penv = dict(env, KINDLING_BENCH_VALKEY=lat)
    n = N_ASYNC

    def child(mode: str, count: int, extra: dict | None = None) -> float:
        svc.valkey(0).flushall()
        done = subprocess.run([h.PY, str(HERE / "systems/network_enqueue.py"), mode, str(count)],
                              env=dict(penv, **(extra or {})),
                              cwd=HERE / "systems", capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or "ELAPSED" not in done.stdout:
            raise RuntimeError(f"network_enqueue {mode} failed ({done.returncode}): {done.stderr[-2000:]}")
        return count / float(done.stdout.split("ELAPSED", 1)[1].split()[0])

    def sqs_env() -> dict:
        """A fresh queue each time (an emulator may slow down as a queue grows), reached through the proxy."""
        import boto3

        url = boto3.client("sqs").create_queue(QueueName=f"kindling-bench-{time.time_ns()}")["QueueUrl"]
        return {"KINDLING_QUEUE_URL": url, "AWS_ENDPOINT_URL": proxies.urls["aws-lat"]}

    def peer(kind: str) -> float:
        svc.valkey(0).flushall()
        return n / h.peer_enqueue(kind, penv, "noop", n, timed=True)[1]

    systems = {
        ENQ_CELERY: lambda: child("celery-delay", n),
        ENQ_KINDLING: lambda: child("kindling-enqueue", n),
        ENQ_ACELERY: lambda: child("celery-sync-to-async", n),
        ENQ_ACELERY_THREADS: lambda: child("celery-sync-to-async-threads", n),
        ENQ_AKINDLING: lambda: child("kindling-aenqueue", n),
        ENQ_ASQS: lambda: child("kindling-sqs-aenqueue", n, sqs_env()),
    }
    if (h.PEERS_BIN / "python").exists():
        systems[ENQ_ARQ] = lambda: peer("arq")
        systems[ENQ_DRAMATIQ] = lambda: peer("dramatiq")
    samples: dict[str, list[float]] = {k: [] for k in systems}
    for i in range(ns.enq_reps):
        for name, fn in h.rotated(list(systems.items()), i):
            samples[name].append(fn())
        h.log(f"network enqueue {i + 1}/{ns.enq_reps} (n={n}): " + ", ".join(
            f"{k.split(',')[0]} {v[-1]:.0f}/s" for k, v in samples.items()))
    return {"unit": "jobs/s", "n": n, "samples": samples}


def dynamodb(ns, svc, layer: str, env: dict, proxies: Proxies) -> dict:
    from cold_child import floor_cmd, kindling_cmd, round_trip_cmd

    n = ns.n_ddb
    envs = {"lat": dict(env, AWS_ENDPOINT_URL=proxies.urls["aws-lat"]),
            "zero": dict(env, AWS_ENDPOINT_URL=proxies.urls["aws-zero"])}
    child = [h.PY, "-S", str(HERE / "systems/ddb_child.py")]

    def handler(kind: str):
        def run() -> float:
            table = h.fresh_table(svc)
            seconds, _ = h.span_of([*child, "handler", "--layer", layer, "--table", table, "--n", str(n),
                                    "--batch", "10"], envs[kind])
            stored = h.count_and_drop(table)
            if stored != n + 1:
                raise RuntimeError(f"network dynamodb: {stored} records, expected {n + 1}")
            return n / seconds
        return run

    rates = {DDB_LAT: handler("lat"), DDB_ZERO: handler("zero")}
    rate_samples: dict[str, list[float]] = {k: [] for k in rates}
    for i in range(ns.tp_reps):
        for name, fn in h.rotated(list(rates.items()), i):
            rate_samples[name].append(fn())
        h.log(f"network dynamodb {i + 1}/{ns.tp_reps} (n={n}): " + ", ".join(
            f"{k.split(', ')[-1]} {v[-1]:.0f}/s" for k, v in rate_samples.items()))

    py = h.PY

    def round_trip(e: dict) -> float:
        done = subprocess.run(round_trip_cmd(py, layer), env=dict(e, KINDLING_BENCH_EVENT=repr(h.sqs_event(
            h.new_job()))), capture_output=True, text=True, timeout=300)
        if done.returncode != 0 or "RTT" not in done.stdout:
            raise RuntimeError(f"round trip child failed ({done.returncode}): {done.stderr[-2000:]}")
        return float(done.stdout.split("RTT", 1)[1].split()[0])

    critical: dict = {}
    for kind, label in (("lat", f"{LATENCY_MS} ms each way"), ("zero", "proxy without latency")):
        e = envs[kind]
        critical[f"{CP_KINDLING}, {label}"] = lambda e=e: h.cold_child(kindling_cmd(py, layer), e, svc, h.new_job())
        critical[f"{CP_FLOOR}, {label}"] = lambda e=e: h.cold_child(floor_cmd(py, layer), e, svc, h.new_job())
        critical[f"{CP_RTT}, {label}"] = lambda e=e: round_trip(e)
    cp_samples: dict[str, list[float]] = {k: [] for k in critical}
    for fn in critical.values():  # untimed warm-up
        fn()
    for i in range(ns.critical_reps):
        for name, fn in critical.items():
            cp_samples[name].append(fn())
        h.log(f"network critical {i + 1}/{ns.critical_reps}: " + "; ".join(critical_lines(cp_samples)))
    return {"n": n, "rates": rate_samples, "critical": cp_samples}


# ----------------------------------------------------------------------------- report (pure)

def _median(xs) -> float | None:
    return stats.summary(xs)["median"]


def critical_lines(samples: dict[str, list[float]]) -> list[str]:
    lines = []
    for label in (f"{LATENCY_MS} ms each way", "proxy without latency"):
        k, f, r = (_median(samples.get(f"{name}, {label}", [])) for name in (CP_KINDLING, CP_FLOOR, CP_RTT))
        bound = None if f is None or r is None else f + r
        lines.append(f"critical path, {label}: kindling first batch {stats.fmt(k)} ms / (floor {stats.fmt(f)} "
                     f"+ one round trip {stats.fmt(r, 2)}) = {stats.fmt_ratio(stats.ratio(k, bound))}")
    return lines


def rates(runs: dict[str, list[dict]]) -> dict[str, list[float]]:
    return {k: [r["jobs_per_s"] for r in v] for k, v in runs.items()}


def ratios(c: dict) -> dict:
    """The scenario's ratios: per workload kindling / Celery and kindling with latency /
    without; the async producer / Celery's sync_to_async; the handler with latency / without."""
    out: dict = {"processing": {}, "kept": {}, "kept_steady": {}, "kept_short": {}}
    processing = c.get("processing", {})
    kept = processing.get("kept", {}).get("workloads", {})
    for workload, runs in processing.get("workloads", {}).items():
        r = {k: _median(v) for k, v in rates(runs).items()}
        out["processing"][workload] = stats.ratio(r.get(KINDLING), r.get(CELERY))
        out["kept_short"][workload] = stats.ratio(r.get(KINDLING), r.get(KINDLING_ZERO))
        long = kept.get(workload, runs)  # runs before N_KEPT had only the short ones
        r = {k: _median(v) for k, v in rates(long).items()}
        out["kept"][workload] = stats.ratio(r.get(KINDLING), r.get(KINDLING_ZERO))
        steady = {k: _median([x["steady_jobs_per_s"] for x in long.get(k, []) if x.get("steady_jobs_per_s")])
                  for k in (KINDLING, KINDLING_ZERO)}
        out["kept_steady"][workload] = stats.ratio(steady[KINDLING], steady[KINDLING_ZERO])
    enq = c.get("enqueue", {}).get("samples", {})
    out["async"] = stats.ratio(_median(enq.get(ENQ_AKINDLING, [])), _median(enq.get(ENQ_ACELERY, [])))
    out["async_sqs"] = stats.ratio(_median(enq.get(ENQ_ASQS, [])), _median(enq.get(ENQ_ACELERY, [])))
    out["async_threads"] = stats.ratio(_median(enq.get(ENQ_AKINDLING, [])),
                                       _median(enq.get(ENQ_ACELERY_THREADS, [])))
    ddb = c.get("dynamodb", {}).get("rates", {})
    out["ddb_kept"] = stats.ratio(_median(ddb.get(DDB_LAT, [])), _median(ddb.get(DDB_ZERO, [])))
    return out


def report(c: dict) -> str:
    lat = c["latency_ms_each_way"]
    md = [f"### Network: Valkey and DynamoDB behind a Toxiproxy latency toxic ({lat} ms each way)\n",
          "| round trip on an open connection | median ms |\n|---|---:|"]
    md.extend(f"| {k} | {stats.fmt(v, 3)} |" for k, v in c["rtt_ms"].items())
    md.append("")
    p = c.get("processing")
    if p:
        for workload, runs in p["workloads"].items():
            md.append(stats.markdown_table(
                f"Network: {p['n']} x {workload} queued before one worker process starts, c={c['concurrency']}, "
                f"through the latency proxy (spawn to last result)", "jobs/s",
                stats.table_rows(rates(runs), CELERY, higher_is_better=True), CELERY))
        kept = p.get("kept")
        for workload, runs in (kept or {}).get("workloads", {}).items():
            md.append(stats.markdown_table(
                f"Network: the latency kept, kindling alone on {kept['n']} x {workload}, c={c['concurrency']}, "
                "through each proxy (spawn to last result)", "jobs/s",
                stats.table_rows(rates(runs), KINDLING_ZERO, higher_is_better=True), KINDLING_ZERO))
        for name, why in p.get("failures", {}).items():
            md.append(f"{name} failed under latency with its defaults ({why[:400]}); run again with "
                      f"{DRAMATIQ_FIX_LABEL}.\n")
    e = c.get("enqueue")
    if e:
        md.append(stats.markdown_table(f"Network: enqueue through the latency proxy, {e['n']} noop jobs", e["unit"],
                                       stats.table_rows(e["samples"], ENQ_CELERY, higher_is_better=True),
                                       ENQ_CELERY))
    d = c.get("dynamodb")
    if d:
        md.append(stats.markdown_table(f"Network: DynamoDB through the proxy, the warm SQS handler on {d['n']} noop "
                                       "jobs (busy span)", "jobs/s",
                                       stats.table_rows(d["rates"], DDB_ZERO, higher_is_better=True), DDB_ZERO))
        md.append(stats.markdown_table("Network: DynamoDB through the proxy, the cold start's critical path "
                                       "(spawn to record)", "ms", stats.table_rows(d["critical"], None), None))
        md.extend(f"- {line}" for line in critical_lines(d["critical"]))
        md.append("")
    return "\n".join(md) + "\n"


def ratio_lines(c: dict) -> list[str]:
    r = ratios(c)
    lines = []
    for workload, value in r["processing"].items():
        lines.append(stats.verdict(f"network {workload}: kindling / Celery threads, c={CONCURRENCY}, "
                                   f"{LATENCY_MS} ms each way", value, TARGET_PROCESSING, at_most=False))
    kept_n = c.get("processing", {}).get("kept", {}).get("n", c.get("processing", {}).get("n"))
    for workload, value in r["kept"].items():
        lines.append(stats.verdict(f"network {workload}: kindling with the latency / through the proxy without it "
                                   f"({kept_n} jobs)", value, TARGET_LATENCY_KEPT, at_most=False))
    for workload, value in r["kept_short"].items():
        lines.append(f"network {workload}: the same on the {c.get('processing', {}).get('n')} jobs of the "
                     f"comparison with the peers = {stats.fmt_ratio(value)}")
    for workload, value in r["kept_steady"].items():
        lines.append(f"network {workload}: the same, steady (10% to 90% of results) = {stats.fmt_ratio(value)}")
    if c.get("enqueue"):
        lines.append(stats.verdict("network enqueue: kindling aenqueue / Celery delay() from sync_to_async, "
                                   f"{N_ASYNC} concurrent requests", r["async"], TARGET_ASYNC, at_most=False))
        lines.append(f"network enqueue: kindling aenqueue / Celery delay() from sync_to_async(thread_sensitive="
                     f"False) = {stats.fmt_ratio(r['async_threads'])}")
        lines.append(f"network enqueue: kindling aenqueue to SQS / Celery delay() from sync_to_async "
                     f"= {stats.fmt_ratio(r['async_sqs'])}")
    if c.get("dynamodb"):
        lines.append(f"network DynamoDB: the warm handler with the latency / without it = "
                     f"{stats.fmt_ratio(r['ddb_kept'])}")
    return lines
