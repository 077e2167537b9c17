"""The cells of the conformance table: scenario x path, as pytest parameters."""

from __future__ import annotations

import pytest
from conformance import known


def cells(scenarios) -> list:
    """``pytest.param(path, scenario)`` for every cell, marked as known.py says."""
    out = []
    for scenario in scenarios:
        for path in known.PATHS:
            marks = [pytest.mark.conformance]
            verdict = known.verdict(path, scenario)
            if verdict is not None and verdict[0] == "xfail":
                marks.append(pytest.mark.xfail(strict=True, reason=verdict[1]))
            elif verdict is not None:
                marks.append(pytest.mark.skip(reason=f"exception: {verdict[1]}"))
            out.append(pytest.param(path, scenario, marks=marks, id=f"{scenario}-{path}"))
    return out


def differences(observed: dict, expected: dict) -> dict:
    """``{key: (observed, expected)}`` for every key that differs: the assertion's message,
    so a failing cell names its difference in one line."""
    keys = dict.fromkeys([*expected, *observed])
    return {k: (observed.get(k), expected.get(k)) for k in keys if observed.get(k) != expected.get(k)}


def check(path: str, scenario: str, observed: dict, expected: dict) -> None:
    """The cell's assertion: ``observed`` is ``expected``, but for the observations known.py
    excepts for this cell, each of which must still differ (else its exception is stale)."""
    excepted = known.excepted(path, scenario)
    differ = differences(observed, expected)
    stale = sorted(k for k in excepted if k not in differ)
    assert not stale, f"no longer differs, delete its exception from known.py: {stale}"
    rest = {k: v for k, v in differ.items() if k not in excepted}
    assert not rest, f"(observed, expected) differ: {rest}"
