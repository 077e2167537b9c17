"""The batch's Budget: a value with its own clock, the one place a remaining time is computed."""
import time

import pytest
from kindling.core.batch import Budget


class Context:
    """A Lambda context whose remaining time is read off the same clock as the budget's."""

    aws_request_id = "req"

    def __init__(self, ms: int):
        self.ends = time.monotonic() + ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.ends - time.monotonic()) * 1000))


def test_a_budget_without_a_clock_is_unbounded():
    budget = Budget(safety_ms=200, cutoff_ms=50)
    assert budget.ends is None and budget.left_ms() is None
    assert budget.started(None).ends is None and budget.lasting(None).left_ms() is None
    assert budget.run_by(None) is None and budget.job_limit(None, 7.0) == (7.0, False)


def test_started_takes_its_end_from_lambdas_remaining_time_less_a_reserve():
    context = Context(60_000)
    before = time.monotonic()
    budget = Budget(safety_ms=200, cutoff_ms=50).started(Budget.remaining_of(context), reserve_ms=Budget.REPLY_MS)
    assert (budget.safety_ms, budget.cutoff_ms) == (200, 50)  # the margins travel with the clock
    assert before + 59.9 <= budget.ends <= context.ends - 0.05
    assert 59_000 < budget.left_ms() <= 59_950


def test_a_context_without_a_remaining_time_gives_no_callback():
    assert Budget.remaining_of(None) is None and Budget.remaining_of(object()) is None
    assert Budget.deadline(Budget.remaining_of(None), Budget.REPLY_MS) is None


def test_lasting_runs_out_and_never_reports_less_than_nothing():
    assert Budget().lasting(-1.0).left_ms() == 0
    assert 9_000 < Budget().lasting(10.0).left_ms() <= 10_000


def test_a_budget_is_immutable_and_started_makes_a_new_one():
    policy = Budget(safety_ms=200, cutoff_ms=50)
    with pytest.raises(AttributeError):
        policy.safety_ms = 1
    with pytest.raises(AttributeError):
        policy.ends = 0.0
    assert policy.started(Context(5_000).get_remaining_time_in_millis) is not policy and policy.ends is None


def test_the_margins_are_cut_from_the_end():
    budget = Budget(safety_ms=1000, cutoff_ms=500)
    assert budget.run_by(100.0) == 99.0
    assert budget.upload_by(100.0) == budget.hooks_by(100.0) == 99.5
    assert budget.write_by(100.0) == 99.75
    assert budget.next_batch_ms == 2500  # a drain's next batch: cutoff and safety, and safety to hand on


def test_a_job_starts_only_with_the_cutoff_left_after_the_safety_margin():
    budget = Budget(safety_ms=1000, cutoff_ms=500)
    assert budget.job_limit(time.monotonic() + 1.2, 60.0) is None  # 0.2 s after the margin: under the cutoff
    seconds, by_invocation = budget.job_limit(time.monotonic() + 10.0, 60.0)
    assert by_invocation and 8.0 < seconds <= 9.0
    assert budget.job_limit(time.monotonic() + 10.0, 2.0) == (2.0, False)  # the job's own timeout is shorter
    assert Budget.seconds_to(time.monotonic() - 1.0) < 0
