"""kindling.core.backoff: full-jitter exponential backoff without the random module."""


import pytest
from hypothesis import given
from hypothesis import strategies as st
from kindling.core.backoff import compute_backoff


@given(
    attempt=st.integers(1, 10_000),
    base=st.floats(0, 1e3, allow_nan=False),
    cap=st.floats(0, 1e6, allow_nan=False),
)
def test_delay_is_under_the_doubling_ceiling(attempt, base, cap):
    ceiling = min(cap, base * 2.0 ** min(attempt - 1, 1000))
    assert 0 <= compute_backoff(attempt, base=base, cap=cap) <= ceiling


def test_the_ceiling_doubles_until_the_cap():
    for attempt, ceiling in [(1, 0.05), (2, 0.1), (3, 0.2), (6, 1.6), (7, 2.0), (50, 2.0), (5000, 2.0)]:
        delays = [compute_backoff(attempt, base=0.05, cap=2.0) for _ in range(2000)]
        assert max(delays) < ceiling
        # Full jitter: spread over the whole range, not bunched at the top or the bottom.
        assert min(delays) < ceiling * 0.05 and max(delays) > ceiling * 0.95
        assert 0.4 < sum(delays) / len(delays) / ceiling < 0.6


def test_bad_arguments_are_refused():
    for attempt, base, cap in [(0, 1.0, 1.0), (-1, 1.0, 1.0), (1, -1.0, 1.0), (1, 1.0, -0.5)]:
        with pytest.raises(ValueError):
            compute_backoff(attempt, base=base, cap=cap)


def test_a_pause_never_exceeds_the_ceiling_it_announces_and_resets_when_the_dependency_answers():
    from kindling.core.backoff import Pauses, backoff_ceiling

    pauses = Pauses(base=0.05, cap=5.0)
    announced = []
    for _ in range(12):
        announced.append(pauses.delay)
        assert 0 <= pauses.next() <= announced[-1]
    assert announced == [backoff_ceiling(n, base=0.05, cap=5.0) for n in range(1, 13)]
    assert announced[:3] == [0.05, 0.1, 0.2] and announced[-1] == 5.0
    pauses.reset()
    assert pauses.delay == 0.05
