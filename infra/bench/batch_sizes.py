"""The stream worker's read size against a 1 ms-each-way latency: fixed sizes and the grown one.

    .venv/bin/python infra/bench/batch_sizes.py [--jobs 30000] [--reps 3] [--sizes 500,1000,2000,grown]

For each size, kindling's stream worker (``infra/bench/systems/stream_burst.py``: the result
store of ``systems/kindling_valkey.py``, jobs inline, as the ``network`` scenario runs it)
drains ``--jobs`` no-ops through a Toxiproxy with the latency toxic and through one without
it, alternately, ``--reps`` times; ``worker.run()`` is timed in its own process (no
interpreter start in the figure). A fixed size is ``batch=N, max_batch=N``; ``grown`` is
``batch=500`` with the default ``max_batch`` (kindling.core.valkey.readsize). Prints each
size's median rates and the latency kept (with / without). Needs valkey-server and
infra/toxiproxy/ctl (which it installs). Loopback only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "layers/kindling"), str(ROOT / "tests"), str(ROOT / "tests/chaos")]

CONCURRENCY = 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sizes", default="500,1000,2000,grown")
    ns = parser.parse_args()

    from kindling.valkey import StreamProducer, connect
    from support import free_port
    from toxiproxy import Toxiproxy

    tmp = tempfile.mkdtemp(prefix="kindling-batch-sizes-")
    port = free_port()
    valkey = subprocess.Popen(["valkey-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL)
    ctl = str(ROOT / "infra/toxiproxy/ctl")
    env = dict(os.environ, KINDLING_TOXIPROXY_STATE=f"{tmp}/toxiproxy")
    api_port = free_port()
    subprocess.run([ctl, "install"], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run([ctl, "start", str(api_port)], check=True, env=env, stdout=subprocess.DEVNULL)
    try:
        api = Toxiproxy(f"http://127.0.0.1:{api_port}")
        urls = {}
        for kind in ("latency", "none"):
            proxy = api.create(f"sizes-{kind}", f"127.0.0.1:{free_port()}", f"127.0.0.1:{port}")
            if kind == "latency":
                proxy.latency(1, stream="downstream")
                proxy.latency(1, stream="upstream")
            urls[kind] = f"redis://{proxy.listen}/0"
        direct = f"redis://127.0.0.1:{port}/0"
        worker = str(ROOT / "infra/bench/systems/stream_burst.py")
        for size in ns.sizes.split(","):
            batch, most = (500, 0) if size == "grown" else (int(size), int(size))
            rates: dict[str, list[float]] = {"latency": [], "none": []}
            for rep in range(ns.reps):
                for kind in ("latency", "none") if rep % 2 == 0 else ("none", "latency"):
                    connect(direct).execute_command("FLUSHALL")
                    StreamProducer(direct, reader=False).enqueue_many([("noop", [], {})] * ns.jobs)
                    out = subprocess.run([sys.executable, worker, urls[kind], str(batch), str(most), str(CONCURRENCY)],
                                         capture_output=True, text=True, check=True)
                    seconds, done, _ = out.stdout.split()
                    if int(done) != ns.jobs:
                        raise SystemExit(f"{size} {kind}: {done} of {ns.jobs} jobs succeeded")
                    rates[kind].append(ns.jobs / float(seconds))
            with_, without = statistics.median(rates["latency"]), statistics.median(rates["none"])
            print(f"{size:>6}: {with_:,.0f} jobs/s with the latency, {without:,.0f} without: "
                  f"kept {with_ / without:.2f}", flush=True)
    finally:
        subprocess.run([ctl, "stop", str(api_port)], env=env, stdout=subprocess.DEVNULL)
        valkey.terminate()


if __name__ == "__main__":
    main()
