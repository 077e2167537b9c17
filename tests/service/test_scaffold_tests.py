"""A project made by ``kindling init`` tests its own tasks with kindling's pytest fixtures,
outside this checkout: eager mode, and the worker draining a queue on moto's embedded AWS
(moto is installed here, so nothing is skipped)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from support import ROOT


def test_a_new_projects_make_test_runs_its_tasks_eagerly_and_through_a_queue_on_moto(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith(("PYTEST_", "AWS_", "KINDLING_"))}
    kindling = str(ROOT / ".venv/bin/kindling") if (ROOT / ".venv/bin/kindling").exists() else "kindling"
    subprocess.run([kindling, "init", "app"], cwd=tmp_path, env=env, check=True, capture_output=True, timeout=60)
    done = subprocess.run(["make", "test", f"PYTHON={sys.executable}"], cwd=tmp_path / "app", env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert re.search(r"\b4 passed\b", done.stdout) and "skipped" not in done.stdout, done.stdout
