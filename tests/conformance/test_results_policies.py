"""The results policy (``@task(results=...)``, ``KINDLING_RESULTS_POLICY``): which outcomes
get a record, and what a policy that keeps less gives up (the duplicate check). One table,
every path: the rule lives in the runner, every trigger inherits it."""

from __future__ import annotations

import time

import pytest
from conformance import scenario_tasks as tasks
from conformance.grid import cells
from conformance.scenario import Scenario, table, verify


def _key(name: str) -> str:
    return f"{name}-{time.monotonic_ns()}"


def sent_twice(task, name: str):
    """The same job id sent, run, and sent again: a duplicate delivery after its success."""

    def steps(path) -> dict:
        key = _key(name)
        path.enqueue(task, key, job_id=key)
        path.run_until_settled()
        path.enqueue(task, key, job_id=key)
        path.run_until_settled()
        return {"runs": tasks.RUNS.get(key, 0), "records": sorted(r["status"] for r in path.records())}

    return steps


def failing(task, failures: int, **options):
    """A job that fails its first ``failures`` runs: how often it ran, and its record."""

    def steps(path) -> dict:
        key = _key(task.name)
        job = path.enqueue(task, key, failures, job_id=key, **options)
        path.run_until_settled()
        seen = path.observe(job)
        return {"runs": tasks.RUNS.get(key, 0), "status": seen["status"], "attempts": seen["attempts"],
                "error": seen["error"]}

    return steps


def statuses(path, job: str) -> dict:
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
SCENARIOS = table(
    Scenario("results_failures_success_unrecorded_and_run_again",
             steps=sent_twice(tasks.count_failures, "failures-ok"), expect=UNRECORDED),
    Scenario("results_none_success_unrecorded_and_run_again", steps=sent_twice(tasks.count_none, "none-ok"),
             expect=UNRECORDED),
    Scenario("results_all_success_recorded_and_skipped", steps=sent_twice(tasks.count_all, "all-ok"),
             expect={"runs": 1, "records": ["succeeded"]}),
    Scenario("results_failures_dead_recorded", steps=failing(tasks.count_failures, 99, max_attempts=2), expect=DEAD),
    # The success after a failed attempt is recorded: it replaces that attempt's record.
    Scenario("results_failures_retry_then_success_recorded", steps=failing(tasks.count_failures, 1),
             expect={"runs": 2, "status": "succeeded", "attempts": 2, "error": None}),
    # No failed record to count from: attempts come from the deliveries.
    Scenario("results_none_dead_recorded", steps=failing(tasks.count_none, 99, max_attempts=2), expect=DEAD),
    Scenario("results_none_retry_then_success_unrecorded", steps=failing(tasks.count_none, 1),
             expect={"runs": 2, "status": None, "attempts": 0, "error": None}),
    # A task without results= under the deployment's policy.
    Scenario("results_deployment_failures", steps=sent_twice(tasks.count, "deployed"),
             deployment={"KINDLING_RESULTS_POLICY": "failures"}, expect=UNRECORDED),
    Scenario("results_deployment_failures_task_all_wins", steps=sent_twice(tasks.count_all, "all-ok"),
             deployment={"KINDLING_RESULTS_POLICY": "failures"}, expect={"runs": 1, "records": ["succeeded"]}),
    Scenario("results_deployment_none_rejected_recorded", "c.no_such_task", observe=statuses,
             deployment={"KINDLING_RESULTS_POLICY": "none"}, expect={"records": ["rejected"]}),
    Scenario("results_deployment_none_chord_recorded", steps=chord_under_none,
             deployment={"KINDLING_RESULTS_POLICY": "none"},
             expect={"chord": "completed", "callback": 6, "members": ["succeeded"] * 3}),
)


@pytest.mark.parametrize(("path_name", "scenario"), cells(SCENARIOS))
def test_every_path_keeps_what_the_results_policy_says(path, path_name, scenario):
    verify(SCENARIOS, path, path_name, scenario)
