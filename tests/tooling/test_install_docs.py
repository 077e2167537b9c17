"""How to install kindling, as the README and a new project's README say it: the distribution
is ``kindling-jobs`` (``kindling`` on PyPI is an unrelated project), and beside the command
that works once a release is on PyPI stands one that works today, from a clone, a built
wheel (``make dist``) or a git URL."""

from __future__ import annotations

import re

import kindling
import pytest
from support import ROOT

SCAFFOLD = ROOT / "layers/kindling/kindling/scaffold_files"
# Every text a user copies an install command from.
SOURCES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), SCAFFOLD / "README.md.tmpl",
           SCAFFOLD / "Makefile.tmpl", ROOT / "layers/kindling/Makefile"]

# `pip install kindling`, `pip install -U 'kindling[client]'`: the name alone, not kindling-jobs
# and not a path or URL that happens to end in kindling.
WRONG_NAME = re.compile(r"pip install(?:\s+-[-\w]+)*\s+['\"]?kindling(?![-\w./])")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_install_command_names_the_unrelated_pypi_project_kindling(path):
    assert WRONG_NAME.findall(path.read_text()) == []


@pytest.mark.parametrize("path", [ROOT / "README.md", SCAFFOLD / "README.md.tmpl"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_readmes_give_an_install_that_works_today_beside_the_one_after_the_release(path):
    text = path.read_text()
    commands = [line.strip() for line in text.splitlines() if "pip install" in line]
    assert any("kindling-jobs[client]" in c and "/" not in c.split("#")[0] for c in commands), commands  # PyPI
    wheels = [c for c in commands if "dist/kindling_jobs-" in c and ".whl" in c]  # a built wheel
    assert wheels and all(f"kindling_jobs-{kindling.__version__}-py3-none-any.whl" in c for c in wheels), wheels
    assert any("git+" in c for c in commands), commands  # a git URL
    assert "make dist" in text
