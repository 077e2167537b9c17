"""Import phase of the worker against a bare interpreter, interleaved, same run.

    python infra/bench/importtime.py [--runs 30] [--layer .aws-sam/build/KindlingLayer/python]
                                     [--function .aws-sam/build/WorkerFunction]

For each round it runs, in turn: ``python -c pass``; ``python -c "import app"`` with the
layer's python/ on sys.path as /opt/python and the built function first (as in Lambda);
the same with ``-X importtime``, from which it takes the cumulative microseconds of the
``app`` import; and ``python -c "import orjson"``/``"import boto3"`` for scale. It prints
medians with min and max, and the ratio of the handler's wall time to the bare one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - t0) * 1000


def importtime_us(cmd: list[str], module: str) -> int:
    err = subprocess.run(cmd, check=True, capture_output=True, text=True).stderr
    for line in err.splitlines():
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[2] == module:
            return int(parts[1])
    raise RuntimeError(f"{module} not in -X importtime output")


def summary(samples: list[float]) -> dict:
    return {"median": round(statistics.median(samples), 2), "min": round(min(samples), 2),
            "max": round(max(samples), 2), "n": len(samples)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--layer", default=str(ROOT / ".aws-sam/build/KindlingLayer/python"))
    ap.add_argument("--function", default=str(ROOT / ".aws-sam/build/WorkerFunction"),
                    help="the built worker function (its modules with their bytecode)")
    ap.add_argument("--json", help="write every sample to this file")
    ns = ap.parse_args()
    layer = Path(ns.layer)
    if not (layer / "kindling").is_dir():
        raise SystemExit(f"no built layer at {layer}: run `make build` first")
    py = ns.python
    # -S: no site-packages, as in Lambda where the venv's packages are not there; -I too.
    function = Path(ns.function)
    if not (function / "app.py").is_file():
        raise SystemExit(f"no built function at {function}: run `make build` first")
    handler = f"import sys; sys.path[:0] = [{str(function)!r}, {str(layer)!r}]; import app"
    cases = {
        "bare (python -c pass)": [py, "-S", "-c", "pass"],
        "worker handler import": [py, "-S", "-c", handler],
        "import orjson": [py, "-S", "-c", f"import sys; sys.path[:0] = [{str(layer)!r}]; import orjson"],
        "import json": [py, "-S", "-c", "import json"],
    }
    samples: dict[str, list[float]] = {k: [] for k in cases}
    cumulative: list[float] = []
    for i in range(ns.runs):
        for name, cmd in cases.items():
            samples[name].append(wall(cmd))
        cumulative.append(importtime_us([py, "-S", "-X", "importtime", "-c", handler], "app") / 1000)
        print(f"\rround {i + 1}/{ns.runs}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    results = {name: summary(s) for name, s in samples.items()}
    results["handler import, -X importtime cumulative (ms)"] = summary(cumulative)
    bare = results["bare (python -c pass)"]["median"]
    print(f"{'case':<48} {'median ms':>10} {'min':>8} {'max':>8} {'x bare':>7}")
    for name, r in results.items():
        ratio = f"{r['median'] / bare:.2f}" if "cumulative" not in name else ""
        print(f"{name:<48} {r['median']:>10.2f} {r['min']:>8.2f} {r['max']:>8.2f} {ratio:>7}")
    if ns.json:
        Path(ns.json).write_text(json.dumps({"results": results, "samples": samples, "importtime_ms": cumulative},
                                            indent=1))


if __name__ == "__main__":
    main()
