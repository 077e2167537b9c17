"""One chaos run of the Valkey stream worker: a real ``kindling worker --valkey`` process
whose Valkey and DynamoDB connections go through toxiproxy, thousands of ``chaos.ledger`` jobs,
faults injected by the test, and the check of what every job became.

    run = StreamRun("dynamodb_latency", net, tmp_path)
    run.start_worker()
    run.enqueue(2000, over_s=4)          # in the background, at an even pace
    with net.dynamodb.toxic("latency", latency=300):
        run.fault()                      # counts one injected fault
        time.sleep(1)
    run.fault_cleared()
    run.finish()                         # drain, stop the worker, check, report, assert

The checks, per run (``finish``): every job sent has exactly one record (DynamoDB's key is
the job id), its status is ``succeeded``, and the ledger shows it ran; no record for a job
that was not sent; nothing left in the stream or pending; nothing in the dead stream without
a ``dead`` record; a job ran more than once only if an earlier run was in a worker the test
killed (those duplicates are counted); the worker never exited on its own. The figures go to
stdout, to tests/chaos/.results/<fault>.json and to the end-of-session table.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

from chaos_support import RESULTS, ROOT, Net, record_summary
from kindling.core.valkey.keys import dead_key
from support import create_results_table

TASKS = Path(__file__).resolve().parent / "chaos_tasks.py"
MAX_RESTARTS = 5


class StreamRun:
    def __init__(self, fault: str, net: Net, tmp_path: Path, *, batch: int = 100, visibility_ms: int = 2000,
                 block_ms: int = 200, concurrency: int = 16, job_ms: float = 2):
        from kindling.valkey import StreamProducer

        self.fault_name = fault
        self.net = net
        self.dir = tmp_path
        self.batch = batch
        self.job_ms = job_ms
        self.stream = f"chaos:{fault}:{uuid.uuid4().hex[:6]}"
        self.table = f"chaos-{fault.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
        self.ledger = tmp_path / "ledger.txt"
        self.ledger.touch()
        self.ddb = net.aws_client("dynamodb")
        create_results_table(self.ddb, self.table)
        self.producer = StreamProducer(net.valkey_direct, stream=self.stream)
        self.valkey = self.producer.client
        self.env = self._worker_env(visibility_ms, block_ms)
        self.concurrency = concurrency
        self.worker: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self.killed: dict[int, int] = {}  # pid -> entries it held when killed
        self.crashes: list[str] = []
        self.sent: list = []
        self.expected = 0
        self.faults = 0
        self.t0 = time.monotonic()
        self.cleared_at: float | None = None
        self.timeline: list[str] = []
        self._enqueuer: threading.Thread | None = None
        self._enqueue_error: BaseException | None = None

    # -- the worker -----------------------------------------------------------------------

    def _worker_env(self, visibility_ms: int, block_ms: int) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KINDLING_"))}
        env.update(self.net.aws_env)
        env.update({
            "AWS_ENDPOINT_URL_DYNAMODB": self.net.dynamodb_proxied,
            "KINDLING_VALKEY_VISIBILITY_MS": str(visibility_ms),
            "KINDLING_VALKEY_BLOCK_MS": str(block_ms),
            "KINDLING_VALKEY_BATCH": str(self.batch),
            "KINDLING_CHAOS_LEDGER": str(self.ledger),
            "KINDLING_LOG": "1",
            "PYTHONUNBUFFERED": "1",
        })
        return env

    def start_worker(self) -> subprocess.Popen:
        n = len(self.workers)
        argv = [sys.executable, "-m", "kindling.tools.cli", "worker", "--valkey", self.net.valkey_proxied,
                "--stream", self.stream, "--tasks", str(TASKS), "--table", self.table,
                "--concurrency", str(self.concurrency)]
        with open(self.dir / f"worker-{n}.out", "wb") as out, open(self.dir / f"worker-{n}.err", "wb") as err:
            self.worker = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                                           stderr=err)
        self.workers.append(self.worker)
        self.note(f"worker {n} started (pid {self.worker.pid})")
        return self.worker

    def kill_worker(self) -> int:
        """SIGKILL the worker; returns how many stream entries were pending then (the batch it
        held, plus any handed back earlier and not yet reclaimed)."""
        w = self.worker
        w.send_signal(signal.SIGKILL)
        w.wait(10)
        held = int(self.valkey.xpending(self.stream, "kindling")["pending"])
        self.killed[w.pid] = held
        self.note(f"worker pid {w.pid} killed with SIGKILL; {held} entries pending")
        return held

    def watch(self) -> None:
        """A worker that exited by itself is a failure of the run; restart it (as a supervisor
        would) so the rest of the run still shows what became of the jobs."""
        w = self.worker
        if w is None or w.poll() is None:
            return
        n = self.workers.index(w)
        err = (self.dir / f"worker-{n}.err").read_text(errors="replace").strip().splitlines()
        self.crashes.append(f"worker {n} (pid {w.pid}) exited with status {w.returncode}: "
                            + " | ".join(err[-3:]))
        self.note(self.crashes[-1])
        if len(self.workers) > MAX_RESTARTS + len(self.killed):
            raise RuntimeError(f"the worker exited {len(self.crashes)} times: {self.crashes}")
        self.start_worker()

    # -- jobs and faults --------------------------------------------------------------------

    def enqueue(self, n: int, *, over_s: float = 0.0, chunk: int = 100) -> None:
        """Put ``n`` jobs on the stream (straight to Valkey), in a background thread, spread
        evenly over ``over_s`` seconds."""
        self.expected += n
        calls = [("chaos.ledger", [self.job_ms], {})] * n
        pause = over_s / max(1, (n + chunk - 1) // chunk)

        def produce():
            try:
                for start in range(0, n, chunk):
                    self.sent.extend(self.producer.enqueue_many(calls[start : start + chunk]))
                    if pause:
                        time.sleep(pause)
            except BaseException as exc:  # noqa: BLE001 - reported by finish()
                self._enqueue_error = exc

        self._enqueuer = threading.Thread(target=produce, name="chaos-enqueue", daemon=True)
        self._enqueuer.start()
        self.note(f"enqueueing {n} jobs over {over_s:g} s")

    def fault(self, what: str = "") -> None:
        self.faults += 1
        self.note(f"fault {self.faults} {what}".strip())

    def fault_cleared(self) -> None:
        self.cleared_at = time.monotonic()
        self.note("faults cleared")

    def note(self, text: str) -> None:
        self.timeline.append(f"{time.monotonic() - self.t0:7.2f}s {text}")

    def executions(self) -> int:
        return self.ledger.read_bytes().count(b"\n")

    def wait_mid_batch(self, timeout: float = 30.0) -> int:
        """Wait until a batch is part-way through its jobs (some of its jobs have started,
        others not yet: the ledger's count is between 10% and 60% into a batch), so that a
        fault injected now catches jobs that ran and are not recorded yet. Returns the count."""
        lo, hi = self.batch // 10, self.batch * 6 // 10
        deadline = time.monotonic() + timeout
        while not lo <= (n := self.executions()) % self.batch <= hi:
            self.watch()
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.fault_name}: no batch seen mid-run within {timeout}s")
            time.sleep(0.002)
        return n

    def wait_until(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            self.watch()
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.fault_name}: timed out after {timeout}s waiting for {what}")
            time.sleep(0.02)

    def drained(self) -> bool:
        if self._enqueuer is not None and self._enqueuer.is_alive():
            return False
        pipe = self.valkey.pipeline(transaction=False)
        pipe.xlen(self.stream)
        pipe.xpending(self.stream, "kindling")
        length, pending = pipe.execute()
        return length == 0 and pending["pending"] == 0

    # -- the end ------------------------------------------------------------------------

    def finish(self, *, drain_timeout: float = 120.0) -> dict:
        if self.cleared_at is None:
            self.fault_cleared()
        drained = True
        try:
            self.wait_until(self.drained, drain_timeout, "the stream to drain")
        except (AssertionError, RuntimeError) as exc:
            drained = False
            self.note(str(exc))
        drain_s = round(time.monotonic() - self.cleared_at, 2) if drained else None
        self.note("drained" if drained else "not drained")
        self._stop_worker()
        try:
            summary = self._check(drain_s)
        finally:
            self.ddb.delete_table(TableName=self.table)
            self.valkey.delete(self.stream, dead_key(self.stream))
        print(f"\n[chaos] {summary['fault']}: jobs={summary['jobs']} faults={summary['faults_injected']} "
              f"lost={summary['lost']} duplicate_executions={summary['duplicate_executions']} "
              f"(after SIGKILL {summary['duplicates_after_kill']}) drain_after_fault={drain_s}s "
              f"total={summary['total_s']}s statuses={summary['statuses']} worker_exits={len(self.crashes)}")
        for line in self.timeline:
            print(f"    {line}")
        record_summary(summary)
        self._keep_artifacts()
        assert not summary["problems"], f"{self.fault_name}:\n  " + "\n  ".join(summary["problems"])
        return summary

    def _keep_artifacts(self) -> None:
        """The ledger and the workers' output, kept in tests/chaos/.results/<fault>/ (pytest's
        own temporary directories rotate away)."""
        dest = RESULTS / self.fault_name
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(self.dir, dest)

    def _stop_worker(self) -> None:
        w = self.worker
        if w is not None and w.poll() is None:
            w.send_signal(signal.SIGTERM)
            try:
                w.wait(30)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
                self.crashes.append(f"worker pid {w.pid} did not stop within 30 s of SIGTERM")
        for n, w in enumerate(self.workers):
            if w.poll() is None:
                w.kill()
                w.wait()
            out = (self.dir / f"worker-{n}.out").read_text(errors="replace").strip().splitlines()
            if w.pid not in self.killed and out:
                self.note(f"worker {n} summary: {out[-1][:200]}")

    def _scan(self) -> dict[str, dict]:
        from kindling.stores.results import from_item

        out = {}
        for page in self.ddb.get_paginator("scan").paginate(TableName=self.table, ConsistentRead=True):
            for item in page["Items"]:
                record = from_item(item)
                out[record["id"]] = record
        return out

    def _check(self, drain_s: float | None) -> dict:
        problems: list[str] = []
        if self._enqueue_error is not None:
            problems.append(f"enqueue failed: {self._enqueue_error!r}")
        sent = {s.id for s in self.sent}
        if len(sent) != self.expected:
            problems.append(f"{self.expected} jobs meant to be sent, {len(sent)} sent")
        records = self._scan()
        runs: dict[str, list[int]] = defaultdict(list)  # job id -> pids that ran it
        for line in self.ledger.read_text().splitlines():
            job_id, _attempt, pid, _at = line.split()
            runs[job_id].append(int(pid))

        lost = sorted(sent - set(records))
        statuses = Counter(r["status"] for r in records.values())
        not_succeeded = {i: r for i, r in records.items() if r["status"] != "succeeded"}
        never_ran = sorted(i for i, r in records.items() if r["status"] == "succeeded" and not runs.get(i))
        wrong_result = sorted(i for i, r in records.items()
                              if r["status"] == "succeeded" and r.get("result") != f'"{i}"')
        unknown = sorted(set(records) - sent)
        ran_unsent = sorted(set(runs) - sent)
        duplicates = {i: p for i, p in runs.items() if len(p) > 1}
        after_kill = {i: p for i, p in duplicates.items() if any(pid in self.killed for pid in p[:-1])}
        unexplained = {i: p for i, p in duplicates.items() if i not in after_kill}
        dup_count = sum(len(p) - 1 for p in duplicates.values())
        dup_after_kill = sum(len(p) - 1 for p in after_kill.values())
        dead = [(i, f) for i, f in self.valkey.xrange(dead_key(self.stream))]
        dead_unrecorded = [_s(f.get(b"job_id", b"")) for _, f in dead
                           if records.get(_s(f.get(b"job_id", b"")), {}).get("status") != "dead"]
        left = self.valkey.xlen(self.stream)
        pending = self.valkey.xpending(self.stream, "kindling")["pending"]

        if lost:
            problems.append(f"{len(lost)} jobs lost (sent, no record), e.g. {lost[:3]}")
        if not_succeeded:
            sample = list(not_succeeded.items())[:3]
            problems.append(f"{len(not_succeeded)} records not succeeded {dict(statuses)}, e.g. "
                            + "; ".join(f"{i}: {r['status']} attempts={r.get('attempts')} "
                                        f"{(r.get('error') or {}).get('type')}: "
                                        f"{(r.get('error') or {}).get('message', '')[:120]} "
                                        f"(ran {len(runs.get(i, []))}x)" for i, r in sample))
        if never_ran:
            problems.append(f"{len(never_ran)} jobs recorded succeeded but never ran, e.g. {never_ran[:3]}")
        if wrong_result:
            problems.append(f"{len(wrong_result)} succeeded records with a wrong result, e.g. {wrong_result[:3]}")
        if unknown:
            problems.append(f"{len(unknown)} records for jobs never sent, e.g. {unknown[:3]}")
        if ran_unsent:
            problems.append(f"{len(ran_unsent)} ledger entries for jobs never sent, e.g. {ran_unsent[:3]}")
        if unexplained:
            sample = list(unexplained.items())[:3]
            problems.append(f"{sum(len(p) - 1 for p in unexplained.values())} duplicate executions of "
                            f"{len(unexplained)} jobs without a crash to explain them, e.g. "
                            + "; ".join(f"{i} ran {len(p)}x (attempt in record: "
                                        f"{records.get(i, {}).get('attempts')})" for i, p in sample))
        if dup_after_kill > sum(self.killed.values()):
            problems.append(f"{dup_after_kill} duplicate executions after SIGKILL, more than the "
                            f"{sum(self.killed.values())} entries the killed workers held")
        if dead_unrecorded:
            problems.append(f"{len(dead_unrecorded)} entries in the dead stream without a dead record, "
                            f"e.g. {dead_unrecorded[:3]}")
        if left or pending:
            problems.append(f"stream not drained: {left} entries left, {pending} pending")
        problems += [f"worker exited by itself: {c}" for c in self.crashes]

        return {
            "fault": self.fault_name,
            "jobs": len(sent),
            "faults_injected": self.faults,
            "lost": len(lost),
            "statuses": dict(statuses),
            "executions": sum(len(p) for p in runs.values()),
            "duplicate_executions": dup_count,
            "duplicates_after_kill": dup_after_kill,
            "unexplained_duplicates": dup_count - dup_after_kill,
            "kills": len(self.killed),
            "entries_held_at_kills": list(self.killed.values()),
            "worker_exits": len(self.crashes),
            "dead_stream": len(dead),
            "drain_s": drain_s,
            "total_s": round(time.monotonic() - self.t0, 2),
            "problems": problems,
            "timeline": self.timeline,
        }


def _s(value) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)
