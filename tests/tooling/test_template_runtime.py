"""The Python the worker runs on is a template parameter: Lambda's runtimes in support
(python3.11 to python3.13, the package's requires-python), the function and its layer on the
same one, the layer's bytecode and orjson built for it (the layer Makefile's PY_VERSION)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

from support import ROOT
from support.templates import template

TEMPLATE = template()
RUNTIMES = ["python3.11", "python3.12", "python3.13"]


def test_the_runtime_parameter_takes_every_supported_python_and_defaults_to_the_newest():
    runtime = TEMPLATE["Parameters"]["Runtime"]
    assert runtime["AllowedValues"] == RUNTIMES and runtime["Default"] == "python3.13"
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == f">={RUNTIMES[0].removeprefix('python')}"


def test_the_function_and_its_layer_run_on_the_runtime_given():
    resources = TEMPLATE["Resources"]
    worker = [r for r in resources.values() if r["Type"] == "AWS::Serverless::Function"]
    assert worker and all(r["Properties"]["Runtime"] == {"Ref": "Runtime"} for r in worker)
    layer = resources["KindlingLayer"]["Properties"]
    assert layer["CompatibleRuntimes"] == [{"Ref": "Runtime"}]
    assert not re.search(r"python3\.1\d", str(resources)), "a runtime named outside the parameter"


def test_the_layer_is_built_for_the_runtime_its_makefile_is_given():
    """PY_VERSION from the environment (the scaffold's Makefile exports it from RUNTIME): orjson's wheel is taken
    for that Python, and the bytecode must be compiled by it."""
    plan = subprocess.run(["make", "-s", "-n", "-C", str(ROOT / "layers/kindling"), "build-KindlingLayer",
                           f"PYTHON={sys.executable}", "ARTIFACTS_DIR=/nonexistent"],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PY_VERSION": "3.11"})
    assert "--python-version 3.11" in plan.stdout, plan.stdout + plan.stderr
