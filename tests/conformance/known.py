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
