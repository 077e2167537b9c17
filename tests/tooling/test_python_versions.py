"""kindling runs on Lambda's Pythons in support, 3.11 to 3.13: CI (make test) runs the unit
and conformance drawers on 3.11 too, in a virtualenv of its own (.venv311), beside the rest."""

from __future__ import annotations

import subprocess

from support import ROOT


def plan(*targets: str) -> str:
    # -n: print the recipes, run nothing; -B: as on a fresh machine, every target out of date.
    return subprocess.run(["make", "-n", "-B", *targets], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True).stdout


def test_make_test311_runs_the_unit_and_conformance_drawers_in_a_python_3_11_virtualenv():
    recipe = plan("test311")
    (install,) = [line for line in recipe.splitlines() if "infra/venv/install .venv311 " in line]
    assert "python3.11" in install and install.endswith("-e '.[dev]'"), install
    assert ".venv311/bin/python -m pytest tests/unit tests/conformance" in recipe


def test_make_test_runs_the_python_3_11_lane_alongside_and_fails_when_it_fails():
    # Read, not run with -n: make runs a recipe line that calls $(MAKE) even under -n.
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile[makefile.index("\ntest: install"):].split("\n\n", 1)[0]
    assert "$(MAKE) -s test311" in recipe and "wait $$py311" in recipe
    assert recipe.rstrip().endswith("[ $$rc311 -eq 0 ]")
