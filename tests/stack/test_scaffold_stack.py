"""A project made by ``kindling init`` deploys and runs as its README says: scaffolded by
an installed release (a wheel of this checkout, not its source tree) into a directory
outside this repository, a task added to its tasks module, built and deployed to LocalStack
by its own Makefile (``sam build`` and ``sam deploy``), and a job enqueued with the
installed producer comes back with the task's result, run by a layer built from the
installed package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT
from support.release import install_release

pytestmark = [pytest.mark.localstack, pytest.mark.slow]

STACK = "kindling-scaffold"
PROBE = "release-probe-7f3c"
ADDED_TASK = '''

@task(name="scaffold_probe")
def scaffold_probe(a, b):
    """Added after `kindling init`: where it ran from, and a sum."""
    import kindling

    return {"sum": a + b, "probe": kindling.RELEASE_PROBE, "kindling": kindling.__file__}
'''


def _run(cmd: list[str], cwd: Path, env: dict) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode:
        raise AssertionError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-4000:]}{done.stderr[-4000:]}")
    return done.stdout


@pytest.fixture(scope="module")
def project(tmp_path_factory, localstack) -> tuple[Path, dict]:
    """The scaffolded project deployed as stack ``kindling-scaffold``, and its outputs."""
    site = install_release(tmp_path_factory.mktemp("release"))
    # A name only this installed copy has (the layer ships only modules a worker imports, so
    # it goes into the package's own module): the task returns its value only if the layer
    # was built from the installed package.
    with open(site / "kindling/__init__.py", "a") as f:
        f.write(f"\nRELEASE_PROBE = {PROBE!r}\n")
    directory = tmp_path_factory.mktemp("user") / "jobs"
    assert not directory.resolve().is_relative_to(ROOT)
    env = dict(os.environ, PYTHONPATH=str(site), SAM_CLI_TELEMETRY="0",
               PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    out = _run([sys.executable, "-m", "kindling.tools.cli", "init", str(directory)], ROOT, env)
    assert "wrote template.yaml" in out
    with open(directory / "functions/worker/tasks.py", "a") as f:
        f.write(ADDED_TASK)
    make = ["make", f"STACK={STACK}", f"PYTHON={sys.executable}", f"LOCALSTACK={localstack['AWS_ENDPOINT_URL']}"]
    _run([*make, "test"], directory, env)  # the scaffold's eager tests, with the added task
    _run([*make, "deploy-local"], directory, env)
    outputs = json.loads(_run([*make, "-s", "outputs-local"], directory, env))
    return directory, outputs


def test_a_task_added_to_a_scaffolded_project_runs_on_its_deployed_stack(project, localstack, monkeypatch):
    directory, outputs = project
    for key, value in localstack.items():
        monkeypatch.setenv(key, value)
    from kindling.producer.client import Client

    client = Client(queue_url=outputs["QueueUrl"], table=outputs["ResultsTableName"])
    result = client.enqueue("scaffold_probe", 2, 3).result(timeout=120)
    assert result["sum"] == 5
    assert result["probe"] == PROBE  # the layer holds the installed package
    assert result["kindling"].endswith("kindling/__init__.pyc")  # the layer ships bytecode only
    assert not result["kindling"].startswith(str(ROOT / "layers"))  # not this checkout's source


def test_the_scaffolds_template_is_this_releases(project):
    directory, _ = project
    assert (directory / "template.yaml").read_bytes() == (ROOT / "template.yaml").read_bytes()
