"""Where the paths differ today, cell by cell.

``KNOWN``: differences that are defects, each a strict xfail in its cell. When a fix lands its
cells pass, the suite turns red (XPASS(strict)), and the entry is deleted here: the table only
ever shrinks. ``EXCEPTIONS``: differences that are intended, each with the reason the docs cite;
those cells are skipped with that reason.

Keys are ``(path, scenario)``; ``"*"`` as the path means every path but the ones named.
"""

from __future__ import annotations

PATHS = ("sqs_handler", "sqs_loop", "stream_worker", "stream_drain", "eager")

STREAM_IGNORES_DELAYS = ("the stream paths ignore the retry delay asked for: a failed entry stays pending and "
                         "is reclaimed after the visibility time (30 s)")
LOOP_DEFAULT_DELAY = ("kindling worker --queue-url has no default retry delay: a failed job waits out the "
                      "queue's visibility timeout (30 s), not the template's RetryDelay (5 s, doubling)")
EAGER_RUNS_ONCE = "eager mode runs a failing job once, its first attempt (README, Sending jobs: eager mode)"
EAGER_NO_DLQ = "eager mode has no dead letters: a dead job is only its record"

KNOWN: dict[tuple[str, str], str] = {}
for _scenario in ("default_retry_delay", "retry_then_success", "retry_on_listed", "dead_after_max_attempts"):
    KNOWN["sqs_loop", _scenario] = LOOP_DEFAULT_DELAY
for _scenario in ("default_retry_delay", "retry_then_success", "retry_on_listed", "dead_after_max_attempts",
                  "backoff", "retry_after"):
    KNOWN["stream_worker", _scenario] = KNOWN["stream_drain", _scenario] = STREAM_IGNORES_DELAYS

EXCEPTIONS: dict[tuple[str, str], str] = {}
for _scenario in ("default_retry_delay", "retry_then_success", "retry_on_listed", "dead_after_max_attempts",
                  "backoff", "retry_after"):
    EXCEPTIONS["eager", _scenario] = EAGER_RUNS_ONCE
for _scenario in ("retry_on_unlisted", "no_retry_on", "timeout"):
    EXCEPTIONS["eager", _scenario] = EAGER_NO_DLQ


def verdict(path: str, scenario: str) -> tuple[str, str] | None:
    """``("xfail", reason)``, ``("exception", reason)`` or ``None`` (the cell must hold)."""
    if (path, scenario) in EXCEPTIONS:
        return "exception", EXCEPTIONS[path, scenario]
    if (path, scenario) in KNOWN:
        return "xfail", KNOWN[path, scenario]
    return None

KNOWN["stream_worker", "rejected_unsigned_delivered_too_often"] = KNOWN[
    "stream_drain", "rejected_unsigned_delivered_too_often"] = (
    "an unsigned entry delivered past max attempts is recorded dead (TooManyDeliveries) by the stream's "
    "delivery-count check before its signature is checked")

EAGER_NO_MESSAGE = ("eager mode has no message: a job is built from the call and run inline, so there is no "
                    "body to reject, no delivery to crash, no not_before to hold it back")
for _scenario in ("rejected_not_json", "rejected_unknown_task", "rejected_wrong_arguments", "rejected_bad_signature",
                  "rejected_unsigned", "rejected_unsigned_delivered_too_often", "dead_delivered_too_often",
                  "not_before_ahead"):
    EXCEPTIONS["eager", _scenario] = EAGER_NO_MESSAGE
EXCEPTIONS["sqs_handler", "delay_past_sqs_maximum"] = EXCEPTIONS["sqs_loop", "delay_past_sqs_maximum"] = (
    "SQS holds a message back at most 900 s: the Client refuses a longer delay (ValueError) before sending")
EXCEPTIONS["eager", "delay_past_sqs_maximum"] = "eager mode runs every job at once, inline: a delay is not waited for"

ORJSON_NAN = "producers (orjson) send NaN and infinities as null instead of refusing them"
ORJSON_BIG_INT = "orjson (producers, long-lived workers) refuses integers past 64 bits that JSON text holds"
STDLIB_INT_KEYS = "the standard codec (Lambda, eager) turns non-string keys into strings instead of refusing them"
STDLIB_DEPTH = "the standard codec (Lambda, eager) accepts nesting orjson refuses (over 255 levels)"
for _path in ("sqs_handler", "sqs_loop", "stream_worker", "stream_drain"):
    KNOWN[_path, "argument_nan"] = KNOWN[_path, "argument_inf"] = ORJSON_NAN
    KNOWN[_path, "argument_int_2_70"] = ORJSON_BIG_INT
for _path in ("sqs_loop", "stream_worker"):
    KNOWN[_path, "result_nan"] = KNOWN[_path, "result_inf"] = (
        "a long-lived worker (orjson) records a NaN or infinite result as null, succeeded; the Lambda codec "
        "refuses it")
    KNOWN[_path, "result_int_2_70"] = ORJSON_BIG_INT
for _path in ("sqs_handler", "stream_drain", "eager"):
    KNOWN[_path, "result_int_keys"] = STDLIB_INT_KEYS
    KNOWN[_path, "result_nested_2000"] = STDLIB_DEPTH
KNOWN["eager", "argument_int_keys"] = STDLIB_INT_KEYS
KNOWN["eager", "argument_nested_2000"] = STDLIB_DEPTH
EXCEPTIONS["eager", "large_result"] = (
    "eager mode has no payload bucket: a result over 350,000 bytes is ResultTooLarge, as on any worker without one")
