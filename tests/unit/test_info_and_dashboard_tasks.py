"""``kindling info`` and the dashboard count succeeded jobs for the same tasks when given the
same arguments: both take ``--tasks MODULE_OR_FILE`` (every task it registers) and ``--task
NAME``, beside the tasks seen in other statuses. (Succeeded jobs are read per task from the
``by_task`` index; ``info`` took only ``--task``, so it counted fewer than the dashboard
charted.)"""

from __future__ import annotations

import pytest
from kindling.tools import cli

TASKS = '''
from kindling import task

@task(name="info_probe.add")
def add(a, b):
    return a + b

@task(name="info_probe.greet")
def greet(name):
    return name
'''


@pytest.fixture
def tasks_module(tmp_path, monkeypatch):
    """A task module by its dotted name (each command imports it; this process, once)."""
    (tmp_path / "info_probe_tasks.py").write_text(TASKS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "info_probe_tasks"


def test_info_and_the_dashboard_count_succeeded_jobs_for_the_same_tasks(tasks_module, monkeypatch, capsys):
    import kindling.tools.dashboard
    import kindling.tools.dashboard.aggregate

    seen: dict[str, list[str]] = {}

    def summary(stack, tasks, **_):
        seen["info"] = sorted(tasks)
        return {"totals": {"succeeded": 0}, "tasks": sorted(tasks), "capped": False}

    def serve(stack, *, tasks, **_):
        seen["dashboard"] = sorted(tasks)
        return 0

    monkeypatch.setattr(kindling.tools.dashboard.aggregate, "summary", summary)
    monkeypatch.setattr(kindling.tools.dashboard, "serve", serve)
    args = ["--tasks", tasks_module, "--task", "other.named", "--table", "results"]
    assert cli.main(["info", *args]) == 0
    assert cli.main(["dashboard", *args]) == 0
    assert seen["info"] == seen["dashboard"]
    assert {"info_probe.add", "info_probe.greet", "other.named"} <= set(seen["info"])
    assert "succeeded counted for tasks: " in capsys.readouterr().out
