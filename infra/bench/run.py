"""kindling's benchmark harness: what do I gain over Celery, and over the handler I'd write myself?

    python infra/bench/run.py [--quick] [--only cold,memory,tls,critical,imports,throughput,dynamodb,sqs,
                                              lambda_valkey,enqueue,latency,network,read_memory]
                              [--aws localstack|moto] [--out bench-results]

Every scenario runs its systems round-robin within each repetition (interleaved, same
machine, same run) and reports medians with min and max and each median's ratio to the
baseline's. Writes <out>/bench-<stamp>.json (every sample), <out>/bench-<stamp>.md (the
tables) and PNG charts; prints progress, the tables and the ratios against the targets.
It edits no file in the repository: the published figures are docs/benchmarks.md, the one
page a new run's results go to (with its date and commit, as it says there).
Nothing else may run heavy work meanwhile: absolute numbers on a shared machine are noise,
the ratios are the result.

``memory`` runs the Lambda-shaped cold starts under a cgroup CPU quota per memory size
(cpushare.py: Lambda's CPU share is proportional to memory, one vCPU at 1,769 MB).
``critical`` (critical_path.py), ``lambda_valkey`` (lambda_valkey.py) and ``network``
(network.py: Valkey and DynamoDB behind a latency proxy) and ``read_memory`` (read_memory.py:
the stream worker's peak RSS against its read size) live in modules of their own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(HERE / "systems")]

import children  # noqa: E402
import critical_path  # noqa: E402
import lambda_valkey  # noqa: E402
import network  # noqa: E402
import read_memory  # noqa: E402
import stats  # noqa: E402
from services import Services  # noqa: E402

PY = sys.executable
SCENARIOS = ("cold", "memory", "tls", "critical", "imports", "throughput", "dynamodb", "sqs", "lambda_valkey",
             "enqueue", "latency", "network", "read_memory")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- helpers

def build_layer(out: Path) -> str:
    """Build the layer fresh from the source (as sam build does) into <out>/layer/python, with
    the Valkey layer's files beside its own (Lambda extracts both into /opt: the drain rows need it)."""
    art = out / "layer"
    subprocess.run(["make", "-s", "-C", str(ROOT / "layers/kindling"), "build-KindlingLayer",
                    f"ARTIFACTS_DIR={art}", f"PYTHON={PY}"], check=True)
    subprocess.run(["make", "-s", "-C", str(ROOT / "layers/kindling"), "build-KindlingValkeyLayer",
                    f"ARTIFACTS_DIR={out / 'layer-valkey'}", f"PYTHON={PY}"], check=True)
    shutil.copytree(out / "layer-valkey/python", art / "python", dirs_exist_ok=True)
    return str(art / "python")


def build_whole_layer(out: Path, layer: str) -> str:
    """The layer as it shipped before it held only what a worker imports: every module of the
    package (the command line, ops, dashboard, scaffold and demo included) as source with its
    unchecked-hash bytecode beside it, and the same orjson, in <out>/layer-whole/python. The cold
    scenario runs the handler from it and from the split layer in the same rounds."""
    import compileall
    import py_compile

    dest = out / "layer-whole/python"
    shutil.rmtree(dest.parent, ignore_errors=True)
    shutil.copytree(layer, dest, ignore=lambda d, names: ["kindling"] if Path(d) == Path(layer) else [])
    shutil.copytree(ROOT / "layers/kindling/kindling", dest / "kindling",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if not compileall.compile_dir(dest / "kindling", quiet=1,
                                  invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH):
        raise RuntimeError(f"compileall failed in {dest}")
    return str(dest)


def build_function(out: Path) -> str:
    """Build the worker function from the source (as sam build does) into <out>/function: its
    modules with their bytecode, which Lambda's read-only /var/task could not write."""
    art = out / "function"
    subprocess.run(["make", "-s", "-C", str(ROOT / "functions/worker"), "build-WorkerFunction",
                    f"ARTIFACTS_DIR={art}", f"PYTHON={PY}"], check=True)
    return str(art)


def install_package(out: Path) -> str:
    """kindling as a compiled copy in <out>/pkg, as ``pip install`` leaves it (for ``kindling worker``).

    The layer leaves the CLI out, and the source tree may have no .pyc files
    (PYTHONDONTWRITEBYTECODE): a worker run from it would compile every module at start.
    """
    import compileall
    import shutil

    dest = out / "pkg"
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(ROOT / "layers/kindling/kindling", dest / "kindling",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if not compileall.compile_dir(dest, quiet=1):
        raise RuntimeError(f"compileall failed in {dest}")
    return str(dest)


def sqs_event(job: dict) -> dict:
    return {"Records": [{
        "messageId": "bench-" + job["id"], "receiptHandle": "rh", "body": json.dumps(job),
        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": str(job["enqueued_at"]),
                       "SenderId": "bench", "ApproximateFirstReceiveTimestamp": str(job["enqueued_at"])},
        "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:kindling-bench-jobs", "awsRegion": "us-east-1",
    }]}


def new_job(task: str = "noop", args=(), kwargs=None) -> dict:
    from kindling.core.envelope import new_job_id

    return {"version": 1, "id": new_job_id(), "task": task, "args": list(args), "kwargs": kwargs or {},
            "enqueued_at": time.time_ns() // 1_000_000}


def stop(proc: subprocess.Popen, timeout: float = 15) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a worker started with ``start_new_session=True`` and its children, once measured.

    arq's and dramatiq's graceful shutdowns take 1-4 s each; nothing is measured after the
    last result, so the peers are not waited for.
    """
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def tree_rss(proc) -> int:
    import psutil

    try:
        p = psutil.Process(proc.pid)
        procs = [p, *p.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for q in procs:
        with contextlib.suppress(psutil.Error):
            total += q.memory_info().rss
    return total


def celery_cmd(pool: str, c: int) -> list[str]:
    from celery_app import WORKER_FLAGS

    return [PY, "-m", "celery", "-A", "celery_app", "worker", "--pool", pool, "-c", str(c), *WORKER_FLAGS]


# ----------------------------------------------------------------------------- cold start

def cold_child(cmd: list[str], env: dict, svc: Services, job: dict, share=None, event: dict | None = None) -> float:
    """Spawn -> result recorded (child prints its clock right after the handler returned).

    ``share``: a :class:`cpushare.CpuShare` the child joins between fork and exec.
    ``event``: what the handler is given (default: an SQS event carrying ``job``); the
    record checked afterwards is ``job["id"]``'s either way.
    """
    env = dict(env, KINDLING_BENCH_EVENT=repr(event or sqs_event(job)))
    t0 = time.time()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300,
                         preexec_fn=share.join if share is not None else None)
    if out.returncode != 0 or "DONE" not in out.stdout:
        # its stdout too: the handler logs why a job was handed back there
        raise RuntimeError(f"{cmd[:2]} failed ({out.returncode}): {out.stderr[-2000:]}\nstdout: {out.stdout[-3000:]}")
    done = float(out.stdout.split("DONE", 1)[1].split()[0])
    import boto3

    item = boto3.client("dynamodb").get_item(TableName=svc.table, Key={"id": {"S": job["id"]}},
                                             ConsistentRead=True).get("Item")
    if not item or item["status"]["S"] != "succeeded":
        raise RuntimeError(f"no succeeded record for {job['id']}: {item}")
    return (done - t0) * 1000


def cold_celery(pool: str, c: int, env: dict, svc: Services) -> float:
    """Spawn a Celery worker with one noop already queued -> its result is in the backend."""
    import celery_app

    r0, r1 = svc.valkey(0), svc.valkey(1)
    r0.flushall()
    res = celery_app.noop.delay()
    key = f"celery-task-meta-{res.id}"
    t0 = time.time()
    proc = children.popen(celery_cmd(pool, c), env=env, cwd=HERE / "systems", stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            raw = r1.get(key)
            if raw is not None:
                t1 = time.time()
                break
            if proc.poll() is not None:
                raise RuntimeError(f"celery worker exited: {children.stderr_tail(proc)}")
            if time.monotonic() > deadline:
                raise RuntimeError("celery cold start: no result after 120 s")
            time.sleep(0.002)
        if json.loads(raw)["status"] != "SUCCESS":
            raise RuntimeError(f"celery result: {raw!r}")
        return (t1 - t0) * 1000
    finally:
        stop(proc)


KINDLING_WORKER_COLD = "kindling worker --valkey (results in Valkey)"


def worker_cmd() -> list[str]:
    """``kindling worker --valkey`` as installed (the console script), the example tasks.

    The URL comes from KINDLING_VALKEY_URL; kindling is imported from :func:`install_package`'s
    compiled copy (on PYTHONPATH).
    """
    return [str(Path(PY).parent / "kindling"), "worker", "--tasks", str(ROOT / "functions/worker/tasks.py"),
            "--stream", "kindling:jobs"]


def cold_worker(pkg: str, env: dict, svc: Services, share=None) -> float:
    """Spawn ``kindling worker --valkey URL`` with one noop already in the stream -> its result is in Valkey."""
    from kindling.valkey import StreamProducer

    r0 = svc.valkey(0)
    r0.flushall()
    job = StreamProducer(svc.valkey_url).enqueue("noop")
    key = f"kindling:result:{job.id}"
    wenv = dict(env, KINDLING_RESULTS="valkey", KINDLING_LOG="0", KINDLING_VALKEY_URL=svc.valkey_url,
                PYTHONPATH=os.pathsep.join([pkg, env.get("PYTHONPATH", "")]))
    t0 = time.time()
    proc = children.popen(worker_cmd(), env=wenv, stdout=subprocess.DEVNULL,
                          preexec_fn=share.join if share is not None else None)
    try:
        deadline = time.monotonic() + 120
        while True:
            raw = r0.get(key)
            if raw is not None:
                t1 = time.time()
                break
            if proc.poll() is not None:
                raise RuntimeError(f"kindling worker exited: {children.stderr_tail(proc)}")
            if time.monotonic() > deadline:
                raise RuntimeError("kindling worker cold start: no result after 120 s")
            time.sleep(0.001)
        if json.loads(raw)["status"] != "succeeded":
            raise RuntimeError(f"kindling worker result: {raw!r}")
        return (t1 - t0) * 1000
    finally:
        stop(proc)


PEERS_BIN = HERE / ".venv" / "bin"  # arq and dramatiq, in their own virtualenv (make bench)
ARQ_TP = "arq (max_jobs=100 / 2 processes of 10 for CPU)"
DRAMATIQ_TP = "dramatiq (100 threads / 2 processes for CPU)"


def peer_cmd(kind: str, concurrency: int = 10, processes: int = 1, *, quiet: bool = False) -> list[str]:
    """The arq or dramatiq worker command (cwd: systems/); ``quiet``: arq without its CLI's per-job logs."""
    if kind == "arq" and quiet:
        return [str(PEERS_BIN / "python"), "-c", "import arq_app; from arq.worker import run_worker; "
                "run_worker(arq_app.WorkerSettings)"]
    if kind == "arq":
        return [str(PEERS_BIN / "arq"), "arq_app.WorkerSettings"]
    return [str(PEERS_BIN / "dramatiq"), "dramatiq_app", "--processes", str(processes), "--threads",
            str(concurrency)]


def peer_enqueue(kind: str, env: dict, task: str = "noop", n: int = 1, args=(), *, timed: bool = False):
    """Queue ``n`` jobs for a peer (in its virtualenv, one call each); the (db, key) where each
    result will appear, and with ``timed`` also the seconds the enqueue calls took."""
    out = subprocess.run([str(PEERS_BIN / "python"), "peer_enqueue.py", kind, task, str(n), json.dumps(list(args))],
                         env=env, cwd=HERE / "systems", capture_output=True, text=True, check=True).stdout
    first, *lines = out.splitlines()
    keys = [(int(db), key) for db, key in (line.split(" ", 1) for line in lines)]
    return (keys, float(first.split()[1])) if timed else keys


def cold_peer(kind: str, env: dict, svc: Services) -> float:
    """Spawn an arq or dramatiq worker with one noop already queued -> its result is in Valkey."""
    svc.valkey(0).flushall()
    [(db, key)] = peer_enqueue(kind, env)
    rdb = svc.valkey(db)
    penv = dict(env, ARQ_MAX_JOBS="10")
    t0 = time.time()
    proc = children.popen(peer_cmd(kind), env=penv, cwd=HERE / "systems", stdout=subprocess.DEVNULL,
                          start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not rdb.exists(key):
            if proc.poll() is not None:
                raise RuntimeError(f"{kind} worker exited: {children.stderr_tail(proc)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{kind} cold start: no result after 120 s")
            time.sleep(0.001)
        return (time.time() - t0) * 1000
    finally:
        kill_group(proc)


def scenario_cold(ns, svc: Services, layer: str, env: dict, results: dict) -> None:
    from cold_child import kindling_cmd

    pkg = install_package(Path(layer).parents[1])
    whole = build_whole_layer(Path(layer).parents[1], layer)
    systems = {
        **cold_handlers(layer, env, svc),
        KINDLING_COLD_WHOLE: lambda: cold_child(kindling_cmd(PY, whole), env, svc, new_job()),
        KINDLING_WORKER_COLD: lambda: cold_worker(pkg, env, svc),
        "Celery threads c=10": lambda: cold_celery("threads", 10, env, svc),
        "Celery prefork c=2": lambda: cold_celery("prefork", 2, env, svc),
    }
    if (PEERS_BIN / "python").exists():
        systems["arq (max_jobs=10)"] = lambda: cold_peer("arq", env, svc)
        systems["dramatiq (1 process, 10 threads)"] = lambda: cold_peer("dramatiq", env, svc)
    else:
        log(f"cold: arq and dramatiq SKIPPED: no {PEERS_BIN / 'python'} (make bench installs them)")
    samples: dict[str, list[float]] = {k: [] for k in systems}
    # one untimed warm-up round (page cache, pyc files, moto/valkey first requests)
    for fn in systems.values():
        fn()
    for i in range(ns.cold_reps):
        for name, fn in systems.items():
            samples[name].append(fn())
        log(f"cold {i + 1}/{ns.cold_reps}: " + ", ".join(f"{k.split(' (')[0]} {v[-1]:.0f}" for k, v in samples.items()))
    results["cold"] = {"unit": "ms", "baseline": "Celery threads c=10", "samples": samples}


# ----------------------------------------------------------------------------- CPU share by memory size

MEMORY_SIZES = (128, 512, 1024, 1769)
MEMORY_SIZES_QUICK = (128, 1769)
KINDLING_COLD = "kindling (SQS handler, -S + layer)"
KINDLING_COLD_WHOLE = "kindling (SQS handler, -S + whole-package layer, as before the split)"
POWERTOOLS_COLD = "boto3 + Powertools handler"
FLOOR_COLD = "floor (bare -S + 1 PutItem)"


def cold_handlers(layer: str, env: dict, svc: Services, *, drain: bool = False) -> dict:
    """The Lambda-shaped cold starts: name -> fn(share) -> ms (each a fresh child, one job).
    ``drain``: also the Valkey-triggered Lambda's drain (the memory scenario's CPU shares)."""
    from cold_child import floor_cmd, kindling_cmd, powertools_cmd

    systems = {
        KINDLING_COLD: lambda share=None: cold_child(kindling_cmd(PY, layer), env, svc, new_job(), share),
        POWERTOOLS_COLD: lambda share=None: cold_child(powertools_cmd(PY), env, svc, new_job(), share),
        FLOOR_COLD: lambda share=None: cold_child(floor_cmd(PY, layer), env, svc, new_job(), share),
    }
    if drain and svc.valkey_url:  # the Valkey-triggered Lambda's drain: the same handler, a drain event
        systems[lambda_valkey.COLD_DRAIN] = lambda_valkey.cold_drain(svc, layer, env, cold_child)
    return systems


def scenario_memory(ns, svc: Services, layer: str, env: dict, results: dict) -> None:
    """Cold start under a cgroup CPU quota per Lambda memory size (see cpushare.py)."""
    from cpushare import PERIOD_US, CgroupUnavailable, CpuShare, find_controller

    try:
        find_controller()
    except CgroupUnavailable as exc:
        log(f"memory: SKIPPED, {exc}")
        results["memory"] = {"skipped": str(exc)}
        return
    systems = cold_handlers(layer, env, svc, drain=True)
    for fn in systems.values():  # untimed warm-up at full speed (page cache, pyc files)
        fn()
    sizes = MEMORY_SIZES_QUICK if ns.quick else MEMORY_SIZES
    by_size: dict[str, dict[str, list[float]]] = {}
    quotas = {}
    for mb in sizes:
        share = CpuShare.create(mb)
        quotas[str(mb)] = share.describe()
        log(f"memory {mb} MB: {share.describe()}")
        samples: dict[str, list[float]] = {k: [] for k in systems}
        try:
            for i in range(ns.mem_reps):
                for name, fn in systems.items():
                    samples[name].append(fn(share))
                log(f"memory {mb} MB {i + 1}/{ns.mem_reps}: "
                    + ", ".join(f"{k.split(' (')[0]} {v[-1]:.0f}" for k, v in samples.items()))
        finally:
            share.remove()
        by_size[str(mb)] = samples
    results["memory"] = {"unit": "ms", "period_us": PERIOD_US, "quotas": quotas, "sizes": by_size,
                         "note": f"CFS quota = {PERIOD_US} us x MB / 1769 per {PERIOD_US} us period, "
                                 "on the child process only (joined between fork and exec)"}


# ----------------------------------------------------------------------------- TLS

def scenario_tls(ns, svc: Services, layer: str, env: dict, results: dict) -> None:
    """The Lambda-shaped cold starts over HTTP and over HTTPS (tls.py), same run, at 1,769 MB's CPU share.

    Over HTTPS every child pays the ssl import, loading the bundle (system CAs + test CA)
    and the handshake; the proxy's own work runs outside the child's quota, as AWS's does.
    """
    from cpushare import CgroupUnavailable, CpuShare

    tls_env = dict(env, **svc.start_tls())
    http, https = cold_handlers(layer, env, svc), cold_handlers(layer, tls_env, svc)
    systems = {**{f"{k}, HTTP": v for k, v in http.items()}, **{f"{k}, HTTPS": v for k, v in https.items()}}
    try:
        share = CpuShare.create(1769)
        cpu = f"1,769 MB's CPU share ({share.describe()})"
    except CgroupUnavailable as exc:
        share, cpu = None, f"the whole machine (no CPU quota: {exc})"
    log(f"tls: on {cpu}")
    samples: dict[str, list[float]] = {k: [] for k in systems}
    try:
        for fn in systems.values():  # untimed warm-up
            fn(share)
        for i in range(ns.tls_reps):
            for name, fn in systems.items():
                samples[name].append(fn(share))
            log(f"tls {i + 1}/{ns.tls_reps}: " + ", ".join(
                f"{k.split(' (')[0].split(',')[0]}{k.rsplit(',', 1)[1]} {v[-1]:.0f}" for k, v in samples.items()))
    finally:
        if share is not None:
            share.remove()
    results["tls"] = {"unit": "ms", "baseline": f"{FLOOR_COLD}, HTTP", "samples": samples,
                      "note": f"on {cpu}; HTTPS through a TLS proxy on 127.0.0.1 with a throwaway CA, "
                              "the children trusting system CAs + the CA (SSL_CERT_FILE, AWS_CA_BUNDLE)"}


# ----------------------------------------------------------------------------- imports

def scenario_imports(ns, layer: str, env: dict, results: dict) -> None:
    from importtime import wall

    funcdir = os.environ["KINDLING_BENCH_FUNCTION"]
    systems_dir = str(HERE / "systems")
    cases = {
        "bare (python -S -c pass)": [PY, "-S", "-c", "pass"],
        "kindling handler (-S + layer)": [PY, "-S", "-c",
                                          f"import sys; sys.path[:0] = [{funcdir!r}, {layer!r}]; import app"],
        "orjson (-S + layer)": [PY, "-S", "-c", f"import sys; sys.path[:0] = [{layer!r}]; import orjson"],
        "python -c pass (with site)": [PY, "-c", "pass"],
        "boto3 + DynamoDB client": [PY, "-c", "import boto3; boto3.client('dynamodb')"],
        "Powertools BatchProcessor": [PY, "-c", "from aws_lambda_powertools.utilities.batch import "
                                      "BatchProcessor, EventType, process_partial_response"],
        "boto3 + Powertools handler module": [PY, "-c", f"import sys; sys.path.insert(0, {systems_dir!r}); "
                                              "import powertools_handler"],
        "Celery app module": [PY, "-c", f"import sys; sys.path.insert(0, {systems_dir!r}); import celery_app"],
    }
    os.environ.update(env)
    samples: dict[str, list[float]] = {k: [] for k in cases}
    for cmd in cases.values():
        wall(cmd)
    for i in range(ns.import_reps):
        for name, cmd in cases.items():
            samples[name].append(wall(cmd))
        if (i + 1) % 5 == 0 or i + 1 == ns.import_reps:
            log(f"imports {i + 1}/{ns.import_reps}")
    results["imports"] = {"unit": "ms", "baseline": "bare (python -S -c pass)", "samples": samples}


# ----------------------------------------------------------------------------- throughput

WORKLOADS = {
    # name: (celery task, args, kindling task, args, cpu-bound)
    "noop": ("noop", [], "noop", [], False),
    "sleep 10 ms": ("sleep", [10], "sleep", [10], False),
    "cpu_hash 1000x1KiB": ("cpu_hash", [1000, 1024], "cpu_hash", [1000, 1024], True),
}


def drain(svc: Services, spawn, n: int, prefix: str, *, count=None, db: int = 1, stop_proc=stop,
          timeout: float = 600) -> dict:
    """Start workers (``spawn()`` -> list of Popen), poll until ``n`` results exist.

    ``count()`` says how many are done (default: the keys in db 1, where results go);
    at the end the keys starting with ``prefix`` in ``db`` must number ``n``.
    """
    r1, r0 = svc.valkey(1), svc.valkey(0)
    count_done = count or r1.dbsize
    t0 = time.monotonic()
    procs = spawn()
    first = t10 = t90 = None
    peak_rss = peak_conns = 0
    last_sample = 0.0
    try:
        deadline = t0 + timeout
        while True:
            count = count_done()
            now = time.monotonic()
            if count and first is None:
                first = now
            if t10 is None and count >= n * 0.1:
                t10 = now
            if t90 is None and count >= n * 0.9:
                t90 = now
            if now - last_sample > 0.05:
                last_sample = now
                peak_rss = max(peak_rss, sum(tree_rss(p) for p in procs))
                # our two polling connections are not the worker's
                peak_conns = max(peak_conns, len(r0.client_list()) - 2)
            if count >= n:
                break
            for p in procs:
                if p.poll() not in (None, 0):
                    err = children.stderr_tail(p)
                    raise RuntimeError(f"worker exited with {p.returncode}: {err}")
            if now > deadline:
                raise RuntimeError(f"{prefix}: only {count}/{n} results after {timeout:g} s")
            time.sleep(0.005)
        end = time.monotonic()
    finally:
        for p in procs:
            stop_proc(p)
    keys = svc.valkey(db).keys(prefix + "*")
    if len(keys) < n:
        raise RuntimeError(f"{prefix}: {len(keys)} result keys, expected {n}")
    # 10% -> 90% of results: the steady rate without startup; None when both came in one write
    steady = 0.8 * n / (t90 - t10) if t90 - t10 > 0.02 else None
    return {"jobs_per_s": n / (end - t0), "steady_jobs_per_s": steady,
            "total_s": end - t0, "first_result_s": first - t0, "peak_rss_mib": peak_rss / 2**20,
            "peak_connections": peak_conns}


def tp_celery(svc: Services, env: dict, workload: str, n: int) -> dict:
    import celery_app
    from celery import group

    task, args, _, _, cpu = WORKLOADS[workload]
    svc.valkey(0).flushall()
    group(celery_app.app.signature(task, args=args) for _ in range(n)).apply_async()
    pool, c = ("prefork", 2) if cpu else ("threads", 100)

    def spawn():
        return [children.popen(celery_cmd(pool, c), env=env, cwd=HERE / "systems", stdout=subprocess.DEVNULL)]
    return drain(svc, spawn, n, "celery-task-meta-")


def tp_kindling(svc: Services, env: dict, workload: str, n: int) -> dict:
    from kindling.valkey import StreamProducer

    _, _, task, args, cpu = WORKLOADS[workload]
    svc.valkey(0).flushall()
    StreamProducer(svc.valkey_url).enqueue_many([(task, args, {})] * n)
    procs = 2 if cpu else 1
    # sync sleep jobs in 100 threads, as the bare consumer and Celery run them (and `kindling worker`
    # --concurrency 100 would); no-op and CPU jobs one after another, as the bare consumer runs them
    cmd = [PY, str(HERE / "systems/kindling_valkey.py"), "--url", svc.valkey_url, "--concurrency", "100",
           "--threads", "100" if task == "sleep" else "0", "--batch", "50" if cpu else "500"]

    def spawn():
        return [children.popen(cmd, env=env, stdout=subprocess.DEVNULL)
                for _ in range(procs)]
    return drain(svc, spawn, n, "kindling-result:")


def tp_bare(svc: Services, env: dict, workload: str, n: int) -> dict:
    import bare_consumer

    task, args, _, _, cpu = WORKLOADS[workload]
    r0 = svc.valkey(0)
    r0.flushall()
    bare_consumer.enqueue(r0, [new_job(task, args) for _ in range(n)])
    threads = 1 if task != "sleep" else 100
    cmd = [PY, str(HERE / "bare_consumer.py"), "--url", svc.valkey_url, "--threads", str(threads),
           "--batch", "50" if cpu else "500"]

    def spawn():
        return [children.popen(cmd, env=env, stdout=subprocess.DEVNULL)
                for _ in range(2 if cpu else 1)]
    return drain(svc, spawn, n, "bare-result:")


def tp_peer(kind: str, svc: Services, env: dict, workload: str, n: int) -> dict:
    """arq or dramatiq as Celery runs: 100 at a time, or 2 processes for CPU work."""
    task, args, _, _, cpu = WORKLOADS[workload]
    r0 = svc.valkey(0)
    r0.flushall()
    peer_enqueue(kind, env, task, n, args)
    if kind == "arq":
        # arq drops a job from its queue (a sorted set) as it stores the result, keys in db 0
        cmds = [peer_cmd("arq", quiet=True)] * (2 if cpu else 1)
        penv = dict(env, ARQ_MAX_JOBS="10" if cpu else "100")  # CPU: the loop runs one at a time anyway
        count, prefix, db = (lambda: n - r0.zcard("arq:queue")), "arq:result:", 0
    else:
        cmds = [peer_cmd("dramatiq", 1, 2) if cpu else peer_cmd("dramatiq", 100, 1)]
        penv, count, prefix, db = env, None, "", 1  # db 1 holds only its results (MD5 keys)

    def spawn():
        return [children.popen(c, env=penv, cwd=HERE / "systems", stdout=subprocess.DEVNULL,
                               start_new_session=True) for c in cmds]
    return drain(svc, spawn, n, prefix, count=count, db=db, stop_proc=kill_group)


def scenario_throughput(ns, svc: Services, env: dict, results: dict) -> None:
    systems = {"Celery (threads c=100 / prefork c=2 for CPU)": tp_celery,
               "kindling StreamWorker (results in Valkey)": tp_kindling,
               "bare batched consumer (BLMPOP 500)": tp_bare}
    if (PEERS_BIN / "python").exists():
        systems[ARQ_TP] = lambda *a: tp_peer("arq", *a)
        systems[DRAMATIQ_TP] = lambda *a: tp_peer("dramatiq", *a)
    else:
        log(f"throughput: arq and dramatiq SKIPPED: no {PEERS_BIN / 'python'} (make bench installs them)")
    out = {}
    for workload in WORKLOADS:
        n = ns.n_cpu if WORKLOADS[workload][4] else ns.n
        runs: dict[str, list[dict]] = {k: [] for k in systems}
        for i in range(ns.tp_reps):
            for name, fn in systems.items():
                runs[name].append(fn(svc, env, workload, n))
            log(f"throughput {workload} {i + 1}/{ns.tp_reps} (n={n}): " + ", ".join(
                f"{k.split(' ')[0]} {v[-1]['jobs_per_s']:.0f}/s" for k, v in runs.items()))
        out[workload] = {"n": n, "runs": runs}
    results["throughput"] = {"unit": "jobs/s", "baseline": "Celery (threads c=100 / prefork c=2 for CPU)",
                             "workloads": out}


# ----------------------------------------------------------------------------- DynamoDB results

def fresh_table(svc: Services) -> str:
    import boto3

    name = f"kindling-bench-{time.time_ns()}"
    ddb = boto3.client("dynamodb")
    from kindling.tools.localcloud import results_table_schema

    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", **results_table_schema(ROOT / "template.yaml"))
    ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.2})
    return name


def count_and_drop(table: str) -> int:
    import boto3

    ddb = boto3.client("dynamodb")
    count, kwargs = 0, {"TableName": table, "Select": "COUNT"}
    while True:
        page = ddb.scan(**kwargs)
        count += page["Count"]
        if "LastEvaluatedKey" not in page:
            break
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    ddb.delete_table(TableName=table)
    return count


def rotated(items: list, i: int) -> list:
    """``items`` starting at the ``i``-th (cyclically): repetition ``i``'s order of systems."""
    k = i % len(items) if items else 0
    return items[k:] + items[:k]


def server_pids() -> tuple[int, ...]:
    """LocalStack's process and its DynamoDB Local child (call_costs.py finds them); none
    when LocalStack was not started by infra/localstack/ctl here."""
    from call_costs import servers

    try:
        return servers()
    except (OSError, ValueError, KeyError, SystemExit):
        return ()


def children_cpu_seconds() -> float:
    """CPU time of this process's finished children (each system's child, with its start-up)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def span_of(cmd: list[str], env: dict) -> tuple[float, float]:
    """Run a child that prints ``SPAN <seconds>``; return (seconds, peak RSS in MiB).

    Its output goes to files, not pipes: this loop samples its memory rather than reading,
    and a child that logs more than a pipe holds (the SQS handler logs a line per event)
    would block on its write for good."""
    import tempfile

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, tree_rss(proc))
            time.sleep(0.02)
        out.seek(0)
        err.seek(0)
        spans = [line.split()[1] for line in out if line.startswith("SPAN ")]
        if proc.returncode != 0 or not spans:
            raise RuntimeError(f"{cmd[1:3]} failed ({proc.returncode}): {err.read()[-2000:]}")
    return float(spans[-1]), peak / 2**20


DDB_BASELINE = "BatchWriteItem alone (25 per call, 4 connections)"
DDB_STREAM = "kindling StreamWorker, results in DynamoDB (4 connections)"
DDB_CALLS = "the StreamWorker's store calls alone (check + write, 4 connections)"


def scenario_dynamodb(ns, svc: Services, layer: str, env: dict, results: dict) -> None:
    """Results in DynamoDB on the AWS endpoint (the default store): kindling against what the
    table accepts through BatchWriteItem alone, back to back. Jobs/s over each worker's busy
    span (first dedupe read to last write); every record is counted afterwards."""
    n = ns.n_ddb
    child = [PY, "-S", str(HERE / "systems/ddb_child.py")]

    def batchwrite(connections: int):
        def run(table: str) -> tuple[float, float]:
            return span_of([*child, "batchwrite", "--layer", layer, "--table", table, "--n", str(n),
                            "--connections", str(connections)], env)
        return run

    def storecalls(table: str) -> tuple[float, float]:
        return span_of([*child, "storecalls", "--layer", layer, "--table", table, "--n", str(n), "--batch", "500",
                        "--connections", "4"], env)

    def handler(table: str) -> tuple[float, float]:
        return span_of([*child, "handler", "--layer", layer, "--table", table, "--n", str(n), "--batch", "10"], env)

    def stream(table: str) -> tuple[float, float]:
        from kindling.valkey import StreamProducer

        svc.valkey(0).flushall()
        StreamProducer(svc.valkey_url).enqueue_many([("noop", [], {})] * n)
        return span_of([PY, str(HERE / "systems/ddb_child.py"), "stream", "--layer", layer, "--table", table,
                        "--n", str(n), "--url", svc.valkey_url, "--batch", "500", "--connections", "4"], env)

    # each table gets n records plus the warm-up ones: 1 (handler, batchwrite) plus 1 per extra connection
    systems = {
        DDB_BASELINE: (batchwrite(4), n + 5),
        DDB_STREAM: (stream, n),
        DDB_CALLS: (storecalls, n),
        "BatchWriteItem alone (25 per call, 1 connection)": (batchwrite(1), n + 1),
        "kindling SQS handler, warm, events of 10 (1 connection)": (handler, n + 1),
    }
    runs: dict[str, list[dict]] = {k: [] for k in systems}
    from call_costs import cpu_seconds

    servers = server_pids() if svc.localstack else ()
    # DynamoDB Local's JIT warms up over its first thousands of items: one untimed run first,
    # or the first repetition of every system measures the warm-up. It goes on getting
    # faster after that (BatchWriteItem alone from 1.5 to 0.9 ms of server CPU per job over
    # a full run's repetitions), so each repetition starts with the next system: none is
    # always measured on a colder table than another.
    table = fresh_table(svc)
    batchwrite(4)(table)
    count_and_drop(table)
    for i in range(ns.tp_reps):
        for name, (fn, expect) in rotated(list(systems.items()), i):
            table = fresh_table(svc)
            server0, client0 = sum(map(cpu_seconds, servers)), children_cpu_seconds()
            seconds, rss = fn(table)
            server_s, client_s = sum(map(cpu_seconds, servers)) - server0, children_cpu_seconds() - client0
            stored = count_and_drop(table)
            if stored != expect:
                raise RuntimeError(f"{name}: {stored} records in DynamoDB, expected {expect}")
            run = {"jobs_per_s": n / seconds, "total_s": seconds, "peak_rss_mib": rss,
                   "client_cpu_ms_per_job": 1000 * client_s / n}
            if servers:
                run["server_cpu_ms_per_job"] = 1000 * server_s / n
            runs[name].append(run)
        log(f"dynamodb {i + 1}/{ns.tp_reps} (n={n}): " + ", ".join(
            f"{k.split(' (')[0].split(',')[0]} {v[-1]['jobs_per_s']:.0f}/s" for k, v in runs.items()))
    results["dynamodb"] = {"unit": "jobs/s", "baseline": DDB_BASELINE,
                           "n": n, "endpoint": svc.endpoint_kind, "runs": runs}


# ----------------------------------------------------------------------------- SQS end to end

def scenario_sqs(ns, svc: Services, env: dict, results: dict) -> None:
    """The deployed stack on LocalStack: SQS -> event source mapping -> Lambda -> DynamoDB."""
    from stack import deployed_stack

    out = deployed_stack(svc, log)
    if out is None:
        log("sqs: skipped (no deployed stack)")
        return
    import boto3
    from kindling.producer.client import Client

    client = Client(queue_url=out["QueueUrl"], table=out["ResultsTableName"])
    ddb = boto3.client("dynamodb")
    n = ns.n_e2e
    runs = []
    for i in range(ns.e2e_reps):
        t0 = time.perf_counter()
        ids = [h.id for h in client.enqueue_many([("noop", [], {})] * n)]
        enqueued = time.perf_counter()
        seen: set[str] = set()
        first = None
        deadline = time.monotonic() + 600
        while len(seen) < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"sqs end to end: {len(seen)}/{n} results after 600 s")
            missing = [j for j in ids if j not in seen]
            for start in range(0, len(missing), 100):
                keys = [{"id": {"S": j}} for j in missing[start:start + 100]]
                got = ddb.batch_get_item(RequestItems={client.table: {"Keys": keys, "ConsistentRead": True}})
                seen.update(item["id"]["S"] for item in got["Responses"][client.table]
                            if item["status"]["S"] == "succeeded")
            if seen and first is None:
                first = time.perf_counter()
            time.sleep(0.1)
        end = time.perf_counter()
        runs.append({"jobs_per_s": n / (end - t0), "enqueue_s": enqueued - t0, "first_result_s": first - t0,
                     "total_s": end - t0})
        log(f"sqs end to end {i + 1}/{ns.e2e_reps} (n={n}): {runs[-1]['jobs_per_s']:.0f} jobs/s")
    results["sqs"] = {"unit": "jobs/s", "n": n, "runs": runs,
                      "note": "enqueue_many to the last result seen; LocalStack's event source mapping poller "
                              "bounds this (one poll loop, batches of up to 10)"}


# ----------------------------------------------------------------------------- enqueue

def scenario_enqueue(ns, svc: Services, env: dict, results: dict) -> None:
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


# ----------------------------------------------------------------------------- latency

def scenario_latency(ns, svc: Services, env: dict, results: dict) -> None:
    """Low load: one ``stamp`` job at a time per system, round-robin; the waiter polls every 0.5 ms."""
    import bare_consumer
    import celery_app
    from kindling.valkey import StreamProducer

    svc.valkey(0).flushall()
    r1 = svc.valkey(1)
    producer = StreamProducer(svc.valkey_url)
    q = subprocess.DEVNULL
    procs = [
        subprocess.Popen(celery_cmd("threads", 10), env=env, cwd=HERE / "systems", stdout=q, stderr=q),
        subprocess.Popen([PY, str(HERE / "systems/kindling_valkey.py"), "--url", svc.valkey_url, "--forever"],
                         env=env, stdout=q, stderr=q),
        subprocess.Popen([PY, str(HERE / "bare_consumer.py"), "--url", svc.valkey_url, "--forever"],
                         env=env, stdout=q, stderr=q),
    ]

    def wait(key: str) -> tuple[float, bytes]:
        deadline = time.monotonic() + 60
        while True:
            raw = r1.get(key)
            if raw is not None:
                return time.time(), raw
            if time.monotonic() > deadline:
                raise RuntimeError(f"latency: no result at {key}")
            time.sleep(0.0005)

    def celery_one():
        t0 = time.time()
        res = celery_app.app.send_task("stamp")
        seen, raw = wait(f"celery-task-meta-{res.id}")
        return t0, json.loads(raw)["result"], seen

    def kindling_one():
        t0 = time.time()
        sent = producer.enqueue("stamp")
        seen, raw = wait(f"kindling-result:{sent.id}")
        return t0, float(json.loads(json.loads(raw)["result"])), seen

    def bare_one():
        job = new_job("stamp")
        t0 = time.time()
        bare_consumer.enqueue(r0, [job])
        seen, raw = wait(f"bare-result:{job['id']}")
        return t0, json.loads(raw)["result"], seen

    r0 = svc.valkey(0)
    systems = {"Celery threads c=10": celery_one, "kindling StreamWorker": kindling_one,
               "bare batched consumer": bare_one}
    samples: dict[str, dict[str, list[float]]] = {k: {"total": [], "enqueue_to_start": [], "start_to_seen": []}
                                                  for k in systems}
    try:
        for fn in systems.values():  # startup and warm-up, untimed
            for _ in range(5):
                fn()
        for i in range(ns.lat_n):
            for name, fn in systems.items():
                t0, started, seen = fn()
                d = samples[name]
                d["total"].append((seen - t0) * 1000)
                d["enqueue_to_start"].append((started - t0) * 1000)
                d["start_to_seen"].append((seen - started) * 1000)
            if (i + 1) % 50 == 0 or i + 1 == ns.lat_n:
                log(f"latency {i + 1}/{ns.lat_n}")
    finally:
        for p in procs:
            stop(p)
    results["latency"] = {"unit": "ms", "baseline": "Celery threads c=10", "samples": samples,
                          "note": "waiter polls the result key every 0.5 ms; one job in flight at a time"}


# ----------------------------------------------------------------------------- report

def dynamodb_cpu_table(c: dict) -> str:
    """CPU time per job of the local cloud and of each DynamoDB system's own process."""
    lines = ["CPU time per job, medians: the local cloud's (LocalStack and DynamoDB Local, read from /proc "
             "around each run) and the system's own process (its start-up included). Both share the "
             "machine's cores, so a system's rate follows the sum.\n",
             "| system | local cloud ms/job | own process ms/job |", "|---|---:|---:|"]
    for name, runs in c["runs"].items():
        server, own = (stats.summary([r[f] for r in runs if f in r])["median"]
                       for f in ("server_cpu_ms_per_job", "client_cpu_ms_per_job"))
        lines.append(f"| {name} | {stats.fmt(server, 3)} | {stats.fmt(own, 3)} |")
    return "\n".join(lines) + "\n"


def report(results: dict, out: Path, stamp: str) -> str:
    md = [f"## kindling benchmarks ({stamp})", "", f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}. {results['meta']['services']} Load average at start "
          f"{results['meta']['loadavg_start'][0]:.2f}, at end {results['meta']['loadavg_end'][0]:.2f}.", ""]
    if "cold" in results:
        c = results["cold"]
        md.append(stats.markdown_table("Cold start: spawn to first job's result recorded", c["unit"],
                                       stats.table_rows(c["samples"], c["baseline"]), c["baseline"]))
    if "memory" in results:
        md.append(memory_table(results["memory"]))
    if "tls" in results:
        c = results["tls"]
        md.append(stats.markdown_table(f"Cold start over HTTP and HTTPS ({c['note']})", c["unit"],
                                       stats.table_rows(c["samples"], c["baseline"]), c["baseline"]))
    if "critical" in results:
        md.append(critical_path.report(results["critical"]))
    if "imports" in results:
        c = results["imports"]
        md.append(stats.markdown_table("Import (init) phase, wall time of the interpreter", c["unit"],
                                       stats.table_rows(c["samples"], c["baseline"]), c["baseline"]))
    if "throughput" in results:
        tp = results["throughput"]
        base = tp["baseline"]
        md.append("Sleep workload: Celery, the bare consumer and kindling all run `time.sleep(0.01)` in 100 threads "
                  "(kindling: its `sleep(10)` task on a runner with `threads=100`, as `kindling worker --concurrency "
                  "100` runs sync tasks; no-op and CPU jobs run one after another, as in the bare consumer). "
                  "CPU workload: 2 processes each (Celery prefork c=2, two kindling/bare workers). Results "
                  "in Valkey db 1 for all three. Main rate: N / (spawn to last result), so it includes worker startup; "
                  "steady rate: 10% to 90% of results ('-' when they arrived in one batch write). kindling and "
                  "the bare consumer fetch 500 per read (50 for the CPU workload, so both processes get work).\n")
        for workload, w in tp["workloads"].items():
            rates = {k: [r["jobs_per_s"] for r in v] for k, v in w["runs"].items()}
            md.append(stats.markdown_table(f"Throughput on Valkey: {w['n']} x {workload}, queued before the "
                                           "workers start (spawn to last result)", "jobs/s",
                                           stats.table_rows(rates, base, higher_is_better=True), base))
            md.append("| system | steady jobs/s (10% to 90% of results) | time to first result s | peak RSS MiB "
                      "| peak Valkey connections |\n|---|---:|---:|---:|---:|")
            for k, v in w["runs"].items():
                d = stats.summary([r["steady_jobs_per_s"] for r in v if r["steady_jobs_per_s"]])
                f = stats.summary([r["first_result_s"] for r in v])
                m = stats.summary([r["peak_rss_mib"] for r in v])
                cn = stats.summary([r["peak_connections"] for r in v])
                md.append(f"| {k} | {stats.fmt(d['median'])} ({stats.fmt(d['min'])}-{stats.fmt(d['max'])}) "
                          f"| {stats.fmt(f['median'], 2)} | {stats.fmt(m['median'])} | {stats.fmt(cn['median'], 0)} |")
            md.append("")
    if "dynamodb" in results:
        c = results["dynamodb"]
        rates = {k: [r["jobs_per_s"] for r in v] for k, v in c["runs"].items()}
        md.append(stats.markdown_table(f"Results in DynamoDB ({c['endpoint'].split(' at ')[0]}): {c['n']} noop jobs, "
                                       "busy span of one warm process", c["unit"],
                                       stats.table_rows(rates, c["baseline"], higher_is_better=True), c["baseline"]))
        if DDB_CALLS in rates:
            md.append("The StreamWorker's store calls alone: the duplicate check (one BatchGetItem per 100 jobs, "
                      "sent while the previous batch's write is in flight) and the write (one BatchWriteItem per 25), "
                      "made by kindling's store with no worker, no Valkey and no jobs. Against it, what the worker "
                      "adds; against BatchWriteItem alone, what the check costs the table.\n")
        md.append(dynamodb_cpu_table(c))
    if "sqs" in results:
        c = results["sqs"]
        runs = c["runs"]
        md.append(f"### SQS end to end on LocalStack: {c['n']} noop jobs\n\n{c['note']}.\n")
        md.append("| jobs/s | enqueue s | first result s | last result s |\n|---:|---:|---:|---:|")
        md.extend(f"| {stats.fmt(r['jobs_per_s'])} | {stats.fmt(r['enqueue_s'], 2)} "
                  f"| {stats.fmt(r['first_result_s'], 2)} | {stats.fmt(r['total_s'], 1)} |" for r in runs)
        md.append("")
    if "lambda_valkey" in results:
        md.append(lambda_valkey.report(results["lambda_valkey"]))
    if "enqueue" in results:
        c = results["enqueue"]
        md.append(stats.markdown_table(f"Enqueue rate ({c['n']} noop jobs; {c['n_sqs']} for SQS)", c["unit"],
                                       stats.table_rows(c["samples"], c["baseline"], higher_is_better=True),
                                       c["baseline"]))
    if "latency" in results:
        c = results["latency"]
        md.append(f"### Latency at low load, ms ({c['note']})\n")
        md.append("| system | total p50 | total p99 | min | max | enqueue->start p50 | p99 "
                  "| start->result seen p50 | p99 | p50 x Celery |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        base = stats.percentile(c["samples"][c["baseline"]]["total"], 50)
        for k, d in c["samples"].items():
            pc = stats.percentile
            md.append(f"| {k} | {stats.fmt(pc(d['total'], 50), 2)} | {stats.fmt(pc(d['total'], 99), 2)} "
                      f"| {stats.fmt(min(d['total']), 2)} | {stats.fmt(max(d['total']), 2)} "
                      f"| {stats.fmt(pc(d['enqueue_to_start'], 50), 2)} "
                      f"| {stats.fmt(pc(d['enqueue_to_start'], 99), 2)} "
                      f"| {stats.fmt(pc(d['start_to_seen'], 50), 2)} | {stats.fmt(pc(d['start_to_seen'], 99), 2)} "
                      f"| {stats.fmt_ratio(stats.ratio(pc(d['total'], 50), base))} |")
        md.append("")
    if "network" in results:
        md.append(network.report(results["network"]))
    if "read_memory" in results:
        md.append(read_memory.report(results["read_memory"]))
    md.append("### Ratios and targets\n")
    md.extend(f"- {line}" for line in ratio_lines(results))
    return "\n".join(md) + "\n"


def memory_table(c: dict) -> str:
    """Cold start by memory size: one row per system, median (min-max) per size, and the ratios."""
    if "skipped" in c:
        return f"### Cold start by memory size\n\nSkipped: {c['skipped']}.\n"
    sizes = list(c["sizes"])
    systems = list(c["sizes"][sizes[0]])
    n = len(c["sizes"][sizes[0]][systems[0]])
    out = [f"### Cold start by memory size (CPU share emulated: {c['note']}; median (min-max) ms, n={n})", "",
           "| system | " + " | ".join(f"{int(mb):,} MB" for mb in sizes) + " |", "|---|" + "---:|" * len(sizes)]
    for name in systems:
        cells = []
        for mb in sizes:
            x = stats.summary(c["sizes"][mb][name])
            cells.append(f"{stats.fmt(x['median'])} ({stats.fmt(x['min'])}-{stats.fmt(x['max'])})")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    for other in (POWERTOOLS_COLD, FLOOR_COLD):
        if other not in systems:
            continue
        cells = [stats.fmt_ratio(stats.ratio(stats.summary(c["sizes"][mb][KINDLING_COLD])["median"],
                                             stats.summary(c["sizes"][mb][other])["median"])) for mb in sizes]
        out.append(f"| ratio kindling / {other.split(' (')[0]} | " + " | ".join(cells) + " |")
    if lambda_valkey.COLD_DRAIN in systems:
        cells = [stats.fmt_ratio(stats.ratio(stats.summary(c["sizes"][mb][lambda_valkey.COLD_DRAIN])["median"],
                                             stats.summary(c["sizes"][mb][KINDLING_COLD])["median"])) for mb in sizes]
        out.append("| ratio drain / SQS handler | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def ratio_lines(results: dict) -> list[str]:
    lines = []
    med = lambda xs: stats.summary(xs)["median"]  # noqa: E731
    if "cold" in results:
        s = results["cold"]["samples"]
        k = med(s["kindling (SQS handler, -S + layer)"])
        for other, target in (("Celery threads c=10", 1 / 8), ("Celery prefork c=2", 1 / 8),
                              ("boto3 + Powertools handler", 1 / 10)):
            lines.append(stats.verdict(f"cold start kindling / {other}", stats.ratio(k, med(s[other])), target))
        if KINDLING_COLD_WHOLE in s:
            lines.append(f"cold start kindling, layer of what a worker imports / whole-package layer = "
                         f"{stats.fmt_ratio(stats.ratio(k, med(s[KINDLING_COLD_WHOLE])))}")
        floor = med(s["floor (bare -S + 1 PutItem)"])
        lines.append(stats.verdict("cold start kindling / floor", stats.ratio(k, floor), 2))
        if KINDLING_WORKER_COLD in s:
            lines.append(stats.verdict("cold start kindling worker --valkey / kindling SQS handler",
                                       stats.ratio(med(s[KINDLING_WORKER_COLD]), k), 1.5))
            lines.append(f"cold start kindling worker --valkey / Celery threads c=10 = "
                         f"{stats.fmt_ratio(stats.ratio(med(s[KINDLING_WORKER_COLD]), med(s['Celery threads c=10'])))}")
            peers = {k: med(v) for k, v in s.items() if k.startswith(("arq", "dramatiq"))}
            for name, m in peers.items():
                lines.append(f"cold start kindling worker --valkey / {name} = "
                             f"{stats.fmt_ratio(stats.ratio(med(s[KINDLING_WORKER_COLD]), m))}")
            if peers:
                best = min(peers, key=peers.get)
                lines.append(stats.verdict(f"cold start kindling worker --valkey / best peer ({best})",
                                           stats.ratio(med(s[KINDLING_WORKER_COLD]), peers[best]), 0.2))
    if "memory" in results and "sizes" in results["memory"]:
        for mb, s in results["memory"]["sizes"].items():
            k = med(s[KINDLING_COLD])
            lines.append(f"cold start at {int(mb):,} MB: kindling / boto3 + Powertools = "
                         f"{stats.fmt_ratio(stats.ratio(k, med(s[POWERTOOLS_COLD])))}, kindling / floor = "
                         f"{stats.fmt_ratio(stats.ratio(k, med(s[FLOOR_COLD])))}")
    if "tls" in results:
        s = results["tls"]["samples"]
        for proto in ("HTTP", "HTTPS"):
            k = med(s[f"{KINDLING_COLD}, {proto}"])
            lines.append(f"cold start over {proto} at 1,769 MB: kindling / floor = "
                         f"{stats.fmt_ratio(stats.ratio(k, med(s[f'{FLOOR_COLD}, {proto}'])))}, "
                         f"kindling / boto3 + Powertools = "
                         f"{stats.fmt_ratio(stats.ratio(k, med(s[f'{POWERTOOLS_COLD}, {proto}'])))}")
        for name in (KINDLING_COLD, POWERTOOLS_COLD, FLOOR_COLD):
            lines.append(f"HTTPS - HTTP, {name}: {med(s[f'{name}, HTTPS']) - med(s[f'{name}, HTTP']):+.1f} ms")
    if "critical" in results:
        lines.extend(critical_path.ratio_lines(results["critical"]))
    if "imports" in results:
        s = results["imports"]["samples"]
        r = stats.ratio(med(s["kindling handler (-S + layer)"]), med(s["bare (python -S -c pass)"]))
        lines.append(stats.verdict("import kindling handler / bare python -S", r, 2))
    if "throughput" in results:
        w = results["throughput"]["workloads"]
        rate = lambda workload, system: med([r["jobs_per_s"] for r in w[workload]["runs"][system]])  # noqa: E731
        celery, ours, bare = "Celery (threads c=100 / prefork c=2 for CPU)", \
            "kindling StreamWorker (results in Valkey)", "bare batched consumer (BLMPOP 500)"
        if "noop" in w:
            lines.append(stats.verdict("throughput noop: kindling / bare batched consumer",
                                       stats.ratio(rate("noop", ours), rate("noop", bare)), 0.25, at_most=False))
            lines.append(f"throughput noop: kindling / Celery = "
                         f"{stats.fmt_ratio(stats.ratio(rate('noop', ours), rate('noop', celery)))}")
        if "sleep 10 ms" in w:
            lines.append(stats.verdict("throughput sleep 10 ms, concurrency 100: kindling / bare batched consumer, "
                                       "spawn to last result", stats.ratio(rate("sleep 10 ms", ours),
                                                                           rate("sleep 10 ms", bare)),
                                       0.9, at_most=False))
            steady = lambda system: med([r["steady_jobs_per_s"] for r in w["sleep 10 ms"]["runs"][system]  # noqa: E731
                                         if r["steady_jobs_per_s"]])
            lines.append(stats.verdict("throughput sleep 10 ms, concurrency 100: kindling / bare batched consumer, "
                                       "steady (10% to 90%)", stats.ratio(steady(ours), steady(bare)),
                                       0.9, at_most=False))
        if "cpu_hash 1000x1KiB" in w:
            lines.append(stats.verdict("throughput CPU, 2 processes: kindling / Celery prefork c=2",
                                       stats.ratio(rate("cpu_hash 1000x1KiB", ours),
                                                   rate("cpu_hash 1000x1KiB", celery)), 1, at_most=False))
        peers = [k for k in (celery, ARQ_TP, DRAMATIQ_TP) if k in next(iter(w.values()))["runs"]]
        for workload in w:
            rates = {k: rate(workload, k) for k in peers}
            best = max(rates, key=rates.get)
            lines.append(f"throughput {workload}: kindling / best peer ({best.split(' (')[0]}) = "
                         f"{stats.fmt_ratio(stats.ratio(rate(workload, ours), rates[best]))}")
            rss = {k: med([r["peak_rss_mib"] for r in runs]) for k, runs in w[workload]["runs"].items()}
            least = min(peers, key=rss.get)
            lines.append(f"peak RSS {workload}: kindling / leanest peer ({least.split(' (')[0]}) = "
                         f"{stats.fmt_ratio(stats.ratio(rss[ours], rss[least]))}")
        for workload, v in w.items():
            rss = {k: med([r["peak_rss_mib"] for r in runs]) for k, runs in v["runs"].items()}
            lines.append(stats.verdict(f"peak RSS {workload}: kindling / Celery", stats.ratio(rss[ours], rss[celery]),
                                       0.5))
    if "dynamodb" in results:
        c = results["dynamodb"]
        rates = {k: med([r["jobs_per_s"] for r in v]) for k, v in c["runs"].items()}
        base = rates[c["baseline"]]
        lines.append(stats.verdict("results in DynamoDB: kindling StreamWorker / BatchWriteItem alone (4 connections)",
                                   stats.ratio(rates[DDB_STREAM], base), 0.9, at_most=False))
        if DDB_CALLS in rates:  # what the duplicate check costs the table, apart from what the worker adds
            lines.append(stats.verdict("results in DynamoDB: kindling StreamWorker / its store calls alone",
                                       stats.ratio(rates[DDB_STREAM], rates[DDB_CALLS]), 0.9, at_most=False))
            lines.append("results in DynamoDB: the StreamWorker's store calls alone (check + write) / BatchWriteItem "
                         f"alone = {stats.fmt_ratio(stats.ratio(rates[DDB_CALLS], base))}")
            server = {k: med([r["server_cpu_ms_per_job"] for r in v if "server_cpu_ms_per_job" in r])
                      for k, v in c["runs"].items()}
            cpu = stats.ratio(server[DDB_CALLS], server[c["baseline"]])
            if cpu is not None:
                lines.append("results in DynamoDB: the local cloud's CPU per job, the StreamWorker's store calls / "
                             f"BatchWriteItem alone = {stats.fmt_ratio(cpu)}")
        one = rates["BatchWriteItem alone (25 per call, 1 connection)"]
        lines.append("results in DynamoDB: kindling SQS handler (events of 10) / BatchWriteItem alone (1 connection) = "
                     + stats.fmt_ratio(stats.ratio(rates["kindling SQS handler, warm, events of 10 (1 connection)"],
                                                   one)))
    if "lambda_valkey" in results:
        lines.extend(lambda_valkey.ratio_lines(results["lambda_valkey"]))
    if "enqueue" in results:
        s = results["enqueue"]["samples"]
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
        base = med(s[results["enqueue"]["baseline"]])
        for k, v in s.items():
            if k != results["enqueue"]["baseline"]:
                lines.append(f"enqueue: {k} / Celery delay() = {stats.fmt_ratio(stats.ratio(med(v), base))}")
    if "latency" in results:
        d = results["latency"]["samples"]["kindling StreamWorker"]
        for part in ("enqueue_to_start", "start_to_seen"):
            label = part.replace("_to_", " to ").replace("seen", "result seen")
            lines.append(stats.verdict(f"latency kindling {label} p50, ms", stats.percentile(d[part], 50), 1))
            lines.append(stats.verdict(f"latency kindling {label} p99, ms", stats.percentile(d[part], 99), 5))
    if "latency" in results:
        c = results["latency"]
        base = stats.percentile(c["samples"][c["baseline"]]["total"], 50)
        for k, d in c["samples"].items():
            if k != c["baseline"]:
                r = stats.ratio(stats.percentile(d["total"], 50), base)
                lines.append(f"latency p50 enqueue->result seen: {k} / Celery = {stats.fmt_ratio(r)}")
    if "network" in results:
        lines.extend(network.ratio_lines(results["network"]))
    if "read_memory" in results:
        lines.extend(read_memory.ratio_lines(results["read_memory"]))
    return lines


def charts(results: dict, out: Path, stamp: str) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []

    def bars(ax, data: dict[str, list[float]], unit: str, title: str):
        names = list(data)
        s = [stats.summary(data[k]) for k in names]
        meds = [x["median"] for x in s]
        err = [[m - x["min"] for m, x in zip(meds, s, strict=True)],
               [x["max"] - m for m, x in zip(meds, s, strict=True)]]
        ax.bar(range(len(names)), meds, yerr=err, capsize=4, color="#e07b39")
        ax.set_xticks(range(len(names)), [n.replace(" (", "\n(") for n in names], fontsize=7, rotation=20, ha="right")
        ax.set_ylabel(unit)
        ax.set_title(title, fontsize=9)
        for i, m in enumerate(meds):
            ax.annotate(stats.fmt(m), (i, m), ha="center", va="bottom", fontsize=7)

    for key, title in (("cold", "Cold start: spawn to first result recorded (median, min-max)"),
                       ("tls", "Cold start over HTTP and HTTPS, 1,769 MB CPU share (median, min-max)"),
                       ("imports", "Import phase wall time (median, min-max)"),
                       ("enqueue", "Enqueue rate (median, min-max)")):
        if key in results:
            fig, ax = plt.subplots(figsize=(9, 4.5))
            bars(ax, results[key]["samples"], results[key]["unit"], title)
            if key in ("cold", "tls"):
                ax.set_yscale("log")
            fig.tight_layout()
            p = out / f"bench-{stamp}-{key}.png"
            fig.savefig(p, dpi=110)
            plt.close(fig)
            made.append(p)
    if "memory" in results and "sizes" in results["memory"]:
        c = results["memory"]
        sizes = list(c["sizes"])
        systems = list(c["sizes"][sizes[0]])
        fig, ax = plt.subplots(figsize=(9, 4.5))
        width = 0.8 / len(systems)
        colors = ("#e07b39", "#4c72b0", "#8c8c8c", "#55a868", "#c44e52")
        for j, name in enumerate(systems):
            s = [stats.summary(c["sizes"][mb][name]) for mb in sizes]
            meds = [x["median"] for x in s]
            err = [[m - x["min"] for m, x in zip(meds, s, strict=True)],
                   [x["max"] - m for m, x in zip(meds, s, strict=True)]]
            xs = [i + (j - (len(systems) - 1) / 2) * width for i in range(len(sizes))]
            ax.bar(xs, meds, width, yerr=err, capsize=3, label=name, color=colors[j % len(colors)])
            for x, m in zip(xs, meds, strict=True):
                ax.annotate(stats.fmt(m), (x, m), ha="center", va="bottom", fontsize=6)
        ax.set_xticks(range(len(sizes)), [f"{int(mb):,} MB" for mb in sizes])
        ax.set_yscale("log")
        ax.set_ylabel("ms")
        ax.legend(fontsize=7)
        ax.set_title(f"Cold start by Lambda memory size (CPU quota per {c['period_us'] // 1000} ms period; "
                     "median, min-max)", fontsize=9)
        fig.tight_layout()
        p = out / f"bench-{stamp}-memory.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        made.append(p)
    if "dynamodb" in results:
        c = results["dynamodb"]
        fig, ax = plt.subplots(figsize=(9, 4.5))
        bars(ax, {k: [r["jobs_per_s"] for r in v] for k, v in c["runs"].items()}, "jobs/s",
             f"Results in DynamoDB on LocalStack: {c['n']} noop jobs (median, min-max)")
        fig.tight_layout()
        p = out / f"bench-{stamp}-dynamodb.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        made.append(p)
    if "throughput" in results:
        w = results["throughput"]["workloads"]
        fig, axes = plt.subplots(1, len(w), figsize=(5 * len(w), 4.5))
        for ax, (workload, v) in zip(axes if len(w) > 1 else [axes], w.items(), strict=True):
            bars(ax, {k: [r["jobs_per_s"] for r in runs] for k, runs in v["runs"].items()}, "jobs/s",
                 f"{v['n']} x {workload}")
        fig.suptitle("Throughput on Valkey, spawn to last result (median, min-max)", fontsize=10)
        fig.tight_layout()
        p = out / f"bench-{stamp}-throughput.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        made.append(p)
    return made


# ----------------------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="few repetitions, small N (< 10 minutes)")
    ap.add_argument("--only", default=",".join(SCENARIOS), help=f"comma-separated subset of {','.join(SCENARIOS)}")
    ap.add_argument("--out", default=str(ROOT / "bench-results"))
    ap.add_argument("--reps", type=int, help="override every scenario's repetitions (development)")
    ap.add_argument("--n", type=int, help="override N for throughput/enqueue (CPU-bound: N/5)")
    ap.add_argument("--layer", help="a built layer's python/ dir (default: build one fresh into <out>/layer)")
    ap.add_argument("--function", help="a built worker function's dir (default: build one fresh into <out>/function)")
    ap.add_argument("--aws", choices=("localstack", "moto"), default="localstack",
                    help="AWS endpoint for DynamoDB and SQS (default: LocalStack, started if not running)")
    ns = ap.parse_args()
    only = [s.strip() for s in ns.only.split(",") if s.strip()]
    bad = set(only) - set(SCENARIOS)
    if bad:
        ap.error(f"unknown scenarios {sorted(bad)}; choose from {SCENARIOS}")
    q = ns.quick
    # QUICK stays near 10 minutes: imports 15 (was 20), memory 2 (was 3) and cold 8 (was 10)
    # made room for critical and lambda_valkey. critical needs 7: at 3 its medians moved by
    # 40% between runs.
    ns.cold_reps, ns.import_reps, ns.tp_reps, ns.enq_reps = (8, 15, 3, 3) if q else (20, 40, 5, 5)
    ns.mem_reps, ns.tls_reps = (2, 5) if q else (5, 10)
    ns.critical_reps, ns.drain_cold_reps, ns.drain_lat_n = (7, 5, 10) if q else (10, 20, 100)
    n_override = ns.n
    ns.n, ns.n_cpu = (2000, 1000) if q else (10000, 3000)
    ns.n_sqs = 1000 if q else 5000
    ns.n_ddb = 2000 if q else 5000
    ns.n_e2e, ns.e2e_reps = (300, 1) if q else (1000, 3)
    ns.lat_n = 500 if q else 2000
    ns.n_net, ns.n_kept = network.N_PROCESS, network.N_KEPT
    if ns.reps:
        ns.cold_reps = ns.import_reps = ns.tp_reps = ns.enq_reps = ns.e2e_reps = ns.mem_reps = ns.tls_reps = ns.reps
        ns.critical_reps = ns.drain_cold_reps = ns.drain_lat_n = ns.reps
        ns.lat_n = max(10, ns.reps)
    if n_override:
        ns.n, ns.n_cpu, ns.n_sqs = n_override, max(1, n_override // 5), n_override
        ns.n_ddb = ns.n_e2e = ns.n_net = ns.n_kept = n_override
    out = Path(ns.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    log(f"kindling bench: {', '.join(only)}{' (quick)' if q else ''}; load average {os.getloadavg()}")

    layer = ns.layer or build_layer(out)
    log(f"layer: {layer}")
    # the children that run the handler find it here (systems/cold_child.py, systems/ddb_child.py)
    os.environ["KINDLING_BENCH_FUNCTION"] = ns.function or build_function(out)
    log(f"function: {os.environ['KINDLING_BENCH_FUNCTION']}")
    svc = Services(log=log)
    # SIGTERM (timeout, kill) ends the run through SystemExit, so the finally below stops
    # what it started
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results: dict = {"meta": {"quick": q, "stamp": stamp, "layer": layer, "python": PY,
                              "loadavg_start": os.getloadavg(), "cpus": os.cpu_count()}}
    try:
        svc.start_aws(ns.aws)
        # all but these use Valkey (sqs and lambda_valkey: the deployed stack's ValkeyUrl, stack.py)
        if set(only) - {"imports", "critical"}:
            svc.start_valkey()
        env = dict(os.environ, **svc.aws_env(), KINDLING_BENCH_VALKEY=svc.valkey_url or "redis://127.0.0.1:1/0",
                   # a caller's PYTHONPATH still reaches the children: an A/B puts another tree there
                   PYTHONPATH=os.pathsep.join(filter(None, [str(HERE / "systems"), os.environ.get("PYTHONPATH")])))
        os.environ["KINDLING_BENCH_VALKEY"] = env["KINDLING_BENCH_VALKEY"]
        import celery_app

        results["meta"].update(services=f"AWS: {svc.endpoint_kind}. Valkey: {svc.valkey_kind or 'not used'}.",
                               celery_settings=celery_app.SETTINGS, celery_worker_flags=celery_app.WORKER_FLAGS)
        runners = {
            "cold": lambda: scenario_cold(ns, svc, layer, env, results),
            "memory": lambda: scenario_memory(ns, svc, layer, env, results),
            "tls": lambda: scenario_tls(ns, svc, layer, env, results),
            "critical": lambda: critical_path.scenario(ns, svc, layer, env, results, cold_child=cold_child,
                                                       sqs_event=sqs_event, new_job=new_job, log=log),
            "imports": lambda: scenario_imports(ns, layer, env, results),
            "throughput": lambda: scenario_throughput(ns, svc, env, results),
            "dynamodb": lambda: scenario_dynamodb(ns, svc, layer, env, results),
            "sqs": lambda: scenario_sqs(ns, svc, env, results),
            "lambda_valkey": lambda: lambda_valkey.scenario(ns, svc, layer, env, results, cold_child=cold_child,
                                                            new_job=new_job, log=log),
            "enqueue": lambda: scenario_enqueue(ns, svc, env, results),
            "latency": lambda: scenario_latency(ns, svc, env, results),
            # network.py drives this module's helpers (drain, the peers, the cold children)
            "network": lambda: network.scenario(ns, svc, layer, env, results, h=sys.modules[__name__]),
            "read_memory": lambda: read_memory.scenario(ns, svc, env, results, h=sys.modules[__name__]),
        }
        for name in SCENARIOS:
            if name not in only:
                continue
            log(f"== {name}")
            t0 = time.monotonic()
            runners[name]()
            log(f"== {name} done in {time.monotonic() - t0:.0f} s")
            # What is measured so far, kept if a later scenario stops the run.
            (out / f"bench-{stamp}.partial.json").write_text(json.dumps(results, indent=1, default=str))
    finally:
        svc.close()
    results["meta"]["loadavg_end"] = os.getloadavg()
    jpath = out / f"bench-{stamp}.json"
    jpath.write_text(json.dumps(results, indent=1, default=str))
    md = report(results, out, stamp)
    mpath = out / f"bench-{stamp}.md"
    mpath.write_text(md)
    pngs = charts(results, out, stamp)
    print(md)
    log(f"wrote {jpath}, {mpath}, " + ", ".join(str(p) for p in pngs))
    log("to publish this run: its tables and ratios go to docs/benchmarks.md, with its stamp and commit")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
