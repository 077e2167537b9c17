"""The conformance table's names (tests/conformance): each scenario is in one table once, and
every cell known.py describes is a scenario of the table on one of its paths, so no entry
outlives the row it excepts."""

from __future__ import annotations

from conformance import known, test_admission, test_data, test_hook_calls, test_outcomes, test_results_policies

MODULES = (test_outcomes, test_admission, test_data, test_hook_calls, test_results_policies)


def _names() -> list[str]:
    return [name for module in MODULES for name in module.SCENARIOS]


def test_every_scenario_is_in_one_table_once():
    names = _names()
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_every_cell_known_py_names_is_a_scenario_on_a_path():
    names, paths = set(_names()), {*known.PATHS, known.STACK}
    cells = [*known.KNOWN, *known.EXCEPTIONS]
    assert [c for c in cells if c[0] not in paths or c[1] not in names] == []
    assert [s for s in known.STACK_NOT_RUN if s not in names] == []
