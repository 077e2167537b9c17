"""The result store contract (kindling.core.result_store.ResultStore), held over every store a
worker runs on: MemoryResultStore, DynamoResultStore (on moto) and ValkeyResultStore (on a
real valkey-server). A rule here holds for all three or is a defect in the one it fails on.
"""

from __future__ import annotations

import inspect
import socket
import time

import pytest
from kindling.core.errors import KindlingError, StoreUnavailable
from kindling.core.result_store import ResultStore
from kindling.core.status import NEWER_GENERATION
from kindling.stores.dynamo import DynamoResultStore
from kindling.stores.memory import MemoryResultStore
from kindling.stores.valkey import ValkeyResultStore

STORES = [MemoryResultStore, DynamoResultStore, ValkeyResultStore]
CONTRACT = [name for name in vars(ResultStore) if not name.startswith("_") and callable(getattr(ResultStore, name))]


def rec(job_id: str, status: str, attempts: int = 1, **extra) -> dict:
    return {"id": job_id, "task": "echo", "status": status, "attempts": attempts, **extra}


# Every test runs on each store (support.fixtures' ``store``).
pytestmark = pytest.mark.stores("memory", "dynamo", pytest.param("valkey", marks=pytest.mark.valkey))


# -- the protocol ------------------------------------------------------------------------------


def test_the_protocol_lists_every_method_a_worker_follow_up_handle_or_tool_calls():
    assert sorted(CONTRACT) == ["begin_read", "begin_write", "claim_chord", "count_member", "give_back",
                                "mark_chord_sent", "read_results", "read_states", "record", "revoke", "take",
                                "write"]


@pytest.mark.parametrize("cls", STORES, ids=lambda c: c.__name__)
def test_every_store_has_every_method_of_the_protocol_with_its_parameters(cls):
    """A store short of one fails each batch that needs it for good (chords on the Valkey
    store once lacked three); one that drops ``deadline=`` fails every Lambda batch."""
    for name in CONTRACT:
        method = getattr(cls, name, None)
        assert callable(method), f"{cls.__name__} has no {name}"
        wanted = inspect.signature(getattr(ResultStore, name)).parameters
        have = inspect.signature(method).parameters
        for p in wanted.values():
            assert p.name in have, f"{cls.__name__}.{name} takes no {p.name}"
            assert have[p.name].kind == p.kind, f"{cls.__name__}.{name}: {p.name} is {have[p.name].kind}"
            assert have[p.name].default == p.default, f"{cls.__name__}.{name}: {p.name}={have[p.name].default!r}"


def test_a_store_instance_is_a_result_store(store):
    assert isinstance(store, ResultStore)


# -- writes move forward -----------------------------------------------------------------------


def test_a_stale_failure_never_replaces_a_success(store):
    assert store.write([rec("j", "succeeded", result="1")]) == {}
    assert store.write([rec("j", "failed")]) == {"j": "succeeded"}
    assert store.write([rec("j", "dead", 3)]) == {"j": "succeeded"}
    assert store.read_states(["j", "other"]) == {"j": ("succeeded", 1)}


def test_failures_move_forward_by_attempts_and_a_success_replaces_dead(store):
    assert store.write([rec("j", "failed", 2)]) == {}
    assert store.write([rec("j", "failed", 1)]) == {"j": "failed"}
    assert store.write([rec("j", "failed", 2)]) == {}  # the same attempt again: idempotent
    assert store.write([rec("j", "dead", 3)]) == {}
    assert store.write([rec("j", "succeeded", 2)]) == {}
    assert store.read_states(["j"]) == {"j": ("succeeded", 2)}


def test_a_rejection_never_replaces_a_real_record(store):
    store.write([rec("j", "failed")])
    assert store.write([rec("j", "rejected")]) == {"j": "failed"}
    assert store.write([rec("k", "rejected")]) == {}


def test_a_scheduled_record_lands_only_where_no_run_is_recorded_and_any_outcome_replaces_it(store):
    """An early delivery's ``scheduled`` (the runner's admission) never hides an outcome, a
    revive's ``queued`` or a revoke; whatever replaces ``queued`` replaces it."""
    for old in ("succeeded", "failed", "dead", "rejected", "revoked"):
        store.write([rec(f"{old}-j", old)])
    store.write([rec("dead-q", "dead", 2)])
    store.write([rec("dead-q", "queued", 0, generation=2)])
    scheduled = [rec(k, "scheduled", 0, due_at=1) for k in ("new", "succeeded-j", "failed-j", "dead-j",
                                                            "rejected-j", "revoked-j", "dead-q")]
    assert store.write(scheduled) == {"succeeded-j": "succeeded", "failed-j": "failed", "dead-j": "dead",
                                      "rejected-j": "rejected", "revoked-j": "revoked", "dead-q": "queued"}
    assert store.write([rec("new", "scheduled", 0, due_at=2)]) == {}  # the next hop's, over its own
    assert store.record("new")["due_at"] == 2
    for status in ("succeeded", "failed", "dead", "rejected", "revoked"):
        store.write([rec(f"s-{status}", "scheduled", 0, due_at=1)])
        assert store.write([rec(f"s-{status}", status)]) == {}, status
        assert store.read_states([f"s-{status}"]) == {f"s-{status}": (status, 1)}


def test_of_two_records_of_one_job_in_one_write_the_last_wins(store):
    assert store.write([rec("j", "succeeded"), rec("j", "dead", 3)]) == {}
    assert store.read_states(["j"]) == {"j": ("dead", 3)}


def test_read_states_leaves_out_ids_without_a_record_and_counts_each_once(store):
    store.write([rec(f"j{i}", "succeeded" if i % 2 else "failed", i) for i in range(1, 5)])
    assert store.read_states(["j1", "j2", "j2", "nope", "j4"]) == {
        "j1": ("succeeded", 1), "j2": ("failed", 2), "j4": ("failed", 4)}
    assert store.read_states([]) == {}


# -- generations -------------------------------------------------------------------------------


def test_a_failure_or_death_of_an_older_generation_never_replaces_a_revived_record(store):
    store.write([rec("j", "dead", 2)])
    assert store.write([rec("j", "queued", 0, generation=2)]) == {}  # what a revive records
    assert store.read_states(["j"]) == {"j": ("queued", 0, 2)}
    for stale in (rec("j", "dead", 2), rec("j", "failed", 1)):
        assert store.write([stale]) == {"j": NEWER_GENERATION}
    assert store.record("j")["status"] == "queued"
    assert store.write([rec("j", "failed", 1, generation=2)]) == {}
    assert store.write([rec("j", "dead", 2, generation=2)]) == {}
    assert store.read_states(["j"]) == {"j": ("dead", 2, 2)}
    # A success is not checked (DynamoDB writes it unconditionally, in a batch): the job did succeed.
    assert store.write([rec("j", "succeeded", 1)]) == {}


# -- sent now, collected later -----------------------------------------------------------------


def test_a_read_sent_now_and_collected_later_answers_as_read_states(store):
    store.write([rec(f"j{i}", "failed" if i % 2 else "succeeded") for i in range(6)])
    ids = [f"j{i}" for i in range(8)]
    assert store.begin_read(ids)() == store.read_states(ids)


def test_a_write_sent_now_and_collected_later_answers_as_write(store):
    store.write([rec("j1", "succeeded")])
    collect = store.begin_write([rec("j0", "failed"), rec("j1", "failed"), rec("j2", "succeeded")])
    assert collect() == {"j1": "succeeded"}
    assert store.read_states(["j0", "j1", "j2"]) == {"j0": ("failed", 1), "j1": ("succeeded", 1),
                                                     "j2": ("succeeded", 1)}


# -- reading records back ----------------------------------------------------------------------


def test_results_are_read_back_for_chains_and_chords(store):
    store.write([rec("a", "succeeded", result="[1, 2]"), rec("b", "succeeded", result_payload={"key": "results/b"}),
                 rec("c", "dead", 2)])
    assert store.read_results(["a", "b", "c", "missing", "a"]) == {
        "a": ("succeeded", "[1, 2]", None), "b": ("succeeded", None, {"key": "results/b"}), "c": ("dead", None, None)}


def test_record_gives_the_stored_record_or_none(store):
    assert store.record("j") is None
    store.write([rec("j", "succeeded", result="3", finished_at=1_790_000_000_123)])
    assert store.record("j") == rec("j", "succeeded", result="3", finished_at=1_790_000_000_123)


# -- revoke ------------------------------------------------------------------------------------


def test_a_revoke_lands_on_a_job_not_finished_and_is_refused_by_a_finished_one(store):
    store.revoke("new", task="echo")
    assert store.record("new")["status"] == "revoked"
    store.write([rec("retrying", "failed")])
    store.revoke("retrying")
    assert store.read_states(["retrying"]) == {"retrying": ("revoked", 0)}
    store.write([rec("done", "succeeded")])
    with pytest.raises(KindlingError, match="already succeeded"):
        store.revoke("done")
    # A run under way when it landed: its success replaces the revoke, its failure does not.
    assert store.write([rec("retrying", "failed", 2)]) == {"retrying": "revoked"}
    assert store.write([rec("new", "succeeded")]) == {}


# -- chords ------------------------------------------------------------------------------------


def test_a_chord_member_counts_once_and_a_dead_one_fails_the_chord_for_good(store):
    key = "chord#c1"
    assert store.count_member(key, 0, 3, ok=True, at_ms=1, ttl_s=60) == {}
    old = store.count_member(key, 0, 3, ok=True, at_ms=2, ttl_s=60)  # a duplicate delivery
    assert sorted(old["done"]) == ["0"] and old["status"] == "waiting"
    old = store.count_member(key, 2, 3, ok=False, reason="dead", at_ms=3, ttl_s=60)
    assert sorted(old["done"]) == ["0"] and not old.get("dead")
    store.count_member(key, 1, 3, ok=False, message="member 1's result is lost", at_ms=4, ttl_s=60)
    record = store.record(key)
    assert sorted(record["done"]) == ["0", "1", "2"] and sorted(record["dead"]) == ["1", "2"]
    assert record["status"] == "dead" and record["size"] == 3 and record["kind"] == "chord"
    assert record["error"] == {"type": "ChordFailed", "message": "member 2 did not succeed: dead"}  # the first kept
    assert store.claim_chord(key, "c1.then", at_ms=5) is False
    store.mark_chord_sent(key, at_ms=6)
    record = store.record(key)
    assert record["status"] == "dead" and "callback" not in record and "sent_at" not in record


def test_a_completed_chord_is_claimed_once_and_an_unsent_claim_is_taken_over_once(store):
    key = "chord#c2"
    store.count_member(key, 0, 1, ok=True, at_ms=1_790_000_000_123, ttl_s=60)
    assert store.claim_chord(key, "c2.then", at_ms=1_790_000_000_200) is True
    assert store.claim_chord(key, "c2.then", at_ms=1_790_000_000_201) is False
    assert store.claim_chord(key, "c2.then", at_ms=1_790_000_000_300, claimed_at=1_790_000_000_199) is False
    assert store.claim_chord(key, "c2.then", at_ms=1_790_000_000_300, claimed_at=1_790_000_000_200) is True
    assert store.claim_chord(key, "c2.then", at_ms=1_790_000_000_301, claimed_at=1_790_000_000_200) is False
    store.mark_chord_sent(key, at_ms=1_790_000_000_400)
    assert store.claim_chord(key, "c2.then", at_ms=1_790_000_000_500, claimed_at=1_790_000_000_300) is False
    record = store.record(key)
    assert record["status"] == "completed" and record["callback"] == "c2.then"
    assert (record["completed_at"], record["sent_at"]) == (1_790_000_000_300, 1_790_000_000_400)
    assert store.claim_chord("chord#never-counted", None, at_ms=1) is False
    store.mark_chord_sent("chord#never-counted", at_ms=1)
    assert store.record("chord#never-counted") is None


# -- deadlines ---------------------------------------------------------------------------------

# Every method that takes ``deadline=``, called with one.
CALLS = {
    "read_states": lambda s, d: s.read_states(["a", "b"], deadline=d),
    "begin_read": lambda s, d: s.begin_read(["a", "b"], deadline=d)(),
    "write": lambda s, d: s.write([rec("a", "succeeded"), rec("b", "failed")], deadline=d),
    "begin_write": lambda s, d: s.begin_write([rec("a", "succeeded"), rec("b", "failed")], deadline=d)(),
    "read_results": lambda s, d: s.read_results(["a"], deadline=d),
    "count_member": lambda s, d: s.count_member("chord#d", 0, 2, ok=True, at_ms=1, ttl_s=60, deadline=d),
    "claim_chord": lambda s, d: s.claim_chord("chord#d", None, at_ms=1, deadline=d),
    "mark_chord_sent": lambda s, d: s.mark_chord_sent("chord#d", at_ms=1, deadline=d),
    "record": lambda s, d: s.record("a", deadline=d),
    "take": lambda s, d: s.take("rate#d#1", 1, 2, ttl_s=60, deadline=d),
    "give_back": lambda s, d: s.give_back("rate#d#1", 1, deadline=d),
}


def test_every_method_that_takes_a_deadline_is_in_the_table_of_calls():
    takes = {n for n in CONTRACT if "deadline" in inspect.signature(getattr(ResultStore, n)).parameters}
    assert takes == set(CALLS)


@pytest.mark.parametrize("call", CALLS)
def test_a_deadline_already_passed_gives_up_before_anything_is_stored(store, call):
    with pytest.raises(StoreUnavailable):
        CALLS[call](store, time.monotonic() - 1)
    assert store.read_states(["a", "b"]) == {} and store.record("chord#d") is None


@pytest.fixture
def silent_port():
    """A loopback port whose listener takes connections (the kernel completes them) and
    never answers a byte: a store behind it is a store that hangs."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield listener.getsockname()[1]


def _silent(kind: str, port: int, request):
    """A store of ``kind`` behind the silent port, whose own socket waits (30 s) are far
    longer than the deadlines given: only the deadline can end a call in time."""
    if kind == "dynamo":
        from kindling.drivers.aws import JsonClient

        request.getfixturevalue("moto_endpoint")  # credentials in the environment
        client = JsonClient("dynamodb", "DynamoDB_20120810", region="us-east-1", endpoint=f"http://127.0.0.1:{port}",
                            timeout=30, max_attempts=1)
        return DynamoResultStore("t", client=client)
    from kindling.shared.valkey.connection import connect

    url = f"redis://127.0.0.1:{port}/0"
    return ValkeyResultStore(url, client=connect(url, socket_timeout=30, socket_connect_timeout=30))


def _gave_up_at_the_deadline(exc: BaseException) -> bool:
    """Whether a deadline (not a socket timeout, not a refusal) ended the call: the
    client's DeadlineExceeded is somewhere in the chain of causes."""
    from kindling.drivers.aws import AwsError
    from kindling.drivers.aws.errors import DeadlineExceeded as AwsDeadline
    from kindling.drivers.valkey.errors import DeadlineExceeded as ValkeyDeadline

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, AwsDeadline | ValkeyDeadline) or (
                isinstance(seen, AwsError) and seen.code == "DeadlineExceeded"):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@pytest.mark.parametrize("kind", ["dynamo", pytest.param("valkey", marks=pytest.mark.valkey)])
@pytest.mark.parametrize("call", CALLS)
def test_a_store_that_never_answers_gives_up_at_the_deadline_as_store_unavailable(kind, call, silent_port, request):
    """What lets the runner hand a batch back before Lambda kills the invocation: the
    deadline, not the socket's 30 s, ends the wait, with the error every store raises."""
    store = _silent(kind, silent_port, request)
    with pytest.raises(StoreUnavailable) as caught:
        CALLS[call](store, time.monotonic() + 0.2)
    assert _gave_up_at_the_deadline(caught.value), repr(caught.value)


def test_a_rate_limit_count_gives_each_take_what_its_window_has_left(store):
    """kindling.core.ratelimit's count: takes share the window's limit, and no take goes past it."""
    key = "rate#contract.task#12345"
    assert store.take(key, 3, 5, ttl_s=60) == 3
    assert store.take(key, 3, 5, ttl_s=60) == 2  # what was left
    assert store.take(key, 1, 5, ttl_s=60) == 0
    assert store.take("rate#contract.task#12346", 9, 5, ttl_s=60) == 5  # a new window, asked for more than it holds


def test_runs_given_back_can_be_taken_again_only_while_that_many_are_taken(store):
    """kindling.core.ratelimit gives back the runs of jobs that never started."""
    key = "rate#contract.task#22345"
    assert store.take(key, 5, 5, ttl_s=60) == 5
    store.give_back(key, 2)
    assert store.take(key, 3, 5, ttl_s=60) == 2
    store.give_back(key, 9)  # more than are taken: nothing changes
    assert store.take(key, 1, 5, ttl_s=60) == 0
    store.give_back("rate#contract.task#22346", 1)  # a window never taken from: nothing made
    assert store.take("rate#contract.task#22346", 9, 5, ttl_s=60) == 5
