"""`make demo`, the README's first command, as a user runs it: infra/localstack/demo.py against the
session's LocalStack (slow: it deploys the stack and waits for LocalStack's event source mapping)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support import ROOT

pytestmark = [pytest.mark.localstack, pytest.mark.slow]


def test_the_demo_runs_every_job_to_a_final_outcome_and_shows_the_canvas_and_the_tick(localstack):
    env = dict(os.environ, **localstack)
    done = subprocess.run([sys.executable, str(ROOT / "infra/localstack/demo.py")], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    out = done.stdout
    assert done.returncode == 0, (out[-3000:], done.stderr[-3000:])
    table = out.split("\ntask ", 1)[1].split("\n\n", 1)[0]
    assert "missing" not in table and "succeeded" in table and "dead" in table and "rejected" in table, table
    assert "chain(add.s(1, 2), add.s(10), add.s(y=100)) -> 113" in out
    assert "group([add.s(i, i) for i in range(20)]).then(total.s()) -> 380" in out
    assert "tick -> enqueued" in out and "job(s)" in out
