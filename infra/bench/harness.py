"""The harness every scenario shares: the built layer and function, the children it spawns
and times, the peers' workers, the drain to the last result and the throwaway tables.

The scenarios (scenarios/<name>.py) import what they need from here; run.py builds the
layer, starts the services and runs them in order. Nothing here measures on import.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import children

if TYPE_CHECKING:
    from services import Services

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PY = sys.executable
PEERS_BIN = HERE / ".venv" / "bin"  # arq and dramatiq, in their own virtualenv (make bench)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- layer, function, package

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


# ----------------------------------------------------------------------------- jobs and processes

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


KINDLING_COLD = "kindling (SQS handler, -S + layer)"
POWERTOOLS_COLD = "boto3 + Powertools handler"
FLOOR_COLD = "floor (bare -S + 1 PutItem)"


def cold_handlers(layer: str, env: dict, svc: Services) -> dict:
    """The Lambda-shaped cold starts: name -> fn(share) -> ms (each a fresh child, one job).
    The cold, memory and tls scenarios run them."""
    from cold_child import floor_cmd, kindling_cmd, powertools_cmd

    return {
        KINDLING_COLD: lambda share=None: cold_child(kindling_cmd(PY, layer), env, svc, new_job(), share),
        POWERTOOLS_COLD: lambda share=None: cold_child(powertools_cmd(PY), env, svc, new_job(), share),
        FLOOR_COLD: lambda share=None: cold_child(floor_cmd(PY, layer), env, svc, new_job(), share),
    }


# ----------------------------------------------------------------------------- the peers (arq, dramatiq)

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


# ----------------------------------------------------------------------------- workers to the last result

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


# ----------------------------------------------------------------------------- DynamoDB tables, timed children

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
