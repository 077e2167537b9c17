"""A second `make demo` on the same LocalStack reports its own run, not the first one's: the
worker's REPORT lines are read from the run's start on (every page of them), and the
malformed messages it sends are recorded under ids of that run, not under the records a
previous run left in the table."""

from __future__ import annotations

import importlib.util

import pytest
from support import ROOT


@pytest.fixture
def demo():
    spec = importlib.util.spec_from_file_location("localstack_demo_rerun", ROOT / "infra/localstack/demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Logs:
    """CloudWatch Logs' filter_log_events over two runs' REPORT lines, two events a page."""

    def __init__(self, events):
        self.events, self.calls = events, []

    def filter_log_events(self, **kw):
        self.calls.append(kw)
        since = kw.get("startTime", 0)
        events = [e for e in self.events if e["timestamp"] >= since]
        start = int(kw.get("nextToken", 0))
        page = events[start:start + 2]
        return {"events": page, **({"nextToken": str(start + 2)} if start + 2 < len(events) else {})}


def report(ms: int, duration: float, init: float | None = None) -> dict:
    line = f"REPORT RequestId: x\tDuration: {duration} ms\tBilled Duration: 1 ms"
    return {"timestamp": ms, "message": line + (f"\tInit Duration: {init} ms" if init else "")}


def test_the_report_lines_read_are_this_runs_only_and_every_page_of_them(demo):
    first = [report(1_000, 50.0, init=300.0), report(1_100, 5.0), report(1_200, 6.0)]
    second = [report(9_000, 40.0, init=250.0), report(9_100, 7.0), report(9_200, 8.0), report(9_300, 9.0)]
    logs = Logs(first + second)
    got = demo.reports("worker", since_ms=9_000, logs=logs)
    assert [r["Duration"] for r in got] == [40.0, 7.0, 8.0, 9.0]
    assert got[0]["Init Duration"] == 250.0
    assert all(call["startTime"] == 9_000 for call in logs.calls) and len(logs.calls) == 2


def test_each_run_sends_its_malformed_messages_under_ids_of_its_own(demo):
    one, two = demo.malformed("run-a"), demo.malformed("run-b")
    assert len(one) == len(two) == 2
    assert not {b["id"] for b in one} & {b["id"] for b in two}
    assert {b["task"] for b in one} == {"no_such_task", "sleep"}
