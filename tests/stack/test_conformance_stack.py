"""The conformance table (tests/conformance) on the deployed stack: template.yaml on
LocalStack, its function shipping the conformance tasks, its event source mapping feeding it.

The scenarios run at once, in threads (real retry delays pass: the longest, retry_after, waits
42 s), except those that read every record the stack wrote, which run one at a time first,
and not_before_ahead, whose job stays in flight, last. Cells the stack does not run, and
observations it cannot see, are named in tests/conformance/known.py.

``KINDLING_CONFORMANCE_MATRIX_STACK=PATH`` writes this column as markdown (matrix.py --stack).
``KINDLING_CONFORMANCE_IAC=cdk`` runs the same scenarios on kindling.tools.cdk's KindlingWorker
(infra/cdk/deploy.py) instead of template.yaml.
"""

from __future__ import annotations

import os
import re
import traceback
from concurrent.futures import ThreadPoolExecutor

import pytest
from conformance import known, test_admission, test_data, test_outcomes
from conformance.deployed import PARAMETERS, STACK, DeployedStack, ship_conformance_tasks
from conformance.grid import check
from conformance.scenario import table

pytestmark = [pytest.mark.slow, pytest.mark.localstack, pytest.mark.conformance]

SCENARIOS = table(*test_outcomes.SCENARIOS.values(), *test_admission.SCENARIOS.values(),
                  *test_data.SCENARIOS.values())
ONE_AT_A_TIME = ["rejected_not_json", "rejected_unknown_task", "rejected_wrong_arguments",
                 "refused_wrong_arguments_at_the_call", "celery_message_with_callback",
                 "empty_chord"]  # they read every record
LAST = ["not_before_ahead", "delay_past_sqs_maximum"]  # their jobs stay held: the queue is never quiet again
RUN = [s for s in SCENARIOS if s not in known.STACK_NOT_RUN and known.verdict(STACK, s) is None]
AT_ONCE = [s for s in RUN if s not in ONE_AT_A_TIME + LAST]


def _run(path: DeployedStack, scenario: str):
    try:
        return SCENARIOS[scenario].run(path)
    except Exception as exc:  # noqa: BLE001 - reported by the scenario's own cell
        return exc


def _deployed(request, tmp_path_factory) -> dict:
    """The stack's outputs: template.yaml's, or with KINDLING_CONFORMANCE_IAC=cdk the construct's
    with the same parameters."""
    build_dir = tmp_path_factory.mktemp("conformance-stack")
    if os.environ.get("KINDLING_CONFORMANCE_IAC", "sam") == "cdk":
        deploy = request.getfixturevalue("deploy_cdk_stack")
        keywords = {re.sub(r"(?<!^)(?=[A-Z])", "_", k).lower(): int(v) for k, v in PARAMETERS.items()}
        return deploy("kindling-conformance-cdk", keywords, build_dir, prepare=ship_conformance_tasks)
    deploy = request.getfixturevalue("deploy_stack")
    return deploy("kindling-conformance", PARAMETERS, build_dir=build_dir, prepare=ship_conformance_tasks)


@pytest.fixture(scope="module")
def outcomes(request, tmp_path_factory) -> dict:
    from kindling.producer import dispatch

    outputs = _deployed(request, tmp_path_factory)
    path = DeployedStack(outputs)
    path.purge()  # an earlier run's held job (not_before_ahead) would keep the queue busy for an hour
    saved = dispatch.installed()
    dispatch.set_producer(path.producer())
    try:
        seen = {}
        for scenario in ONE_AT_A_TIME:
            path.begin()
            seen[scenario] = _run(path, scenario)
        with ThreadPoolExecutor(len(AT_ONCE)) as pool:
            seen.update(zip(AT_ONCE, pool.map(lambda s: _run(path, s), AT_ONCE), strict=True))
        path.holding = True
        for scenario in LAST:
            seen[scenario] = _run(path, scenario)
        return seen
    finally:
        dispatch.set_producer(saved)
        path.purge()


_column: dict[str, str] = {}


def _cells() -> list:
    out = []
    for scenario in SCENARIOS:
        verdict = known.verdict(STACK, scenario)
        if scenario in known.STACK_NOT_RUN:
            marks = [pytest.mark.skip(reason=f"not run on the stack: {known.STACK_NOT_RUN[scenario]}")]
        elif verdict is not None:
            marks = [pytest.mark.skip(reason=f"exception: {verdict[1]}")]
        else:
            marks = []
        out.append(pytest.param(scenario, marks=marks, id=scenario))
    return out


@pytest.mark.parametrize("scenario", _cells())
def test_the_deployed_stack_records_what_every_path_records(outcomes, scenario):
    observed = outcomes[scenario]
    if isinstance(observed, BaseException):
        _column[scenario] = "FAILS"
        pytest.fail("".join(traceback.format_exception(observed)))
    try:
        check(STACK, scenario, observed, SCENARIOS[scenario].expect)
    except AssertionError:
        _column[scenario] = "FAILS"
        raise
    excepted = known.excepted(STACK, scenario)
    _column[scenario] = "= " + "; ".join(f"but {k}: exception" for k in excepted) if excepted else "="


def teardown_module() -> None:
    target = os.environ.get("KINDLING_CONFORMANCE_MATRIX_STACK")
    if not target:
        return
    lines = [f"| scenario | {STACK} |", "|---|---|"]
    for scenario in SCENARIOS:
        if scenario in known.STACK_NOT_RUN:
            cell = f"not run: {known.STACK_NOT_RUN[scenario]}"
        elif known.verdict(STACK, scenario) is not None:
            cell = f"exception: {known.verdict(STACK, scenario)[1]}"
        else:
            cell = _column.get(scenario, "")
        lines.append(f"| {scenario} | {cell} |")
    with open(target, "w") as f:
        f.write("\n".join(lines) + "\n")
