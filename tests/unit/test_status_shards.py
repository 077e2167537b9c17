"""The by_status index's shard count is the deployment's (KINDLING_STATUS_SHARDS, the
template's StatusIndexShards): every record the worker, a revive or a revoke writes spreads
over that many, and by_task keeps its own four."""

import pytest
from kindling.core import records
from kindling.core.records import build_record, renumbered

KEYS = [f"job-{i:04d}" for i in range(400)]


def _shards(rows: list[dict], attr: str) -> set[int]:
    return {int(r[attr].rpartition("#")[2]) for r in rows}


def _dead(key: str) -> dict:
    return build_record(key=key, task="t", status="dead", attempts=1, started_at=1, finished_at=1)


def test_without_the_variable_status_shards_are_four(monkeypatch):
    monkeypatch.delenv("KINDLING_STATUS_SHARDS", raising=False)
    assert records.status_shards() == 4
    assert _shards([_dead(k) for k in KEYS], "status_shard") == {0, 1, 2, 3}


def test_the_deployments_count_spreads_by_status_keys_and_leaves_by_task_at_four(monkeypatch):
    monkeypatch.setenv("KINDLING_STATUS_SHARDS", "16")
    rows = [_dead(k) for k in KEYS]
    assert _shards(rows, "status_shard") == set(range(16))
    assert _shards(rows, "task_shard") == {0, 1, 2, 3}


def test_a_renumbered_record_takes_its_index_key_from_the_same_count(monkeypatch):
    monkeypatch.setenv("KINDLING_STATUS_SHARDS", "16")
    ok = [build_record(key=k, task="t", status="succeeded", attempts=1, started_at=1, finished_at=1) for k in KEYS]
    assert all("status_shard" not in r for r in ok)
    assert _shards([renumbered(r, "failed", 2) for r in ok], "status_shard") == set(range(16))
    assert [renumbered(r, "failed", 2)["status_shard"] for r in ok] == [_dead(k)["status_shard"].replace(
        "dead#", "failed#") for k in KEYS]


@pytest.mark.parametrize("value", ["0", "-1", "101", "four", "2.5"])
def test_a_count_outside_1_to_100_is_refused_by_name(monkeypatch, value):
    monkeypatch.setenv("KINDLING_STATUS_SHARDS", value)
    with pytest.raises(ValueError, match="KINDLING_STATUS_SHARDS"):
        records.status_shards()


def test_the_variable_is_in_the_configuration_table_with_the_templates_default():
    from pathlib import Path

    from cfnlint.decode import cfn_yaml
    from kindling.shared import config

    variable = config.VARIABLES["KINDLING_STATUS_SHARDS"]
    template = cfn_yaml.load(str(Path(records.__file__).parents[4] / "template.yaml"))
    assert variable.default == str(template["Parameters"]["StatusIndexShards"]["Default"]) == "4"
    env = template["Resources"]["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    assert env["KINDLING_STATUS_SHARDS"] == {"Ref": "StatusIndexShards"}


def test_the_dashboard_searches_every_status_shard_and_chord_shard_the_deployment_writes(monkeypatch):
    from kindling.core.records import chord_shard
    from kindling.tools.dashboard.search import plan

    monkeypatch.setenv("KINDLING_STATUS_SHARDS", "8")
    dead = {s.value for s in plan(task=None, status="dead", error=None, tasks=[])}
    assert dead == {f"dead#{n}" for n in range(8)} >= {_dead(k)["status_shard"] for k in KEYS}
    chords = {s.value for s in plan(task=None, status="chord", error=None, tasks=[])}
    assert chords >= {chord_shard(f"chord#{k}") for k in KEYS} and len(chords) == 8
    by_task = {s.value for s in plan(task="t", status="succeeded", error=None, tasks=[])}
    assert by_task == {f"t#{n}" for n in range(4)}  # by_task keeps its own four
