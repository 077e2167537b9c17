"""The stream worker's read size: grown by quick, full rounds, shrunk by slow ones."""

import pytest
from kindling.core.valkey.readsize import MOST, ReadSize


def test_quick_full_rounds_double_the_read_up_to_the_most():
    size = ReadSize(100, 800, quick_s=0.1)
    assert [size.after(True, 0.01) for _ in range(5)] == [200, 400, 800, 800, 800]


def test_a_short_read_keeps_the_size_where_it_is():
    size = ReadSize(100, 800, quick_s=0.1)
    size.after(True, 0.01)
    assert size.after(False, 0.01) == 200  # no backlog now: nothing to spread the round trips over


def test_a_round_between_quick_and_slow_keeps_the_size():
    size = ReadSize(100, 800, quick_s=0.1)
    size.after(True, 0.01)
    assert size.after(True, 0.2) == 200


def test_slow_rounds_halve_the_read_back_to_the_first_size_and_no_lower():
    size = ReadSize(100, 800, quick_s=0.1)
    for _ in range(3):
        size.after(True, 0.01)
    assert [size.after(True, 0.5) for _ in range(4)] == [400, 200, 100, 100]


def test_slow_jobs_never_grow_the_read():
    size = ReadSize(100, 800, quick_s=0.1)
    assert {size.after(True, 0.15) for _ in range(10)} == {100}


def test_the_most_defaults_to_2000_and_is_never_below_the_first_size():
    assert ReadSize(100).most == MOST == 2000
    assert ReadSize(5000).most == 5000
    fixed = ReadSize(50, 50)
    assert {fixed.after(True, 0.0) for _ in range(3)} == {50}


def test_a_read_of_nothing_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        ReadSize(0)
