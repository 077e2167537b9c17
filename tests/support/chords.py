"""A chord's completing member, failed or killed at each of its steps (kindling.engine.followups).

The same scenario runs on every result store that holds chords (memory, DynamoDB on moto,
Valkey): member 0 of a two-member chord succeeds, then member 1, the one that completes
the chord, is delivered through a :class:`Trap` that fails or kills it at its ``n``-th call
(the store's duplicate check, its record write, the count, the collection, the chord's
claim and mark, the callback's send, in whatever order the worker makes them); then the
member is delivered again, as a queue hands back a message that was not settled (or
delivers a message twice), while the callback runs and after the chord claim's lease
(:class:`Clock`). What the callback did is read off what was sent and what ran.
"""

from __future__ import annotations

from kindling.core.envelope import encode_job, new_job
from kindling.core.errors import StoreUnavailable
from kindling.engine.followups import callback_id, member_id
from kindling.engine.runner import Delivery, Runner


class Crash(BaseException):
    """The worker's process dying here: nothing after this point runs and the member's
    message is not settled, so the queue delivers it again."""


class Trap:
    """A result store and a send that note each call by name and, once, fail or die at the
    ``at``-th: before it (``after=False``: the call never happened) or after it (the call
    took effect but its caller never heard: a reply lost, a process killed just then)."""

    def __init__(self, store, sent: list):
        self._store, self._sent = store, sent
        self.calls: list[str] = []
        self.at: int | None = None
        self.error: BaseException | None = None
        self.after = False

    def arm(self, at: int | None, error: BaseException | None = None, *, after: bool = False) -> Trap:
        self.calls, self.at, self.error, self.after = [], at, error, after
        return self

    def fail_on(self, name: str, error: BaseException) -> Trap:
        """Fail the next call named ``name`` (before it takes effect), wherever it comes."""
        self.arm(None, error)
        self.on = name
        return self

    on: str | None = None

    def _step(self, name: str, fn, *args, **kwargs):
        n = len(self.calls)
        self.calls.append(name)
        hit = n == self.at or name == self.on
        if name == self.on:
            self.on = None
        if hit and not self.after:
            raise self.error  # type: ignore[misc]
        out = fn(*args, **kwargs)
        if hit and self.after:
            raise self.error  # type: ignore[misc]
        return out

    def __getattr__(self, name: str):
        attr = getattr(self._store, name)
        if name.startswith("_") or not callable(attr):
            return attr
        return lambda *args, **kwargs: self._step(name, attr, *args, **kwargs)

    def send(self, jobs: list) -> None:
        self._step("send", self._sent.extend, jobs)


def registry():
    """A fresh registry of :func:`chord_tasks`, its runs in ``reg.runs``."""
    from kindling.core.registry import Registry

    reg = Registry()
    reg.runs = []
    chord_tasks(reg)
    return reg


def chord_tasks(reg) -> None:
    """``add`` for the members and ``total`` for the callback, each noting its run in ``reg.runs``."""

    @reg.task(name="add")
    def add(a, b=0):
        reg.runs.append(("add", a, b))
        return a + b

    @reg.task(name="total")
    def total(results, extra=0):
        reg.runs.append(("total", results, extra))
        return sum(results) + extra


def chord_of_two(chord_id: str):
    """Two members of ``add`` and the callback ``total`` (:func:`registry`'s tasks)."""
    then = {"task": "total", "args": [], "kwargs": {}}
    return [new_job("add", [i + 1], job_id=member_id(chord_id, i),
                    parent={"id": chord_id, "index": i, "size": 2, "then": then}) for i in range(2)]


def deliver(runner: Runner, job, send, attempts: int = 1):
    return runner.run([Delivery(f"m-{job.id}-{attempts}", encode_job(job).decode(), attempts)], send=send)[0]


def steps_of_the_completing_member(reg, open_store, chord_id: str) -> list[str]:
    """The calls the member that completes a chord makes, in order, when nothing fails."""
    sent: list = []
    trap = Trap(open_store(), sent).arm(None)
    runner = Runner(reg, trap, log=None, metrics=False)
    first, last = chord_of_two(chord_id)
    deliver(runner, first, sent)
    trap.arm(None)
    deliver(runner, last, trap.send)
    assert [j.id for j in sent] == [callback_id(chord_id)], "the chord did not complete"
    return trap.calls


def run_together(reg, open_store, jobs: list) -> None:
    """Deliver ``jobs`` as copies on as many workers at once: every copy's duplicate check
    is answered before any copy runs, so none sees another's record."""
    runners = [Runner(reg, open_store(), log=None, metrics=False) for _ in jobs]
    batches = [runner.begin([Delivery(f"together-{n}", encode_job(job).decode())])
               for n, (runner, job) in enumerate(zip(runners, jobs, strict=True))]
    for batch in batches:
        states = batch.collect()
        batch.collect = lambda states=states: states
    for runner, batch in zip(runners, batches, strict=True):
        runner.finish(runner.execute(batch), send=[].extend)


def failure_at(step: str) -> Exception:
    """What a step that fails raises: the queue's send a connection error, the store's calls
    StoreUnavailable (as every store maps its outages)."""
    return ConnectionError("queue unreachable (injected)") if step == "send" else StoreUnavailable("injected")


def sent_and_ran(sent: list, chord_id: str, runs: list) -> tuple[int, int]:
    """How many copies of the callback were sent, and how many times it ran."""
    return (sum(job.id == callback_id(chord_id) for job in sent), sum(run[0] == "total" for run in runs))


class Clock:
    """kindling.engine.followups' clock, moved on by hand: a claim's lease passes without waiting."""

    def __init__(self, monkeypatch):
        from kindling.core import envelope
        from kindling.engine import followups

        self.shift_ms = 0
        monkeypatch.setattr(followups, "now_ms", lambda: envelope.now_ms() + self.shift_ms)

    def past_the_lease(self) -> None:
        self.shift_ms += 7 * 86_400_000  # beyond any callback's time limit


def complete_with_a_fault(reg, open_store, clock: Clock, chord_id: str, at: int | None, error: BaseException | None,
                          *, after: bool = False, callback_waits: bool = False) -> tuple[int, int]:
    """Member 1 completes the chord but fails or dies at its ``at``-th call, and comes back
    twice while the callback (if sent) is still on its queue or running. Then every copy of
    the callback runs, two workers at once; then the member comes back twice more, past the
    claim's lease, and any new copy runs too. ``callback_waits``: no copy runs before the
    lease is over (a callback that waited on its queue longer than that), one by one after.
    ``open_store()`` is the store as a worker process opens it: after a death, the next
    delivery is a new process's. Returns how many copies of the callback were sent, and how
    many times it ran."""
    sent: list = []
    trap = Trap(open_store(), sent)
    runner = Runner(reg, trap, log=None, metrics=False)
    first, last = chord_of_two(chord_id)
    deliver(runner, first, trap.send)
    before = sum(run[0] == "total" for run in reg.runs)
    trap.arm(at, error, after=after)
    try:
        deliver(runner, last, trap.send)
    except Crash:
        trap = Trap(open_store(), sent)
        runner = Runner(reg, trap, log=None, metrics=False)
    trap.arm(None)
    for attempts in (2, 3):
        deliver(runner, last, trap.send, attempts)
    ran = 0
    if not callback_waits:
        ran = len(sent)
        run_together(reg, open_store, sent[:ran])
    clock.past_the_lease()
    for attempts in (4, 5):
        deliver(runner, last, trap.send, attempts)
    for job in sent[ran:]:
        deliver(runner, job, trap.send)
    copies, runs = sent_and_ran(sent, chord_id, reg.runs)
    return copies, runs - before
