"""The results policy (``@task(results=...)``, ``KINDLING_RESULTS_POLICY``): which outcomes
get a record, and what a policy that keeps less gives up (the duplicate check). One table,
every path: the rule lives in the runner, every trigger inherits it."""

from __future__ import annotations

import time

import pytest
from conformance import scenario_tasks as tasks
from conformance.grid import cells, check


def _key(name: str) -> str:
    return f"{name}-{time.monotonic_ns()}"


def _twice(path, task, key: str, *args) -> dict:
    """The same job id sent, run, and sent again: a duplicate delivery after its success."""
    path.enqueue(task, key, *args, job_id=key)
    path.run_until_settled()
    path.enqueue(task, key, *args, job_id=key)
    path.run_until_settled()
    return {"runs": tasks.RUNS.get(key, 0), "records": sorted(r["status"] for r in path.records())}


def failures_success(path):
    return _twice(path, tasks.count_failures, _key("failures-ok"))


def none_success(path):
    return _twice(path, tasks.count_none, _key("none-ok"))


def all_success(path):
    return _twice(path, tasks.count_all, _key("all-ok"))


def deployment_policy_success(path):
    """A task without results= under the deployment's policy."""
    return _twice(path, tasks.count, _key("deployed"))


def _failing(path, task, failures: int, **options) -> dict:
    key = _key(task.name)
    job = path.enqueue(task, key, failures, job_id=key, **options)
    path.run_until_settled()
    seen = path.observe(job)
    return {"runs": tasks.RUNS.get(key, 0), "status": seen["status"], "attempts": seen["attempts"],
            "error": seen["error"]}


def failures_dead(path):
    return _failing(path, tasks.count_failures, 99, max_attempts=2)


def failures_retry_then_success(path):
    """The success after a failed attempt is recorded: it replaces that attempt's record."""
    return _failing(path, tasks.count_failures, 1)


def none_dead(path):
    """No failed record to count from: attempts come from the deliveries."""
    return _failing(path, tasks.count_none, 99, max_attempts=2)


def none_retry_then_success(path):
    return _failing(path, tasks.count_none, 1)


def rejected_under_none(path):
    from kindling.producer.client import Call

    path.send([Call("c.no_such_task", [], {})])
    path.run_until_settled()
    return {"records": sorted(r["status"] for r in path.records())}


def chord_under_none(path):
    """A chord is built from its members' and callback's records: kept whatever the deployment says."""
    from kindling import group

    handle = group([tasks.add.s(i, i) for i in range(3)]).then(tasks.total.s()).delay()
    path.run_until_settled()
    chord = path.record(f"chord#{handle.id}") or {}
    return {"chord": chord.get("status"), "callback": path.observe(f"{handle.id}.then")["result"],
            "members": [path.observe(i)["status"] for i in handle.member_ids]}


UNRECORDED = {"runs": 2, "records": []}
DEAD = {"runs": 2, "status": "dead", "attempts": 2, "error": "RuntimeError"}
SCENARIOS = {
    "results_failures_success_unrecorded_and_run_again": (failures_success, UNRECORDED),
    "results_none_success_unrecorded_and_run_again": (none_success, UNRECORDED),
    "results_all_success_recorded_and_skipped": (all_success, {"runs": 1, "records": ["succeeded"]}),
    "results_failures_dead_recorded": (failures_dead, DEAD),
    "results_failures_retry_then_success_recorded": (failures_retry_then_success, {
        "runs": 2, "status": "succeeded", "attempts": 2, "error": None}),
    "results_none_dead_recorded": (none_dead, DEAD),
    "results_none_retry_then_success_unrecorded": (none_retry_then_success, {
        "runs": 2, "status": None, "attempts": 0, "error": None}),
    "results_deployment_failures": (deployment_policy_success, UNRECORDED),
    "results_deployment_failures_task_all_wins": (all_success, {"runs": 1, "records": ["succeeded"]}),
    "results_deployment_none_rejected_recorded": (rejected_under_none, {"records": ["rejected"]}),
    "results_deployment_none_chord_recorded": (chord_under_none, {"chord": "completed", "callback": 6,
                                                                   "members": ["succeeded"] * 3}),
}

DEPLOYMENT = {
    "results_deployment_failures": {"KINDLING_RESULTS_POLICY": "failures"},
    "results_deployment_failures_task_all_wins": {"KINDLING_RESULTS_POLICY": "failures"},
    "results_deployment_none_rejected_recorded": {"KINDLING_RESULTS_POLICY": "none"},
    "results_deployment_none_chord_recorded": {"KINDLING_RESULTS_POLICY": "none"},
}


@pytest.mark.parametrize(("path_name", "scenario"), cells(SCENARIOS))
def test_every_path_keeps_what_the_results_policy_says(path, path_name, scenario):
    run, expected = SCENARIOS[scenario]
    check(path_name, scenario, run(path), expected)
