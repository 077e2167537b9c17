"""How `make demo` (infra/localstack/demo.py) ends: the dashboard commands it prints last are
for the LocalStack it ran on, so that LocalStack is still running when the demo returns;
the demo says how to stop it. A run that fails stops what the demo started, as before."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
from support import ROOT


@pytest.fixture
def demo(monkeypatch):
    spec = importlib.util.spec_from_file_location("localstack_demo", ROOT / "infra/localstack/demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("KINDLING_DEMO_ENDING_PROBE", "unset")  # restored after the test
    module.calls = []

    def ctl(*args):
        module.calls.append(args[0])
        return {"env": "export KINDLING_DEMO_ENDING_PROBE=1", "start": "LocalStack started"}.get(args[0], "")

    monkeypatch.setattr(module, "ctl", ctl)
    return module


def already_running(demo, monkeypatch, running: bool) -> None:
    status = SimpleNamespace(run=lambda *a, **k: SimpleNamespace(returncode=0 if running else 3))
    monkeypatch.setattr(demo, "subprocess", status)


def test_make_demo_leaves_the_localstack_it_started_running_and_prints_how_to_stop_it(demo, monkeypatch, capsys):
    already_running(demo, monkeypatch, False)
    monkeypatch.setattr(demo, "run", lambda jobs: 0)
    assert demo.main(5) == 0
    assert "start" in demo.calls and "stop" not in demo.calls
    out = capsys.readouterr().out
    assert "LocalStack is still running" in out and "infra/localstack/ctl stop" in out, out


def test_make_demo_leaves_a_localstack_that_was_already_running_as_it_was(demo, monkeypatch, capsys):
    already_running(demo, monkeypatch, True)
    monkeypatch.setattr(demo, "run", lambda jobs: 0)
    assert demo.main(5) == 0
    assert "start" not in demo.calls and "stop" not in demo.calls
    assert "LocalStack is still running" in capsys.readouterr().out


def test_make_demo_stops_the_localstack_it_started_when_the_run_fails(demo, monkeypatch):
    already_running(demo, monkeypatch, False)

    def broken(jobs):
        raise RuntimeError("deploy failed")

    monkeypatch.setattr(demo, "run", broken)
    with pytest.raises(RuntimeError, match="deploy failed"):
        demo.main(5)
    assert demo.calls[-1] == "stop"
