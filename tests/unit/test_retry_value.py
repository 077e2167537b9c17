"""Retry: attempts, waits and which errors, as one immutable value every retry loop uses."""
import time

import pytest
from kindling.core.policy import Retry, backoff_ceiling


def test_tries_count_from_one_and_exhaust_at_the_total():
    retry = Retry(3, base=0.05)
    assert list(retry.tries()) == [1, 2, 3]
    assert not retry.exhausted(2) and retry.exhausted(3)
    assert not Retry(None, base=0.05).exhausted(10_000)  # bounded by its deadline only
    with pytest.raises(ValueError):
        Retry(None, base=0.05).tries()


def test_the_waits_are_the_backoff_formulas_ceilings_and_full_jitter_below_them():
    fixed = Retry(16, base=0.05, cap=1.0, jitter=False)
    assert fixed.sleeps()[:6] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0] and len(fixed.sleeps()) == 15
    assert [fixed.delay(n) for n in (1, 2, 5, 6, 15)] == [0.05, 0.1, 0.8, 1.0, 1.0]
    assert Retry(3, base=0.1, jitter=False).sleeps() == [0.1, 0.2]  # STS web identity: botocore's
    jittered = Retry(None, base=0.1, cap=2.0)
    for n in (1, 2, 3, 8):
        assert all(0 <= jittered.delay(n) <= backoff_ceiling(n, base=0.1, cap=2.0) for _ in range(200))
    assert len({jittered.delay(5) for _ in range(20)}) > 1


def test_which_errors_are_retried_and_for_how_long():
    retry = Retry(3, base=0.05, on=(ConnectionError, TimeoutError))
    assert retry.retries(ConnectionRefusedError(), 1) and retry.retries(TimeoutError(), 2)
    assert not retry.retries(ConnectionError(), 3)  # the last attempt
    assert not retry.retries(ValueError(), 1)


def test_wait_sleeps_the_delay_unless_the_next_attempt_would_start_past_the_deadline():
    retry = Retry(5, base=1.0, jitter=False)
    slept: list[float] = []
    assert retry.wait(2, None, slept.append) and slept == [2.0]
    assert retry.wait(1, time.monotonic() + 60, slept.append) and slept == [2.0, 1.0]
    assert not retry.wait(1, time.monotonic() + 0.5, slept.append) and slept == [2.0, 1.0]  # no sleep at all


def test_a_clipped_wait_ends_at_the_deadline_and_tries_once_more():
    slept: list[float] = []
    assert Retry(5, base=10.0, jitter=False).wait(1, time.monotonic() + 0.5, slept.append, clip=True)
    assert 0 < slept[0] <= 0.5
    assert Retry(5, base=10.0, jitter=False).wait(1, time.monotonic() - 1, slept.append, clip=True)
    assert slept[1] == 0.0


def test_a_retry_is_an_immutable_value():
    retry = Retry(3, base=0.05, cap=2.0)
    with pytest.raises(AttributeError):
        retry.total = 5
    more = retry.replace(total=5)
    assert (retry.total, more.total, more.base, more.cap) == (3, 5, 0.05, 2.0)
    assert retry == Retry(3, base=0.05, cap=2.0) and hash(retry) == hash(Retry(3, base=0.05, cap=2.0))
    assert retry != more


def test_a_retry_refuses_what_no_loop_can_use():
    with pytest.raises(ValueError):
        Retry(0, base=0.05)
    with pytest.raises(ValueError):
        Retry(3, base=-1.0)
