"""``make dev`` in a project made by ``kindling init``, driven as a user would: start it, read
the export line it prints, send a job from another process with that environment, read the
job back from the dashboard, Ctrl-C. Shared by the service drawer (the checkout's kindling)
and the packaging test (the built wheel in a virtualenv that never saw this checkout)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import threading
import urllib.request
from pathlib import Path

TOKEN = "dev-test-token"


def clean_env() -> dict[str, str]:
    """This process's environment without anything pointing at a cloud, a kindling setting,
    this checkout or this pytest run."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONSTARTUP")
            and not k.startswith(("PYTEST_", "AWS_", "KINDLING_"))}


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
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - the dashboard on 127.0.0.1
        return json.loads(response.read())


def make_dev_runs_a_job_the_dashboard_shows(app: Path, python: str) -> None:
    """``make dev PYTHON=python`` in ``app``: two seeded jobs and one the user's producer sends
    run on moto's embedded AWS, the dashboard shows all three, Ctrl-C stops it cleanly."""
    env = dict(clean_env(), KINDLING_DASHBOARD_TOKEN=TOKEN, PYTHONUNBUFFERED="1")
    dev = subprocess.Popen(["make", "-s", "dev", f"PYTHON={python}", "DEV_ARGS=--seed 2 --dashboard-port 0"],
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
        producer_env = dict(clean_env(), **dict(kv.split("=", 1) for kv in shlex.split(exports)))
        sent = subprocess.run(
            [python, "-c", "from tasks import add; h = add.delay(20, 22); print(h.id, h.result(timeout=30))"],
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
