"""Success, failure, retries and their timing, time limits and death: one table, every path.

The expected delays are docs/tasks.md's: a task's ``Backoff``, else ``Retry(after=)``, else the
deployed default (the template's ``RetryDelay``, 5 s, doubling per attempt).
"""

from __future__ import annotations

import time

import pytest
from conformance import scenario_tasks as tasks
from conformance.grid import cells
from conformance.scenario import Scenario, table, verify


def in_hours(path, job: str) -> dict:
    """A retry asked for past kindling.core.policy.MAX_DELAY_S (12 h) waits 12 h on every path.
    Observed to the hour: SQS hides a delivery at most 12 h from its receive, so an SQS
    trigger asks for 12 h less the time the message may have been in flight (the loop: its
    batch's run; Lambda: up to its batching window and init, 311 s, too)."""
    seen = path.observe(job)
    return dict(seen, delays=[round(d / 3600) for d in seen["delays"]])


def kept_days(path, job: str) -> dict:
    """How long the record is kept: the deployment's days, to the day, on every path."""
    expires_at = (path.record(job) or {}).get("expires_at")
    return {"status": path.observe(job)["status"],
            "kept_days": round((int(expires_at) - time.time()) / 86_400) if expires_at else None}


OK = {"error": None, "dead_letter": False}
SCENARIOS = table(
    Scenario("success", tasks.add, (1, 2), expect=dict(OK, status="succeeded", attempts=1, result=3, delays=[])),
    Scenario("default_retry_delay", tasks.fail, ("no options",), expect={
        "status": "dead", "attempts": 3, "error": "RuntimeError", "result": None, "delays": [5, 10],
        "dead_letter": True}),
    Scenario("retry_then_success", tasks.flaky, (1,), expect=dict(OK, status="succeeded", attempts=2, result=2,
                                                                  delays=[5])),
    Scenario("backoff", tasks.backoff_fail, expect={"status": "dead", "attempts": 3, "error": "RuntimeError",
                                                    "result": None, "delays": [7, 14], "dead_letter": True}),
    Scenario("retry_after", tasks.retry_after, (42,), expect=dict(OK, status="succeeded", attempts=2, result=2,
                                                                  delays=[42])),
    Scenario("retry_after_past_the_cap", tasks.retry_after, (100_000,), observe=in_hours,
             expect=dict(OK, status="succeeded", attempts=2, result=2, delays=[12])),
    Scenario("retry_on_listed", tasks.retry_on, ("connection",), expect=dict(OK, status="succeeded", attempts=2,
                                                                             result=2, delays=[5])),
    Scenario("retry_on_unlisted", tasks.retry_on, ("value",), expect={
        "status": "dead", "attempts": 1, "error": "ValueError", "result": None, "delays": [], "dead_letter": True}),
    Scenario("no_retry_on", tasks.no_retry_on, expect={
        "status": "dead", "attempts": 1, "error": "ValueError", "result": None, "delays": [], "dead_letter": True}),
    Scenario("dead_after_max_attempts", tasks.fail, ("last words",), {"max_attempts": 2}, expect={
        "status": "dead", "attempts": 2, "error": "RuntimeError", "result": None, "delays": [5],
        "dead_letter": True}),
    # KINDLING_RETRY_DELAY (the template's RetryDelay): every trigger's default retry delay.
    Scenario("configured_retry_delay", tasks.fail, ("deployment's delay",), deployment={"KINDLING_RETRY_DELAY": "3"},
             expect={"status": "dead", "attempts": 3, "error": "RuntimeError", "result": None, "delays": [3, 6],
                     "dead_letter": True}),
    # 0: retries are left to the trigger's redelivery, the queue's or stream's 30 s visibility.
    Scenario("retry_delay_zero", tasks.fail, ("deployment's delay",), deployment={"KINDLING_RETRY_DELAY": "0"},
             expect={"status": "dead", "attempts": 3, "error": "RuntimeError", "result": None, "delays": [30, 30],
                     "dead_letter": True}),
    # KINDLING_MAX_ATTEMPTS (the template's MaxAttempts) and KINDLING_RESULT_TTL_DAYS (its
    # ResultTtlDays): every trigger's runner reads them, as the Lambda function does.
    Scenario("configured_max_attempts", tasks.fail, ("deployment's attempts",),
             deployment={"KINDLING_MAX_ATTEMPTS": "2"},
             expect={"status": "dead", "attempts": 2, "error": "RuntimeError", "result": None, "delays": [5],
                     "dead_letter": True}),
    Scenario("configured_result_ttl", tasks.add, (1, 2), observe=kept_days,
             deployment={"KINDLING_RESULT_TTL_DAYS": "2"}, expect={"status": "succeeded", "kept_days": 2}),
    Scenario("timeout", tasks.slow, (1.0,), {"max_attempts": 1}, expect={
        "status": "dead", "attempts": 1, "error": "JobTimeout", "result": None, "delays": [], "dead_letter": True}),
)


@pytest.mark.parametrize(("path_name", "scenario"), cells(SCENARIOS))
def test_every_path_records_the_same_outcome(path, path_name, scenario):
    verify(SCENARIOS, path, path_name, scenario)
