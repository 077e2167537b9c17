"""The rest of Celery's canvas: immutable signatures (``.si()``), a countdown on a chain or
a group, empty groups and chords (``[]``, and the callback run with ``[]``), and a direct
call of a task that reads :func:`kindling.current_job` (Celery's ``self.request``)."""

from __future__ import annotations

import pytest
from kindling import chain, chord, current_job, group
from kindling.core.registry import Registry
from kindling.producer import dispatch
from kindling.producer.handles import JobHandle
from kindling.tools.testing import eager


def registry_tasks(r: Registry) -> None:
    """This module's tasks, on the fresh registry the shared ``reg`` fixture gives each test."""
    r.calls = []

    @r.task(name="add")
    def add(a, b=0):
        r.calls.append(("add", a, b))
        return a + b

    @r.task(name="total")
    def total(results, extra=0):
        r.calls.append(("total", results))
        return sum(results) + extra

    @r.task(name="note")
    def note(text="done"):
        r.calls.append(("note", text))
        return text

    @r.task(name="whoami")
    def whoami():
        job = current_job()
        return {"id": job.id, "task": job.task, "attempt": job.attempt}


class Recorder:
    """A producer that keeps the calls it is asked to send."""

    def __init__(self):
        self.calls = []

    def send(self, call):
        self.calls.append(call)
        return JobHandle(call.job_id or "id", call.task if isinstance(call.task, str) else call.task.name)

    def enqueue_many(self, calls):
        return [self.send(c) for c in calls]


@pytest.fixture
def recorder():
    rec = Recorder()
    before = dispatch.set_producer(rec)
    yield rec
    dispatch.set_producer(before)


def test_an_immutable_chain_step_runs_without_the_previous_result(reg):
    add, note = reg.get("add"), reg.get("note")
    with eager():
        handle = chain(add.s(1, 2), note.si("sent"), add.s("!")).delay()
        assert handle.result() == "sent!"
    assert reg.calls == [("add", 1, 2), ("note", "sent"), ("add", "sent", "!")]


def test_si_binds_its_arguments_alone_and_refuses_a_call_that_needs_the_result(reg):
    with pytest.raises(TypeError, match="bad arguments"):
        reg.get("add").si()  # would bind only with the previous result first, which .si never gets
    assert reg.get("note").si("x").immutable
    assert not reg.get("note").s("x").immutable


def test_an_immutable_chord_callback_runs_without_the_results(reg):
    add, note = reg.get("add"), reg.get("note")
    with eager():
        assert group([add.s(1), add.s(2)]).then(note.si("all in")).delay().result() == "all in"
    assert reg.calls[-1] == ("note", "all in")


def test_a_chain_and_a_group_take_a_countdown_for_their_first_jobs(reg, recorder):
    add = reg.get("add")
    chain(add.s(1), add.s(2)).apply_async(countdown=2)
    group([add.s(1), add.s(2)]).apply_async(countdown=3)
    group([add.s(1)]).then(reg.get("total").s()).apply_async(countdown=4)
    assert [c.delay for c in recorder.calls] == [2, 3, 3, 4]


def test_an_empty_group_returns_an_empty_list_and_sends_nothing(reg):
    with eager() as jobs:
        handle = group([]).delay()
        assert handle.result() == []
        assert handle.status() == "completed"
        assert jobs.records == {}


def test_an_empty_chord_runs_its_callback_once_with_an_empty_list(reg):
    with eager():
        handle = chord([], reg.get("total").s(extra=5)).delay()
        assert handle.result() == 5
        assert group([]).then(reg.get("total").s()).delay().result() == 0
    assert reg.calls == [("total", []), ("total", [])]


def test_a_direct_call_sees_a_job_context_of_its_own_as_celerys_self_request(reg):
    assert reg.get("whoami")() == {"id": None, "task": "whoami", "attempt": 1}
    with pytest.raises(LookupError):
        current_job()  # only while the call runs


def test_a_direct_call_inside_a_job_sees_its_own_context_not_the_jobs(reg):
    @reg.task(name="outer")
    def outer():
        return {"outer": current_job().id, "inner": reg.get("whoami")()["id"], "after": current_job().id}

    with eager():
        handle = outer.delay()
        seen = handle.result()
    assert seen == {"outer": handle.id, "inner": None, "after": handle.id}


def test_the_envelope_takes_immutable_only_as_true_on_a_chained_call():
    from kindling.core.envelope import decode_job, encode_job, new_job
    from kindling.core.errors import InvalidJob

    step = {"task": "note", "args": ["x"], "kwargs": {}, "immutable": True}
    assert decode_job(encode_job(new_job("add", [1], chain=[step]))).chain == [step]
    with pytest.raises(InvalidJob, match="immutable must be true"):
        decode_job(encode_job(new_job("add", [1], chain=[dict(step, immutable="yes")])))
