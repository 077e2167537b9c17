"""Chains and chords on the Valkey trigger: a real valkey-server (tests/support/valkey.py), the
``kindling worker --valkey`` process, DynamoDB on moto. Follow-ups go back on the stream.

Run: .venv/bin/python -m pytest tests/service/test_valkey_canvas.py -q -m valkey
"""

from __future__ import annotations

import pytest

from tests.service.test_valkey import _counts, _empty, _scan, _worker

pytestmark = pytest.mark.valkey


@pytest.fixture
def stream() -> str:
    import uuid

    return f"canvas:{uuid.uuid4().hex[:8]}"


def test_a_chain_and_a_chord_run_through_the_stream_worker(valkey_url, stream, table):
    import kindling.producer.dispatch as dispatch
    import tasks
    from kindling import chain, group
    from kindling.engine.followups import chord_key
    from kindling.valkey import StreamProducer

    producer = StreamProducer(valkey_url, stream=stream)
    dispatch.set_producer(producer)
    try:
        steps = chain(tasks.add.s(1, 2), tasks.add.s(10), tasks.add.s(y=100)).delay()
        chord = group([tasks.add.s(i, i) for i in range(20)]).then(tasks.total.s(extra=1)).delay()
        failed = group([tasks.add.s(1), tasks.always_fails.s("down").set(max_attempts=1)]).then(
            tasks.total.s()).delay()
    finally:
        dispatch.set_producer(None)
    worker = _worker(valkey_url, stream, table, KINDLING_VALKEY_BLOCK_MS=100)
    out, err = worker.communicate(timeout=120)
    assert worker.returncode == 0, err
    records = _scan(table)
    assert [records[i]["result"] for i in steps.ids] == ["3", "13", "113"]
    assert records[chord.callback_id]["result"] == str(sum(2 * i for i in range(20)) + 1)
    assert records[chord.callback_id]["attempts"] == 1
    assert records[chord_key(chord.id)]["status"] == "completed"
    assert records[chord_key(failed.id)]["status"] == "dead" and failed.callback_id not in records
    # 3 chain steps, 20 members and a callback, 2 members of the failed chord (one dead)
    counts = _counts(out)
    assert counts.get("succeeded") == 3 + 20 + 1 + 1 and counts.get("dead") == 1, counts
    _empty(producer.client, stream)


def test_a_chain_and_a_chord_complete_with_results_kept_in_valkey(valkey_url, stream, table):
    """``KINDLING_RESULTS=valkey``: the chord is counted on a record next to the jobs'
    (``<prefix>:result:chord#<id>``) and read back through the store as a handle's reader."""
    import subprocess

    import kindling.producer.dispatch as dispatch
    import tasks
    from kindling import chain, group
    from kindling.core.errors import JobFailed
    from kindling.valkey import StreamProducer, ValkeyResultStore

    results = ValkeyResultStore(valkey_url)  # the worker's (default prefix; the ids are fresh)
    producer = StreamProducer(valkey_url, stream=stream)
    dispatch.set_producer(producer)
    try:
        steps = chain(tasks.add.s(1, 2), tasks.add.s(10)).delay()
        chord = group([tasks.add.s(i, i) for i in range(5)]).then(tasks.total.s(extra=1)).delay()
        failed = group([tasks.add.s(1), tasks.always_fails.s("down").set(max_attempts=1)]).then(
            tasks.total.s()).delay()
    finally:
        dispatch.set_producer(None)
    for handle in (steps, chord, failed):
        handle.reader = results
    worker = _worker(valkey_url, stream, table, KINDLING_VALKEY_BLOCK_MS=100, KINDLING_RESULTS="valkey")
    try:
        out, err = worker.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # the chord's members never settle: the stream never drains
        worker.kill()
        out, err = worker.communicate()
        raise AssertionError(f"the worker did not drain the stream: {err[-2000:]}") from None
    assert worker.returncode == 0, err
    assert steps.result(timeout=5) == 13
    assert chord.result(timeout=5) == sum(2 * i for i in range(5)) + 1
    assert chord.status() == "completed" and sorted(chord.record()["done"]) == ["0", "1", "2", "3", "4"]
    with pytest.raises(JobFailed):
        failed.result(timeout=5)
    assert failed.record()["dead"] == ["1"] and results.get(failed.callback_id) is None
    counts = _counts(out)
    assert counts.get("succeeded") == 2 + 5 + 1 + 1 and counts.get("dead") == 1, counts
    _empty(producer.client, stream)


# -- the callback, exactly once, with the chord counted and claimed by the store's scripts ----


@pytest.fixture
def open_store(valkey_url):
    """The Valkey result store as each worker process opens it (its own connection), under
    a prefix of this test's own."""
    import uuid

    from kindling.valkey import ValkeyResultStore

    prefix = f"chords-{uuid.uuid4().hex[:8]}"
    return lambda: ValkeyResultStore(valkey_url, prefix=prefix)


def test_a_failure_at_any_step_of_the_completing_member_sends_and_runs_the_callback_once(open_store, monkeypatch):
    """tests/service/test_canvas.py's scenario on a real valkey-server: each call the member that
    completes the chord makes fails once (before taking effect, or after it with its reply
    lost), and the member comes back while the callback runs and after: one copy is sent,
    and two workers running every copy at once run it once."""
    from kindling.core.errors import StoreUnavailable
    from support import chords

    reg = chords.registry()
    clock = chords.Clock(monkeypatch)
    steps = chords.steps_of_the_completing_member(reg, open_store, "vf-probe")
    assert steps[steps.index("send") - 1:] == ["claim_chord", "send", "mark_chord_sent"], steps
    for at, step in enumerate(steps):
        for after in (False,) if step == "send" else (False, True):
            outcome = chords.complete_with_a_fault(reg, open_store, clock, f"vf{at}{int(after)}", at,
                                                   chords.failure_at(step), after=after)
            assert outcome == (1, 1), (step, after)
    # the failed mark of the chord after its send, on its own (the defect this guards)
    mark = steps.index("mark_chord_sent")
    assert chords.complete_with_a_fault(reg, open_store, clock, "vf-mark", mark, StoreUnavailable("down")) == (1, 1)


def test_a_crash_at_any_step_of_the_completing_member_runs_the_callback_once(open_store, monkeypatch):
    """The worker dies after each step (and after the last, its message never settled); the
    member comes back while the callback runs and after its claim's lease: one copy, one
    run. If the callback instead waits on its queue past the lease, a death between the
    send and its mark sends a second copy, which the callback's record has skipped."""
    from support import chords

    reg = chords.registry()
    clock = chords.Clock(monkeypatch)
    steps = chords.steps_of_the_completing_member(reg, open_store, "vc-probe")
    send = steps.index("send")
    for at in range(len(steps) + 1):
        assert chords.complete_with_a_fault(reg, open_store, clock, f"vc{at}", at, chords.Crash()) == (1, 1), at
        copies, runs = chords.complete_with_a_fault(reg, open_store, clock, f"vw{at}", at, chords.Crash(),
                                                    callback_waits=True)
        assert runs == 1 and copies == (2 if send < at < len(steps) else 1), (at, copies, runs)
