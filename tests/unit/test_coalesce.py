"""Concurrent awaits coalesced into batches (kindling.producer.coalesce): batch sizes, each await's own
outcome in its own place, and cancellation that takes out one call and nothing else."""

from __future__ import annotations

import asyncio
import threading

import pytest
from kindling.producer.coalesce import Coalescer


class Recorder:
    """A batch function: records each batch, fails the calls named in ``fail``."""

    def __init__(self, fail=(), gate: threading.Event | None = None):
        self.batches: list[list] = []
        self.fail = set(fail)
        self.gate = gate

    def __call__(self, calls: list) -> list:
        if self.gate is not None:
            self.gate.wait(10)
        self.batches.append(list(calls))
        return [ValueError(f"refused {c}") if c in self.fail else f"sent {c}" for c in calls]


def test_concurrent_awaits_go_in_batches_of_at_most_max_batch():
    send = Recorder()
    coalescer = Coalescer(send, max_batch=10, max_flights=8)

    async def main():
        return await asyncio.gather(*(coalescer.submit(i) for i in range(95)))

    assert asyncio.run(main()) == [f"sent {i}" for i in range(95)]
    assert len(send.batches) == 10  # ceil(95 / 10)
    assert sorted(c for b in send.batches for c in b) == list(range(95))
    assert max(len(b) for b in send.batches) == 10


def test_one_flight_at_a_time_takes_everything_that_waited_for_it():
    send = Recorder()
    coalescer = Coalescer(send, max_batch=500, max_flights=1)

    async def main():
        first = asyncio.ensure_future(coalescer.submit("alone"))
        await asyncio.sleep(0)  # the first batch leaves with one call
        rest = [asyncio.ensure_future(coalescer.submit(i)) for i in range(30)]
        return await first, await asyncio.gather(*rest)

    alone, rest = asyncio.run(main())
    assert alone == "sent alone" and rest == [f"sent {i}" for i in range(30)]
    assert [len(b) for b in send.batches] == [1, 30]


def test_each_await_gets_its_own_outcome_in_its_own_place():
    send = Recorder(fail={3, 7})
    coalescer = Coalescer(send, max_batch=10)

    async def main():
        return await asyncio.gather(*(coalescer.submit(i) for i in range(10)), return_exceptions=True)

    outcomes = asyncio.run(main())
    assert [type(o).__name__ for o in outcomes] == ["str"] * 3 + ["ValueError"] + ["str"] * 3 + ["ValueError"] + \
        ["str"] * 2
    assert str(outcomes[3]) == "refused 3" and str(outcomes[7]) == "refused 7"
    assert outcomes[8] == "sent 8" and len(send.batches) == 1


def test_a_batch_that_raises_fails_its_own_calls_and_no_later_batch():
    calls = []

    def send(batch):
        calls.append(batch)
        if len(calls) == 1:
            raise ConnectionError("no route")
        return [f"sent {c}" for c in batch]

    coalescer = Coalescer(send, max_batch=2, max_flights=1)

    async def main():
        return await asyncio.gather(*(coalescer.submit(i) for i in range(4)), return_exceptions=True)

    outcomes = asyncio.run(main())
    assert [type(o).__name__ for o in outcomes[:2]] == ["ConnectionError"] * 2
    assert outcomes[2:] == ["sent 2", "sent 3"]


def test_a_call_cancelled_before_its_batch_leaves_is_never_sent_and_the_others_are():
    send = Recorder()
    coalescer = Coalescer(send, max_batch=10)

    async def main():
        tasks = [asyncio.ensure_future(coalescer.submit(i)) for i in range(5)]
        await asyncio.sleep(0)  # every call is waiting; the flush runs next
        tasks[2].cancel()
        return await asyncio.gather(*tasks, return_exceptions=True)

    outcomes = asyncio.run(main())
    assert isinstance(outcomes[2], asyncio.CancelledError)
    assert [outcomes[i] for i in (0, 1, 3, 4)] == ["sent 0", "sent 1", "sent 3", "sent 4"]
    assert send.batches == [[0, 1, 3, 4]]


def test_a_call_cancelled_while_its_batch_is_out_is_sent_and_the_others_get_their_outcomes():
    gate = threading.Event()
    send = Recorder(gate=gate)
    coalescer = Coalescer(send, max_batch=10)

    async def main():
        tasks = [asyncio.ensure_future(coalescer.submit(i)) for i in range(5)]
        for _ in range(3):
            await asyncio.sleep(0)  # the batch has left for its thread, which waits at the gate
        tasks[1].cancel()
        await asyncio.sleep(0)
        gate.set()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        later = await coalescer.submit("later")  # the coalescer still works
        return outcomes, later

    outcomes, later = asyncio.run(main())
    assert isinstance(outcomes[1], asyncio.CancelledError)
    assert [outcomes[i] for i in (0, 2, 3, 4)] == ["sent 0", "sent 2", "sent 3", "sent 4"]
    assert send.batches[0] == [0, 1, 2, 3, 4] and later == "sent later"


def test_a_batch_function_answering_the_wrong_number_of_outcomes_fails_its_calls():
    coalescer = Coalescer(lambda calls: ["one"], max_batch=10)

    async def main():
        return await asyncio.gather(*(coalescer.submit(i) for i in range(3)), return_exceptions=True)

    assert all(isinstance(o, RuntimeError) for o in asyncio.run(main()))


def test_a_coalescer_serves_one_event_loop_after_another():
    send = Recorder()
    coalescer = Coalescer(send, max_batch=10)
    assert asyncio.run(coalescer.submit("a")) == "sent a"
    assert asyncio.run(coalescer.submit("b")) == "sent b"


@pytest.mark.parametrize("kwargs", [{"max_batch": 0}, {"max_batch": 1, "max_flights": 0}])
def test_sizes_must_be_positive(kwargs):
    with pytest.raises(ValueError, match="at least 1"):
        Coalescer(lambda calls: calls, **kwargs)
