"""The conformance suite's paths (see paths.py) as one fixture, and the table of cells.

Each scenario module declares ``SCENARIOS``, a :func:`scenario.table` of
:class:`scenario.Scenario` values, and one test parametrized with :func:`grid.cells` that
calls :func:`scenario.verify`: scenario x path, every cell asserting the scenario's expected
observation, unless known.py says the cell differs (strict xfail) or is an intended exception
(skipped, with its reason, or, for one observation, compared without it). A scenario's
``deployment`` sets environment, over each path's deployed defaults, before its worker is
built; its ``signing`` builds the path with signed jobs on.

``KINDLING_CONFORMANCE_MATRIX=PATH`` writes the scenario x path matrix, as markdown, from the run.
"""

from __future__ import annotations

import pytest
from conformance import known, paths

_BUILDERS = {
    "sqs_handler": lambda r, signing, env: paths.SqsHandler(r("table"), r("bucket"), signing, r("monkeypatch"), env),
    "sqs_loop": lambda r, signing, env: paths.SqsLoop(r("table"), r("bucket"), signing, r("monkeypatch"), env),
    "stream_worker": lambda r, signing, env: paths.StreamWorkerPath(r("valkey_url"), r("table"), r("bucket"), signing,
                                                                    r("monkeypatch"), env),
    "stream_valkey_store": lambda r, signing, env: paths.StreamValkeyStore(r("valkey_url"), r("table"), r("bucket"),
                                                                           signing, r("monkeypatch"), env),
    "stream_drain": lambda r, signing, env: paths.StreamDrain(r("valkey_url"), r("table"), r("bucket"), signing,
                                                              r("monkeypatch"), env),
    "eager": lambda r, signing, env: paths.Eager(r("monkeypatch"), env),
}


def _build(request, name: str):
    """The path, its worker built with the environment its deployment sets, over which the
    scenario may set more (its ``deployment``), with signed jobs on if the scenario says so."""
    from kindling.producer import dispatch

    scenario = getattr(request.module, "SCENARIOS", {}).get(request.node.callspec.params.get("scenario"))
    settings = dict(scenario.deployment) if scenario is not None else {}
    signing = scenario is not None and scenario.signing
    saved = dispatch.installed()  # before building: eager mode installs its producer as it starts
    built = _BUILDERS[name](request.getfixturevalue, signing, settings)
    dispatch.set_producer(built.producer())
    request.addfinalizer(lambda: (built.close(), dispatch.set_producer(saved)))
    return built


@pytest.fixture
def path(request) -> paths.Path:
    """The path under test, built as deployed (signing off unless the scenario turns it on)."""
    return _build(request, request.node.callspec.params["path_name"])


@pytest.fixture(autouse=True)
def _restore_codec():
    """The JSON codec is process-wide: whatever a path switched it to, put it back."""
    from kindling.core import codec

    saved = codec.loads, codec.dumps, codec._orjson
    yield
    codec.loads, codec.dumps, codec._orjson = saved


# -- the matrix ----------------------------------------------------------------------------------

_results: dict[tuple[str, str], str] = {}


def pytest_runtest_logreport(report):
    callspec = getattr(report, "_conformance_cell", None)
    if callspec is None:
        return
    path, scenario = callspec
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        verdict = known.verdict(path, scenario)
        if report.passed and not hasattr(report, "wasxfail"):
            excepted = known.excepted(path, scenario)
            cell = "= " + "; ".join(f"but {k}: exception: {r}" for k, r in excepted.items()) if excepted else "="
        elif verdict is not None and verdict[0] == "xfail" and not hasattr(report, "wasxfail"):
            cell = f"FIXED (delete from known.py): {verdict[1]}"  # a strict xfail that passed
        elif verdict is not None:
            cell = f"{verdict[0]}: {verdict[1]}"
        else:
            cell = "FAILS (no entry in known.py)"
        _results[scenario, path] = cell


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    spec = getattr(item, "callspec", None)
    if spec is not None and "path_name" in spec.params and "scenario" in spec.params:
        report._conformance_cell = (spec.params["path_name"], spec.params["scenario"])


def matrix_markdown(results: dict[tuple[str, str], str]) -> str:
    scenarios = list(dict.fromkeys(s for s, _ in results))
    lines = ["| scenario | " + " | ".join(known.PATHS) + " |", "|---" * (len(known.PATHS) + 1) + "|"]
    for s in scenarios:
        lines.append(f"| {s} | " + " | ".join(results.get((s, p), "") for p in known.PATHS) + " |")
    return "\n".join(lines) + "\n"


def pytest_sessionfinish(session):
    import os

    target = os.environ.get("KINDLING_CONFORMANCE_MATRIX")
    if target and _results:
        with open(target, "w") as f:
            f.write(matrix_markdown(_results))

