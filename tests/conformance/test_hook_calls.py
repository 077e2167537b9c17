"""Hooks (kindling.engine.hooks): once per recorded outcome, in order, on every path; a hook that
raises changes no outcome."""

from __future__ import annotations

import pytest
from conformance import scenario_tasks as tasks
from conformance.grid import cells
from conformance.scenario import Scenario, table, verify


def with_hooks(path, job: str) -> dict:
    """The job's observations and the hooks called for it: (hook, attempt, error type), in order."""
    return dict(path.observe(job), hooks=tasks.HOOK_CALLS.get(job, []))


def hook_past_budget(path):
    """A hook still running when the invocation's budget ends: abandoned, the batch settled."""
    # Enough for the drain to read (it stops below twice KINDLING_SAFETY_MS, 1 s, plus 0.5 s)
    # and for the job to start; its hook is cut half a second before the end.
    path.budget_ms = 3_500
    tasks.SLOW_HOOK_RELEASE.clear()
    try:
        job = path.enqueue(tasks.slow_hook)
        path.run_until_settled()
        return with_hooks(path, job)
    finally:
        tasks.SLOW_HOOK_RELEASE.set()


OK = {"error": None, "dead_letter": False}
SCENARIOS = table(
    Scenario("hooks_success", tasks.hooked, observe=with_hooks, expect=dict(
        OK, status="succeeded", attempts=1, result=1, delays=[], hooks=[
            ("task.on_success", 1, None), ("on_success", 1, None)])),
    Scenario("hooks_retried_then_success", tasks.hooked, (1,), observe=with_hooks, expect=dict(
        OK, status="succeeded", attempts=2, result=2, delays=[5], hooks=[
            ("task.on_failure", 1, "RuntimeError"), ("on_failure", 1, "RuntimeError"),
            ("task.on_success", 2, None), ("on_success", 2, None)])),
    Scenario("hooks_dead", tasks.hooked, (5,), {"max_attempts": 2}, observe=with_hooks, expect={
        "status": "dead", "attempts": 2, "error": "RuntimeError", "result": None, "delays": [5],
        "dead_letter": True, "hooks": [
            ("task.on_failure", 1, "RuntimeError"), ("on_failure", 1, "RuntimeError"),
            ("task.on_failure", 2, "RuntimeError"), ("on_failure", 2, "RuntimeError"),
            ("task.on_dead", 2, "RuntimeError"), ("on_dead", 2, "RuntimeError")]}),
    # The task's hook raised: the job is still succeeded, once, and the registry's hook still ran.
    Scenario("hook_raises", tasks.hook_raises, observe=with_hooks, expect=dict(
        OK, status="succeeded", attempts=1, result="done", delays=[], hooks=[
            ("task.on_success", 1, None), ("on_success", 1, None)])),
    # The same for a hook raising a BaseException that is not an Exception.
    Scenario("hook_raises_base_exception", tasks.hook_interrupts, observe=with_hooks, expect=dict(
        OK, status="succeeded", attempts=1, result="done", delays=[], hooks=[
            ("task.on_success", 1, None), ("on_success", 1, None)])),
    # The task's hook outlived the invocation's budget: abandoned, the registry's never called,
    # the job recorded and its message settled once.
    Scenario("hook_past_budget", steps=hook_past_budget, expect=dict(
        OK, status="succeeded", attempts=1, result="done", delays=[], hooks=[("task.on_success", 1, None)])),
)


@pytest.mark.parametrize(("path_name", "scenario"), cells(SCENARIOS))
def test_every_path_calls_each_hook_once_per_recorded_outcome(path, path_name, scenario):
    verify(SCENARIOS, path, path_name, scenario)
