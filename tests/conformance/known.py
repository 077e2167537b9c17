"""Where the paths differ today, cell by cell.

``KNOWN``: differences that are defects, each a strict xfail in its cell. When a fix lands its
cells pass, the suite turns red (XPASS(strict)), and the entry is deleted here: the table only
ever shrinks. ``EXCEPTIONS``: differences that are intended, each with the reason the docs cite.
A key ``(path, scenario)`` excepts the whole cell (it is skipped with that reason); a key
``(path, scenario, observation)`` excepts only that observation (the cell still asserts every
other one, and the matrix shows which it left out). An excepted observation that no longer
differs fails its cell, as a strict xfail does: the exception is then deleted here.
"""

from __future__ import annotations

PATHS = ("sqs_handler", "sqs_loop", "stream_worker", "stream_valkey_store", "stream_drain", "eager")

KNOWN: dict[tuple[str, str], str] = {}

EXCEPTIONS: dict[tuple[str, ...], str] = {}

# -- eager mode ------------------------------------------------------------------------------

EAGER_NO_DELAY = ("eager mode waits no retry delay: it runs every attempt at once, inline, so a job asks for "
                  "none (status, attempts and error are the workers')")
EAGER_NO_DLQ = "eager mode has no dead letters: a dead job is only its record"
EAGER_NO_MESSAGE = ("eager mode has no message: a job is built from the call and run inline, so there is no "
                    "body to reject or sign, no delivery to crash, no not_before to hold it back")
for _scenario in ("default_retry_delay", "retry_then_success", "retry_on_listed", "dead_after_max_attempts",
                  "backoff", "retry_after", "retry_after_past_the_cap", "configured_retry_delay", "retry_delay_zero",
                  "configured_max_attempts", "hooks_retried_then_success", "hooks_dead"):
    EXCEPTIONS["eager", _scenario, "delays"] = EAGER_NO_DELAY
for _scenario in ("default_retry_delay", "backoff", "dead_after_max_attempts", "retry_on_unlisted", "no_retry_on",
                  "timeout", "configured_retry_delay", "retry_delay_zero", "configured_max_attempts", "hooks_dead"):
    EXCEPTIONS["eager", _scenario, "dead_letter"] = EAGER_NO_DLQ
for _scenario in ("rejected_not_json", "rejected_bad_signature", "rejected_unsigned",
                  "rejected_unsigned_delivered_too_often", "dead_delivered_too_often", "not_before_ahead",
                  "celery_message", "celery_message_with_callback", "not_due_on_its_last_delivery",
                  "due_past_the_receive_count", "not_before_past_retention", "celery_eta_past_retention",
                  "results_none_delayed_job_keeps_its_attempts"):
    EXCEPTIONS["eager", _scenario] = EAGER_NO_MESSAGE
for _path in ("stream_worker", "stream_valkey_store", "stream_drain"):
    EXCEPTIONS[_path, "due_past_the_receive_count"] = (
        "a Valkey stream costs a job not yet due no delivery (it waits in the stream's scheduled set, and a "
        "hand-back gives its delivery back): no receive count limits how far ahead it may be")
EXCEPTIONS["eager", "delay_past_sqs_maximum"] = "eager mode runs every job at once, inline: a delay is not waited for"
EXCEPTIONS["eager", "over_the_rate_limit"] = (
    "eager mode runs every job at once, inline, as Celery's eager mode does: a rate limit is not waited for")
for _path in ("sqs_loop", "stream_worker", "stream_valkey_store", "eager"):
    EXCEPTIONS[_path, "hook_past_budget"] = (
        "a long-lived worker (and eager mode) has no invocation budget: its hooks run on the batch's thread to "
        "their end")
EXCEPTIONS["eager", "large_result"] = (
    "eager mode has no payload bucket: a result over 350,000 bytes is ResultTooLarge, as on any worker without one")


def verdict(path: str, scenario: str) -> tuple[str, str] | None:
    """``("xfail", reason)``, ``("exception", reason)`` or ``None`` (the cell must hold, but
    for the observations :func:`excepted` names)."""
    if (path, scenario) in EXCEPTIONS:
        return "exception", EXCEPTIONS[path, scenario]
    if (path, scenario) in KNOWN:
        return "xfail", KNOWN[path, scenario]
    return None


def excepted(path: str, scenario: str) -> dict[str, str]:
    """``{observation: reason}``: what the cell leaves out of its comparison, and why."""
    return {key[2]: reason for key, reason in EXCEPTIONS.items() if len(key) == 3 and key[:2] == (path, scenario)}

# -- the deployed stack (tests/stack/test_conformance_stack.py, slow) -------------------------------

STACK = "deployed_stack"
# Cells the deployed stack does not run: each rule is the same LambdaWorker's, proved on
# sqs_handler above; what the stack adds (its event source mapping, its DLQ, its function's
# environment) is what the cells it runs compare.
NO_PYDANTIC = "the deployed function ships no pydantic (a task module that uses it ships it in requirements.txt)"
STACK_NOT_RUN = {
    "rejected_bad_signature": "signing needs a stack deployed with a signing key: tests/stack/test_signed_stack.py",
    "rejected_unsigned": "signing needs a stack deployed with a signing key: tests/stack/test_signed_stack.py",
    "rejected_unsigned_delivered_too_often": "the test cannot kill the deployed function in the middle of a batch",
    "dead_delivered_too_often": "the test cannot kill the deployed function in the middle of a batch",
    "not_due_on_its_last_delivery": "the test cannot kill the deployed function in the middle of a batch",
    "retry_after_past_the_cap": "a real 12-hour wait",
    "retry_delay_zero": "a second deployment (RetryDelay=0) that waits out SQS's 30 s visibility twice",
    "configured_max_attempts": "a second deployment (MaxAttempts=2): the stack reads it as sqs_handler does",
    "model_argument": NO_PYDANTIC,
    "model_argument_invalid": NO_PYDANTIC,
    "over_the_rate_limit": "its 1/h window is counted in the stack's table: a second run within the hour finds it used",
    "configured_result_ttl": "a second deployment (ResultTtlDays=2): the stack reads it as sqs_handler does",
    "rejected_delivery_that_breaks_the_runner": ("the runner is broken by patching it in the test's process; the "
                                                 "deployed function's runs in LocalStack's"),
}
STACK_UNSEEN_DELAYS = ("the deployed function asks for its delays inside LocalStack (its ChangeMessageVisibility "
                       "calls): the test sees the outcome, not the delay; sqs_handler runs the same LambdaWorker "
                       "and sees both")
for _scenario in ("default_retry_delay", "retry_then_success", "backoff", "retry_after", "retry_on_listed",
                  "dead_after_max_attempts", "configured_retry_delay", "not_before_ahead"):
    EXCEPTIONS[STACK, _scenario, "delays"] = STACK_UNSEEN_DELAYS
for _scenario in ("duplicate_skipped", "duplicate_run_again_without_skip_succeeded", "dead_id_sent_again",
                  "results_none_delayed_job_keeps_its_attempts"):
    EXCEPTIONS[STACK, _scenario, "runs"] = ("the deployed function runs in LocalStack's Lambda process: the test "
                                            "counts no runs there (status and attempts are compared)")
