"""A conformance scenario as a value, and the one runner every path executes.

Most scenarios are one job: send ``task`` with ``args`` and ``options``, run the path until
nothing is left to do now, and compare what ``observe`` reads of the job with ``expect``::

    Scenario("retry_after", tasks.retry_after, (42,), expect=dict(OK, status="succeeded", ...))

A scenario that needs more (several sends, a crash, a raw body, a canvas, a clock) names its
own function in ``steps``: it gets the path and returns the observation. Either way the
module's ``SCENARIOS = table(...)`` is the whole list, and its name is the cell's: the test id
``<name>-<path>`` and the key known.py's differences are filed under.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from conformance import paths
from conformance.grid import check

Observer = Callable[[paths.Path, str], dict]


def everything(path: paths.Path, job: str) -> dict:
    """What :meth:`paths.Path.observe` sees of the job: status, attempts, error, result,
    delays, dead letter."""
    return path.observe(job)


def only(*keys: str) -> Observer:
    """Those of the job's observations, the rest left out of the comparison."""

    def observe(path: paths.Path, job: str) -> dict:
        seen = path.observe(job)
        return {k: seen[k] for k in keys}

    return observe


def written(path: paths.Path) -> list[tuple]:
    """Every record the path wrote: (status, error type), sorted."""
    return sorted((r.get("status"), (r.get("error") or {}).get("type")) for r in path.records())


def records(path: paths.Path, job: str | None = None) -> dict:
    """Every record the path wrote (:func:`written`): for a job that gets none under its own
    id (rejected before its id is trusted)."""
    return {"records": written(path)}


@dataclass(frozen=True)
class Scenario:
    """One row of the conformance table: its name, what to run, what every path must observe."""

    name: str
    task: Any = None  # a Task, or a task's name (sent as a producer without its code sends it)
    args: tuple = ()
    options: Mapping[str, Any] = field(default_factory=dict)  # Path.enqueue's: max_attempts, kwargs, ...
    expect: Mapping[str, Any] = field(default_factory=dict)
    observe: Observer = everything
    steps: Callable[[paths.Path], dict] | None = None  # the whole run, instead of task/args/options/observe
    signing: bool = False  # the path is built with signed jobs on
    deployment: Mapping[str, str] = field(default_factory=dict)  # environment over the path's deployed defaults

    def __post_init__(self) -> None:
        if (self.task is None) == (self.steps is None):
            raise ValueError(f"scenario {self.name!r}: a task to send or steps to run, one of the two")

    def run(self, path: paths.Path) -> dict:
        """The observation on ``path``."""
        if self.steps is not None:
            return self.steps(path)
        job = path.enqueue(self.task, *self.args, **self.options)
        path.run_until_settled()
        return self.observe(path, job)


def table(*scenarios: Scenario) -> dict[str, Scenario]:
    """``{name: scenario}``, in order; a name given twice is an error (it would hide a row)."""
    out: dict[str, Scenario] = {}
    for scenario in scenarios:
        if scenario.name in out:
            raise ValueError(f"scenario {scenario.name!r} is in the table twice")
        out[scenario.name] = scenario
    return out


def verify(scenarios: Mapping[str, Scenario], path: paths.Path, path_name: str, name: str) -> None:
    """The cell's test: run the scenario on the path, compare with what it expects."""
    scenario = scenarios[name]
    try:
        observed = scenario.run(path)
    except paths.NotApplicable as exc:
        pytest.fail(f"not applicable: {exc}")
    check(path_name, name, observed, scenario.expect)
