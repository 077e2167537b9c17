"""`make demo-moto` (``kindling demo --cloud moto``) as a user runs it: its report counts
the malformed messages it sent the same way in every line."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from support import ROOT

pytestmark = [pytest.mark.slow]


def test_the_moto_demo_reports_every_malformed_message_it_sent_in_its_table_and_worker_counts():
    done = subprocess.run([sys.executable, "-m", "kindling.tools.cli", "demo", "--cloud", "moto", "--jobs", "20"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = done.stdout
    assert done.returncode == 0, (out[-3000:], done.stderr[-3000:])
    sent = int(re.search(r"and (\d+) malformed messages", out).group(1))
    tallied = sum(int(n) for n in re.findall(r"^\(malformed\)\s+\S+\s+(\d+)$", out, re.M))
    rejected_rows = re.findall(r"^\(malformed\)\s+(\S+)\s+\d+$", out, re.M)
    rejected_by_worker = int(re.search(r"\brejected (\d+)\b", out).group(1))
    assert (sent, tallied, rejected_by_worker) == (3, 3, 3), out
    assert set(rejected_rows) == {"rejected"}, out
    assert "missing" not in out, out
