"""Execution strategies load with the first batch that needs one, and only that one."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STRATEGIES = {"kindling.engine.execution", "kindling.engine.execution.threaded", "kindling.engine.execution.asyncrun",
              "kindling.engine.execution.fifo"}

PROBE = """
import sys
sys.path[:0] = [{layer!r}]
from kindling.core.envelope import encode_job, new_job
from kindling.core.registry import Registry
from kindling.stores.results import MemoryResultStore
from kindling.engine.runner import Delivery, Runner

reg = Registry()

@reg.task(name="plain")
def plain():
    return 1

@reg.task(name="coro")
async def coro():
    return 2

runner = Runner(reg, MemoryResultStore(), threads={threads}, log=None, metrics=False)
jobs = [new_job(name) for name in {tasks!r}]
outcomes = runner.run([Delivery(j.id, encode_job(j).decode(), group={group!r}) for j in jobs])
assert [o.status for o in outcomes] == ["succeeded"] * len(jobs), outcomes
print(" ".join(sorted(m for m in sys.modules if m.startswith("kindling.engine.execution") or m == "asyncio")))
"""


def loaded_by(tasks: list[str], threads: int = 0, group: str | None = None) -> set[str]:
    code = PROBE.format(layer=str(ROOT / "layers/kindling"), tasks=tasks, threads=threads, group=group)
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize(("tasks", "threads", "group", "expected"), [
    (["plain", "plain"], 0, None, set()),
    (["plain"], 4, None, set()),  # one job: no pool to start
    (["plain", "plain"], 4, None, {"kindling.engine.execution", "kindling.engine.execution.threaded"}),
    (["plain", "coro"], 0, None, {"kindling.engine.execution", "kindling.engine.execution.asyncrun", "asyncio"}),
    (["plain", "plain"], 4, "g", {"kindling.engine.execution", "kindling.engine.execution.fifo"}),
    (["plain", "coro"], 0, "g", {"kindling.engine.execution", "kindling.engine.execution.fifo",
                                  "kindling.engine.execution.asyncrun", "asyncio"}),
])
def test_a_batch_loads_only_the_strategy_it_runs_with(tasks, threads, group, expected):
    assert loaded_by(tasks, threads, group) == expected
