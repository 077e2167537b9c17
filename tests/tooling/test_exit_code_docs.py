"""The exit-code tables people read (docs/operations.md, kindling/tools/exits.py's docstring) are the
codes kindling.tools.exits defines, each row in its place: a setting neither passed nor set is a
usage error (2), never the error row (1)."""

from __future__ import annotations

import re

import pytest
from kindling.tools import exits
from support import ROOT

CODES = {exits.OK: "done", exits.ERROR: "an error", exits.USAGE: "usage", exits.JOB_FAILED: "the job is dead",
         exits.TIMEOUT: "timed out"}


def operations_table() -> dict[int, str]:
    text = (ROOT / "docs/operations.md").read_text()
    table = text[text.index("| code | meaning |"):].split("\n\n", 1)[0]
    return {int(m[1]): m[2] for m in re.finditer(r"^\| (\d+) \| (.+) \|$", table, re.M)}


def docstring_table() -> dict[int, str]:
    rows: dict[int, str] = {}
    code = None
    for line in exits.__doc__.splitlines():
        if m := re.match(r"^(\d+)\s+(.+)$", line):
            code = int(m[1])
            rows[code] = m[2]
        elif code is not None and line.startswith("      "):
            rows[code] += " " + line.strip()
        elif line.startswith("===="):
            code = None
    return rows


@pytest.mark.parametrize("read", [operations_table, docstring_table], ids=["docs/operations.md", "exits.py"])
def test_the_exit_code_table_lists_exactly_the_codes_kindling_exits_defines_each_in_its_row(read):
    table = read()
    assert sorted(table) == sorted(CODES)
    for code, meaning in CODES.items():
        assert table[code].startswith(meaning), (code, table[code])
    assert "setting" in table[exits.USAGE] and "setting" not in table[exits.ERROR], table
