"""A project made by ``kindling init`` runs locally with one command, outside this checkout:
``make dev`` (``kindling dev``) brings up moto's embedded AWS, the worker on the project's
own tasks and the dashboard; a producer in another process, pointed there by the export
line it prints, sends a job the dashboard then shows; Ctrl-C stops everything."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import urllib.request

import pytest
from support import ROOT

TOKEN = "dev-test-token"


def _env() -> dict[str, str]:
    """The test's environment without anything pointing at a cloud or a kindling setting."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith(("PYTEST_", "AWS_", "KINDLING_"))}


@pytest.fixture
def app(tmp_path):
    kindling = str(ROOT / ".venv/bin/kindling") if (ROOT / ".venv/bin/kindling").exists() else "kindling"
    subprocess.run([kindling, "init", "app"], cwd=tmp_path, env=_env(), check=True, capture_output=True, timeout=60)
    return tmp_path / "app"


class Lines:
    """A child's stdout read line by line in a thread, so the test waits for a line with a timeout."""

    def __init__(self, stream):
        self.lines: list[str] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match:
        with self._changed:
            found = self._changed.wait_for(lambda: self._search(pattern), timeout)
        assert found, f"no line matching {pattern!r} in:\n{''.join(self.lines)}"
        return found

    def _search(self, pattern: str):
        return next((m for m in (re.search(pattern, line) for line in self.lines) if m), None)


def _get(url: str) -> dict:
    import json

    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - the dashboard on 127.0.0.1
        return json.loads(response.read())


def test_make_dev_runs_a_job_the_users_producer_sent_and_the_dashboard_shows_it(app):
    env = dict(_env(), KINDLING_DASHBOARD_TOKEN=TOKEN, PYTHONUNBUFFERED="1")
    dev = subprocess.Popen(["make", "-s", "dev", f"PYTHON={sys.executable}",
                            "DEV_ARGS=--seed 2 --dashboard-port 0"],
                           cwd=app, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    try:
        out = Lines(dev.stdout)
        seeded = out.wait_for(r"^seeded 2 add job\(s\): (\S+), (\S+)$").groups()
        dashboard = out.wait_for(r"^dashboard: (http://127\.0\.0\.1:\d+/)$").group(1)
        exports = out.wait_for(r"^\s*export (.+)$").group(1)
        out.wait_for(r"^Ctrl-C stops")
        assert "localstack" not in "".join(out.lines).lower()

        # The user's producer, in its own process and shell environment, the export line applied.
        producer_env = dict(_env(), **dict(kv.split("=", 1) for kv in shlex.split(exports)))
        sent = subprocess.run(
            [sys.executable, "-c", "from tasks import add; h = add.delay(20, 22); print(h.id, h.result(timeout=30))"],
            cwd=app / "functions/worker", env=producer_env, capture_output=True, text=True, timeout=60)
        assert sent.returncode == 0, sent.stderr
        job_id, result = sent.stdout.split()
        assert result == "42"

        job = _get(f"{dashboard}api/job/{job_id}")
        # the record as stored: its result is JSON text
        assert (job["task"], job["status"], job["result"]) == ("add", "succeeded", "42"), job
        listed = _get(f"{dashboard}api/search?task=add&window=3600")
        assert {job_id, *seeded} <= {item["id"] for item in listed["items"]}
        summary = _get(f"{dashboard}api/summary?window=900")
        assert summary["per_task"]["add"]["total"]["by_status"].get("succeeded") == 3, summary["per_task"]

        os.killpg(dev.pid, signal.SIGINT)  # Ctrl-C in the terminal: make and kindling dev both get it
        dev.wait(timeout=30)
        out.wait_for(r"^kindling dev: stopped; succeeded=3$", timeout=10)
        assert "Traceback" not in "".join(out.lines)
    finally:
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGKILL)
            dev.wait(timeout=10)


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
