"""template.yaml's results-table knobs: warm throughput off unless asked for, each side at
least DynamoDB's base when the other is set, and the by_status shard count handed to the
worker."""

import pytest
from support.templates import template

TEMPLATE = template()
TABLE = TEMPLATE["Resources"]["ResultsTable"]["Properties"]
NO_VALUE = {"Ref": "AWS::NoValue"}


def _resolve(value, conditions: dict[str, bool]):
    """``value`` with every Fn::If decided by ``conditions`` and NoValue dropped."""
    if isinstance(value, dict):
        if "Fn::If" in value:
            name, yes, no = value["Fn::If"]
            return _resolve(yes if conditions[name] else no, conditions)
        out = {k: _resolve(v, conditions) for k, v in value.items()}
        return {k: v for k, v in out.items() if v != NO_VALUE}
    if isinstance(value, list):
        return [v for v in (_resolve(v, conditions) for v in value) if v != NO_VALUE]
    return value


def _conditions(read: int, write: int) -> dict[str, bool]:
    reads, writes = read != 0, write != 0  # the template's UseWarmReads / UseWarmWrites
    return {"UseWarmReads": reads, "UseWarmWrites": writes, "UseWarmThroughput": reads or writes}


def test_the_conditions_are_the_ones_decided_here():
    conditions = TEMPLATE["Conditions"]
    assert conditions["UseWarmReads"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "TableWarmReadUnitsPerSecond"}, 0]}]}
    assert conditions["UseWarmWrites"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "TableWarmWriteUnitsPerSecond"}, 0]}]}
    assert conditions["UseWarmThroughput"] == {"Fn::Or": [{"Condition": "UseWarmReads"},
                                                          {"Condition": "UseWarmWrites"}]}
    params = TEMPLATE["Parameters"]
    assert params["TableWarmReadUnitsPerSecond"]["Default"] == params["TableWarmWriteUnitsPerSecond"]["Default"] == 0


@pytest.mark.parametrize("read, write, warm", [
    (0, 0, None),                                                          # the default: not set
    (20000, 0, {"ReadUnitsPerSecond": {"Ref": "TableWarmReadUnitsPerSecond"}, "WriteUnitsPerSecond": 4000}),
    (0, 9000, {"ReadUnitsPerSecond": 12000, "WriteUnitsPerSecond": {"Ref": "TableWarmWriteUnitsPerSecond"}}),
    (20000, 9000, {"ReadUnitsPerSecond": {"Ref": "TableWarmReadUnitsPerSecond"},
                   "WriteUnitsPerSecond": {"Ref": "TableWarmWriteUnitsPerSecond"}}),
])
def test_warm_throughput_is_set_only_when_asked_for_with_the_base_for_the_side_left_at_zero(read, write, warm):
    resolved = _resolve({"WarmThroughput": TABLE["WarmThroughput"]}, _conditions(read, write))
    assert resolved.get("WarmThroughput") == warm


def test_the_worker_gets_the_status_shard_count():
    env = TEMPLATE["Resources"]["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    assert env["KINDLING_STATUS_SHARDS"] == {"Ref": "StatusIndexShards"}
    shards = TEMPLATE["Parameters"]["StatusIndexShards"]
    from kindling.core import records

    assert (shards["Default"], shards["MinValue"], shards["MaxValue"]) == (records.SHARDS, 1, records.MAX_STATUS_SHARDS)


@pytest.mark.parametrize("task_index", ["true", "false"])
def test_the_local_clouds_results_table_has_the_templates_keys_and_indexes(task_index):
    """`kindling dev` and `kindling demo` make their table from template.yaml, so the dashboard
    and `kindling jobs` find the indexes a deployed stack has."""
    from kindling.tools.localcloud import SCHEMA_KEYS, results_table_schema
    from support import ROOT

    deployed = _resolve({k: TABLE[k] for k in SCHEMA_KEYS}, {"UseTaskIndex": task_index == "true"})
    assert results_table_schema(ROOT / "template.yaml", {"TaskIndex": task_index}) == deployed
    assert ("by_task" in [i["IndexName"] for i in deployed["GlobalSecondaryIndexes"]]) == (task_index == "true")
