"""``kindling status ID`` prints the job's record for a reader, field by field, as ``kindling jobs
show`` does; ``--json`` prints it as JSON for scripts."""

from __future__ import annotations

import json

import pytest
from kindling.producer.client import Client
from kindling.tools import cli

RECORD = {"status": "succeeded", "task": "tasks.add", "attempts": 1, "enqueued_at": 1_764_288_000_000,
          "started_at": 1_764_288_000_100, "finished_at": 1_764_288_000_150, "duration_ms": 50, "result": 5}


@pytest.fixture
def recorded(monkeypatch):
    records = {"j1": dict(RECORD), "d1": dict(RECORD, status="dead", error={"type": "ValueError", "message": "x"})}
    monkeypatch.setattr(Client, "record", lambda self, job_id: records.get(job_id))
    return records


def test_status_prints_the_record_field_by_field_not_json(recorded, capsys):
    assert cli.main(["status", "j1", "--table", "results"]) == 0
    out = capsys.readouterr().out
    with pytest.raises(ValueError):
        json.loads(out)
    lines = dict(line.split(None, 1) for line in out.splitlines() if line.strip() and " " in line)
    assert lines["id"].strip() == "j1" and lines["status"].strip() == "succeeded"
    assert lines["task"].strip() == "tasks.add" and lines["result"].strip() == "5"


def test_status_json_is_the_record_for_scripts(recorded, capsys):
    assert cli.main(["status", "j1", "--table", "results", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"id": "j1", "record": RECORD}


def test_a_dead_jobs_status_exits_3_with_its_error_shown(recorded, capsys):
    assert cli.main(["status", "d1", "--table", "results"]) == 3
    assert "ValueError: x" in capsys.readouterr().out


def test_a_job_without_a_record_says_so_and_exits_1(recorded, capsys):
    assert cli.main(["status", "nope", "--table", "results"]) == 1
    assert "no outcome recorded yet" in capsys.readouterr().out
