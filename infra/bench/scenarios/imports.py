"""``imports``: the import (init) phase, wall time of the interpreter, one fresh process each.

kindling's handler (-S + the built layer and function) against a bare ``python -S``, orjson,
boto3 with a DynamoDB client, Powertools' BatchProcessor, a boto3 + Powertools handler
module and the Celery app module (importtime.py times each).
"""

from __future__ import annotations

import os

import stats
from harness import HERE, PY, log


def scenario(ns, svc, layer: str, env: dict, results: dict) -> None:
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


def report(c: dict) -> str:
    return stats.markdown_table("Import (init) phase, wall time of the interpreter", c["unit"],
                                stats.table_rows(c["samples"], c["baseline"]), c["baseline"])


def ratio_lines(c: dict) -> list[str]:
    med = lambda xs: stats.summary(xs)["median"]  # noqa: E731
    s = c["samples"]
    r = stats.ratio(med(s["kindling handler (-S + layer)"]), med(s["bare (python -S -c pass)"]))
    return [stats.verdict("import kindling handler / bare python -S", r, 2)]
