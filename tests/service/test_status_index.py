"""Every status the ``by_status`` index holds can be listed and charted: the index, the command
line and the dashboard take their list from one place (kindling.core.status.BY_STATUS)."""

import time

import pytest
from kindling.core import codec, status
from kindling.core.records import build_record
from kindling.stores.results import DynamoResultStore
from kindling.tools import cli
from kindling.tools.dashboard.aggregate import summary
from test_ops import indexed_table, stack  # noqa: F401  (fixtures)

NOW = int(time.time() * 1000)


@pytest.mark.parametrize("s", sorted(status.RECORDED))
def test_a_record_is_in_the_by_status_index_exactly_when_its_status_is_listed_there(s):
    record = build_record(key="j", task="t", status=s, attempts=1, started_at=NOW, finished_at=NOW)
    assert ("status_shard" in record) == (s in status.BY_STATUS)


def test_by_status_holds_every_recorded_status_but_succeeded():
    assert status.RECORDED - {status.SUCCEEDED} == status.BY_STATUS


def seed(stack, statuses):  # noqa: F811
    DynamoResultStore(stack.table).write([
        build_record(key=f"{s}-{i}", task="ops.ok", status=s, attempts=1, started_at=NOW - 60_000 + i,
                     finished_at=NOW - 60_000 + i) for i, s in enumerate(statuses)])


@pytest.mark.parametrize("s", sorted(status.BY_STATUS))
def test_the_command_line_lists_every_status_the_index_holds(stack, capsys, s):  # noqa: F811
    seed(stack, [s])
    assert cli.main(["jobs", "list", "--status", s, "--json", "--since", "2026-01-01", "--table", stack.table]) == 0
    assert [r["id"] for r in codec.loads(capsys.readouterr().out)] == [f"{s}-0"]


def test_the_dashboard_charts_every_status_the_index_holds(stack):  # noqa: F811
    seed(stack, sorted(status.BY_STATUS))
    s = summary(stack, [], window_s=3600, now_ms=NOW)
    assert {k: sum(v) for k, v in s["by_status"].items() if k != status.SUCCEEDED} == {k: 1 for k in status.BY_STATUS}
