"""``cold``: spawn to the first job's result recorded, one fresh process each, round-robin.

The Lambda-shaped cold starts (harness.cold_handlers: kindling's SQS handler, a boto3 +
Powertools handler and the floor), kindling's handler from the whole-package layer it
shipped as before the split, ``kindling worker --valkey``, Celery (threads and prefork) and,
with the peers' virtualenv, arq and dramatiq, each with one noop already queued.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import children
import stats
from harness import (
    HERE,
    PEERS_BIN,
    PY,
    ROOT,
    build_whole_layer,
    celery_cmd,
    cold_child,
    cold_handlers,
    install_package,
    kill_group,
    log,
    new_job,
    peer_cmd,
    peer_enqueue,
    stop,
)

if TYPE_CHECKING:
    from services import Services

KINDLING_COLD_WHOLE = "kindling (SQS handler, -S + whole-package layer, as before the split)"


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


def scenario(ns, svc: Services, layer: str, env: dict, results: dict) -> None:
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


def report(c: dict) -> str:
    return stats.markdown_table("Cold start: spawn to first job's result recorded", c["unit"],
                                stats.table_rows(c["samples"], c["baseline"]), c["baseline"])


def ratio_lines(c: dict) -> list[str]:
    lines = []
    med = lambda xs: stats.summary(xs)["median"]  # noqa: E731
    s = c["samples"]
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
    return lines
