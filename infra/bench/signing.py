"""What signed jobs cost: per job in the worker and the producer, and the secret's first read.

    # the runner's cost per job, signing off against on, interleaved rounds in one process
    PYTHONPATH=layers/kindling .venv/bin/python infra/bench/signing.py jobs

    # the first Secrets Manager read of a fresh process (a new connection plus one round
    # trip: what a cold worker pays once), against a warm read, on the endpoint of the
    # environment (AWS_ENDPOINT_URL: LocalStack here, so loopback latency, not AWS's)
    PYTHONPATH=layers/kindling .venv/bin/python infra/bench/signing.py secret --rounds 15

Wrap in ``flock /tmp/kindling-bench.lock`` when other benchmarks may run. Prints medians
with min and max, and the ratio against signing off from the same rounds.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stats import summary  # noqa: E402

KEY = b"b" * 32
QUEUE = "arn:aws:sqs:us-east-1:123456789012:jobs"


def _runner(verifier):
    from kindling.core.registry import Registry
    from kindling.engine.runner import Runner
    from kindling.stores.results import MemoryResultStore

    reg = Registry()

    @reg.task(name="noop")
    def noop(*args):
        return None

    return Runner(reg, MemoryResultStore(), log=None, metrics=False, verifier=verifier)


def _batch(n: int, arg_bytes: int, signed: bool):
    from kindling.core import jobsig
    from kindling.core.envelope import encode_job, new_job
    from kindling.engine.runner import Delivery

    out = []
    destination = jobsig.sqs_destination(QUEUE)
    for i in range(n):
        body = encode_job(new_job("noop", ["x" * arg_bytes])).decode()
        sig = jobsig.sign("k1", KEY, destination, body) if signed else None
        out.append(Delivery(f"m{i}", body, 1, signature=sig, source=destination if signed else None))
    return out


def bench_jobs(rounds: int, batch: int, arg_bytes: int) -> dict:
    from kindling.core import jobsig
    from kindling.shared.signed import Keyring, Verifier

    secret = json.dumps({"current": "k1", "keys": {"k1": base64.b64encode(KEY).decode()}})
    verifier = Verifier(Keyring("bench", fetch=lambda ref, deadline: secret))
    verifier.prepare()
    off, on = _runner(None), _runner(verifier)
    times: dict[str, list[float]] = {"off": [], "on": [], "sign": []}
    for _ in range(rounds):  # interleaved: off, on, off, on ...
        for name, runner in (("off", off), ("on", on)):
            deliveries = _batch(batch, arg_bytes, name == "on")
            t0 = time.perf_counter()
            outcomes = runner.run(deliveries)
            times[name].append((time.perf_counter() - t0) / batch * 1e6)
            assert all(o.status == "succeeded" for o in outcomes), [o.reason for o in outcomes][:3]
        bodies = [d.body for d in _batch(batch, arg_bytes, False)]
        destination = jobsig.sqs_destination(QUEUE)
        t0 = time.perf_counter()
        for body in bodies:
            jobsig.sign("k1", KEY, destination, body)
        times["sign"].append((time.perf_counter() - t0) / batch * 1e6)
    return {name: summary(xs) for name, xs in times.items()}


_PROBE = """
import time, sys
t0 = time.perf_counter()
from kindling.drivers import aws  # aws: the worker's first batch imports it for DynamoDB anyway
from kindling.drivers import secrets
t1 = time.perf_counter()
secrets.read(sys.argv[1])
t2 = time.perf_counter()
secrets.read(sys.argv[1])
t3 = time.perf_counter()
print((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3)
"""


def bench_secret(rounds: int) -> dict:
    import boto3

    client = boto3.client("secretsmanager")
    name = f"kindling-bench-{os.getpid()}"
    arn = client.create_secret(Name=name, SecretString=json.dumps(
        {"current": "k1", "keys": {"k1": base64.b64encode(KEY).decode()}}))["ARN"]
    times: dict[str, list[float]] = {"import": [], "first read": [], "warm read": []}
    # "first read" is what a cold worker pays once: a new connection (the Secrets Manager
    # client's own) and one round trip; "warm read" the round trip alone.
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "layers/kindling"))
    try:
        for _ in range(rounds):
            out = subprocess.run([sys.executable, "-S", "-c", _PROBE, arn], capture_output=True, text=True, env=env,
                                 check=True).stdout.split()
            for name, value in zip(times, out, strict=True):
                times[name].append(float(value))
    finally:
        client.delete_secret(SecretId=arn, ForceDeleteWithoutRecovery=True)
    return {name: summary(xs) for name, xs in times.items()}


def _print(results: dict, unit: str, baseline: str | None = None) -> None:
    base = results[baseline]["median"] if baseline else None
    for name, s in results.items():
        ratio = f"  {s['median'] / base:.2f}x {baseline}" if base else ""
        spread = f"min {s['min']:.2f}, max {s['max']:.2f}, n={s['n']}"
        print(f"{name:>12}: median {s['median']:.2f} {unit} ({spread}){ratio}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["jobs", "secret"])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--arg-bytes", type=int, default=100, help="size of each job's one argument")
    ns = p.parse_args(argv)
    if ns.what == "jobs":
        print(f"runner, per job (us), batch {ns.batch}, argument {ns.arg_bytes} B, {ns.rounds} interleaved rounds")
        _print(bench_jobs(ns.rounds, ns.batch, ns.arg_bytes), "us", "off")
    else:
        print(f"Secrets Manager read in a fresh process (ms), {ns.rounds} processes, "
              f"endpoint {os.environ.get('AWS_ENDPOINT_URL', 'AWS')}")
        _print(bench_secret(ns.rounds), "ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
