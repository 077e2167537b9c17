"""`make demo-moto` installs what the demo runs and nothing of the dev environment (SAM CLI,
mypy, selenium, OpenTelemetry): its own virtualenv with the ``demo`` extra."""

from __future__ import annotations

import re
import subprocess
import tomllib

from support import ROOT


def test_the_demo_extra_is_the_producer_client_and_motos_server_only():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = sorted(re.match(r"[A-Za-z0-9_.-]+(\[[^]]*\])?", r).group() for r in extras["demo"])
    assert names == ["kindling-jobs[client]", "moto[server,dynamodb,sqs]"]


def test_make_demo_moto_installs_the_demo_extra_into_its_own_virtualenv_not_the_dev_one():
    # -n: print the recipes, run nothing; -B: as on a fresh machine, every target out of date.
    plan = subprocess.run(["make", "-n", "-B", "demo-moto"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout
    installs = [line for line in plan.splitlines() if line.startswith("infra/venv/install ")]
    assert installs and all(line.split()[1] == ".venv-demo" and line.endswith("-e '.[demo]'")
                            for line in installs), plan
    assert ".venv-demo/bin/kindling demo" in plan, plan
