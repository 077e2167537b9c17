"""Success, failure, retries and their timing, time limits and death: one table, every path.

The expected delays are docs/tasks.md's: a task's ``Backoff``, else ``Retry(after=)``, else the
deployed default (the template's ``RetryDelay``, 5 s, doubling per attempt).
"""

from __future__ import annotations

import pytest
from conformance import scenario_tasks as tasks
from conformance.grid import cells, check


def success(path):
    job = path.enqueue(tasks.add, 1, 2)
    path.run_until_settled()
    return path.observe(job)


def default_retry_delay(path):
    job = path.enqueue(tasks.fail, "no options")
    path.run_until_settled()
    return path.observe(job)


def retry_then_success(path):
    job = path.enqueue(tasks.flaky, 1)
    path.run_until_settled()
    return path.observe(job)


def backoff(path):
    job = path.enqueue(tasks.backoff_fail)
    path.run_until_settled()
    return path.observe(job)


def retry_after(path):
    job = path.enqueue(tasks.retry_after, 42)
    path.run_until_settled()
    return path.observe(job)


def retry_after_past_the_cap(path):
    """A retry asked for past kindling.core.policy.MAX_DELAY_S (12 h) waits 12 h on every path.
    Observed to the hour: SQS hides a delivery at most 12 h from its receive, so an SQS
    trigger asks for 12 h less the time the message may have been in flight (the loop: its
    batch's run; Lambda: up to its batching window and init, 311 s, too)."""
    job = path.enqueue(tasks.retry_after, 100_000)
    path.run_until_settled()
    seen = path.observe(job)
    return dict(seen, delays=[round(d / 3600) for d in seen["delays"]])


def retry_on_listed(path):
    job = path.enqueue(tasks.retry_on, "connection")
    path.run_until_settled()
    return path.observe(job)


def retry_on_unlisted(path):
    job = path.enqueue(tasks.retry_on, "value")
    path.run_until_settled()
    return path.observe(job)


def no_retry_on(path):
    job = path.enqueue(tasks.no_retry_on)
    path.run_until_settled()
    return path.observe(job)


def dead_after_max_attempts(path):
    job = path.enqueue(tasks.fail, "last words", max_attempts=2)
    path.run_until_settled()
    return path.observe(job)


def configured_retry_delay(path):
    job = path.enqueue(tasks.fail, "deployment's delay")
    path.run_until_settled()
    return path.observe(job)


def configured_max_attempts(path):
    job = path.enqueue(tasks.fail, "deployment's attempts")
    path.run_until_settled()
    return path.observe(job)


def configured_result_ttl(path):
    """How long the record is kept: the deployment's days, to the day, on every path."""
    import time

    job = path.enqueue(tasks.add, 1, 2)
    path.run_until_settled()
    expires_at = (path.record(job) or {}).get("expires_at")
    return {"status": path.observe(job)["status"],
            "kept_days": round((int(expires_at) - time.time()) / 86_400) if expires_at else None}


def timeout(path):
    job = path.enqueue(tasks.slow, 1.0, max_attempts=1)
    path.run_until_settled()
    return path.observe(job)


OK = {"error": None, "dead_letter": False}
SCENARIOS = {
    "success": (success, dict(OK, status="succeeded", attempts=1, result=3, delays=[])),
    "default_retry_delay": (default_retry_delay, {"status": "dead", "attempts": 3, "error": "RuntimeError",
                                                  "result": None, "delays": [5, 10], "dead_letter": True}),
    "retry_then_success": (retry_then_success, dict(OK, status="succeeded", attempts=2, result=2, delays=[5])),
    "backoff": (backoff, {"status": "dead", "attempts": 3, "error": "RuntimeError", "result": None,
                          "delays": [7, 14], "dead_letter": True}),
    "retry_after": (retry_after, dict(OK, status="succeeded", attempts=2, result=2, delays=[42])),
    "retry_after_past_the_cap": (retry_after_past_the_cap, dict(OK, status="succeeded", attempts=2, result=2,
                                                                delays=[12])),  # hours
    "retry_on_listed": (retry_on_listed, dict(OK, status="succeeded", attempts=2, result=2, delays=[5])),
    "retry_on_unlisted": (retry_on_unlisted, {"status": "dead", "attempts": 1, "error": "ValueError", "result": None,
                                              "delays": [], "dead_letter": True}),
    "no_retry_on": (no_retry_on, {"status": "dead", "attempts": 1, "error": "ValueError", "result": None,
                                  "delays": [], "dead_letter": True}),
    "dead_after_max_attempts": (dead_after_max_attempts, {"status": "dead", "attempts": 2, "error": "RuntimeError",
                                                          "result": None, "delays": [5], "dead_letter": True}),
    "configured_retry_delay": (configured_retry_delay, {"status": "dead", "attempts": 3, "error": "RuntimeError",
                                                        "result": None, "delays": [3, 6], "dead_letter": True}),
    "retry_delay_zero": (configured_retry_delay, {"status": "dead", "attempts": 3, "error": "RuntimeError",
                                                  "result": None, "delays": [30, 30], "dead_letter": True}),
    "configured_max_attempts": (configured_max_attempts, {"status": "dead", "attempts": 2, "error": "RuntimeError",
                                                          "result": None, "delays": [5], "dead_letter": True}),
    "configured_result_ttl": (configured_result_ttl, {"status": "succeeded", "kept_days": 2}),
    "timeout": (timeout, {"status": "dead", "attempts": 1, "error": "JobTimeout", "result": None, "delays": [],
                          "dead_letter": True}),
}


DEPLOYMENT = {
    # KINDLING_RETRY_DELAY (the template's RetryDelay): every trigger's default retry delay.
    "configured_retry_delay": {"KINDLING_RETRY_DELAY": "3"},
    # 0: retries are left to the trigger's redelivery, the queue's or stream's 30 s visibility.
    "retry_delay_zero": {"KINDLING_RETRY_DELAY": "0"},
    # KINDLING_MAX_ATTEMPTS (the template's MaxAttempts) and KINDLING_RESULT_TTL_DAYS (its
    # ResultTtlDays): every trigger's runner reads them, as the Lambda function does.
    "configured_max_attempts": {"KINDLING_MAX_ATTEMPTS": "2"},
    "configured_result_ttl": {"KINDLING_RESULT_TTL_DAYS": "2"},
}


@pytest.mark.parametrize(("path_name", "scenario"), cells(SCENARIOS))
def test_every_path_records_the_same_outcome(path, path_name, scenario):
    run, expected = SCENARIOS[scenario]
    check(path_name, scenario, run(path), expected)
