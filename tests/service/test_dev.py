"""A project made by ``kindling init`` runs locally with one command, outside this checkout:
``make dev`` (``kindling dev``) brings up moto's embedded AWS, the worker on the project's
own tasks and the dashboard; a producer in another process, pointed there by the export
line it prints, sends a job the dashboard then shows; Ctrl-C stops everything."""

from __future__ import annotations

import re
import socket
import subprocess
import sys

import pytest
from support import ROOT
from support.devflow import clean_env as _env
from support.devflow import make_dev_runs_a_job_the_dashboard_shows


@pytest.fixture
def app(tmp_path):
    kindling = str(ROOT / ".venv/bin/kindling") if (ROOT / ".venv/bin/kindling").exists() else "kindling"
    subprocess.run([kindling, "init", "app"], cwd=tmp_path, env=_env(), check=True, capture_output=True, timeout=60)
    return tmp_path / "app"


def test_make_dev_runs_a_job_the_users_producer_sent_and_the_dashboard_shows_it(app):
    make_dev_runs_a_job_the_dashboard_shows(app, sys.executable)


def test_kindling_dev_burst_runs_the_seeded_jobs_of_the_first_task_and_exits(app):
    done = subprocess.run([sys.executable, "-m", "kindling.tools.cli", "dev", "--burst", "--seed", "3"],
                          cwd=app, env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"^seeded 3 add job\(s\)", done.stdout, re.M), done.stdout
    assert done.stdout.splitlines()[-1] == "succeeded=3", done.stdout
    assert "dashboard:" not in done.stdout


def test_kindling_dev_outside_a_project_says_where_the_tasks_are_expected(tmp_path):
    done = subprocess.run([sys.executable, "-m", "kindling.tools.cli", "dev"], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "functions/worker/tasks.py" in done.stderr and "--tasks" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("option", ["--port", "--dashboard-port"])
def test_kindling_dev_on_a_port_in_use_says_so_and_exits(app, option):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "kindling.tools.cli", "dev", option, str(port)],
                              cwd=app, env=_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"127.0.0.1:{port}" in done.stderr or str(port) in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
