"""ValkeyResultStore on a real valkey-server: records only move forward, as in DynamoDB."""

from __future__ import annotations

import json
import uuid

import pytest

pytestmark = pytest.mark.valkey


@pytest.fixture
def store(valkey_url):
    from kindling.valkey import ValkeyResultStore

    return ValkeyResultStore(valkey_url, ttl_s=60, prefix=f"t-{uuid.uuid4().hex[:8]}")


def test_a_stale_failure_never_replaces_a_success(store):
    assert store.write([{"id": "j", "status": "succeeded", "attempts": 1, "result": "1"}]) == {}
    assert store.write([{"id": "j", "status": "failed", "attempts": 1}]) == {"j": "succeeded"}
    assert store.write([{"id": "j", "status": "dead", "attempts": 3}]) == {"j": "succeeded"}
    assert store.read_states(["j", "other"]) == {"j": ("succeeded", 1)}


def test_failures_move_forward_and_a_success_replaces_dead(store):
    assert store.write([{"id": "j", "status": "failed", "attempts": 2}]) == {}
    assert store.write([{"id": "j", "status": "failed", "attempts": 1}]) == {"j": "failed"}
    assert store.write([{"id": "j", "status": "dead", "attempts": 3}]) == {}
    assert store.wait("j", timeout=1)["status"] == "dead"
    assert store.write([{"id": "j", "status": "succeeded", "attempts": 2}]) == {}
    assert store.read_states(["j"]) == {"j": ("succeeded", 2)}


def test_a_rejection_never_replaces_a_real_record(store):
    store.write([{"id": "j", "status": "failed", "attempts": 1}])
    assert store.write([{"id": "j", "status": "rejected", "attempts": 1}]) == {"j": "failed"}
    assert store.write([{"id": "k", "status": "rejected", "attempts": 1}]) == {}


def test_a_failure_or_death_of_an_older_generation_never_replaces_a_revived_record(store):
    store.write([{"id": "j", "status": "dead", "attempts": 2}])
    revived = {"id": "j", "status": "queued", "attempts": 0, "generation": 2}
    store.client.set(store._key("j"), json.dumps(revived))  # what a revive writes
    assert store.read_states(["j"]) == {"j": ("queued", 0, 2)}
    for stale in ({"id": "j", "status": "dead", "attempts": 2}, {"id": "j", "status": "failed", "attempts": 1}):
        assert store.write([stale]) == {"j": "newer generation"}
    assert store.get("j") == revived
    assert store.write([{"id": "j", "status": "failed", "attempts": 1, "generation": 2}]) == {}
    assert store.write([{"id": "j", "status": "dead", "attempts": 2, "generation": 2}]) == {}
    assert store.read_states(["j"]) == {"j": ("dead", 2, 2)}
    # A success is not checked (written as DynamoDB's BatchWriteItem writes it): the job did succeed.
    assert store.write([{"id": "j", "status": "succeeded", "attempts": 1}]) == {}


def test_a_chord_member_counts_once_and_a_dead_one_fails_the_chord_for_good(store):
    """The chord record's rules, as DynamoDB's UpdateItem applies them (kindling.followups)."""
    key = "chord#c1"
    assert store.count_member(key, 0, 3, ok=True, at_ms=1, ttl_s=60) == {}
    old = store.count_member(key, 0, 3, ok=True, at_ms=2, ttl_s=60)  # a duplicate delivery
    assert old["done"] == ["0"] and old["status"] == "waiting"
    old = store.count_member(key, 2, 3, ok=False, reason="dead", at_ms=3, ttl_s=60)
    assert old["done"] == ["0"] and "dead" not in old
    store.count_member(key, 1, 3, ok=False, message="member 1's result is lost", at_ms=4, ttl_s=60)
    record = store.record(key)
    assert sorted(record["done"]) == ["0", "1", "2"] and sorted(record["dead"]) == ["1", "2"]
    assert record["status"] == "dead" and record["size"] == 3 and record["kind"] == "chord"
    assert record["error"] == {"type": "ChordFailed", "message": "member 2 did not succeed: dead"}  # the first kept
    assert store.claim_chord(key, "c1.then", at_ms=5) is False
    store.mark_chord_sent(key, at_ms=6)
    assert store.record(key)["status"] == "dead" and "callback" not in store.record(key)
    assert "sent_at" not in store.record(key)
    assert 0 < store.client.execute_command("TTL", store._key(key)) <= 60


def test_a_completed_chord_is_claimed_once_names_its_callback_and_keeps_its_expiry(store):
    """Of every delivery that finds the chord complete one claims it; a claim whose callback
    was never marked sent is taken over once (kindling.followups)."""
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
    assert record["updated_at"] == 1_790_000_000_123  # milliseconds survive the server's JSON
    assert (record["completed_at"], record["sent_at"]) == (1_790_000_000_300, 1_790_000_000_400)
    assert 0 < store.client.execute_command("TTL", store._key(key)) <= 60
    assert store.claim_chord("chord#never-counted", None, at_ms=1) is False
    store.mark_chord_sent("chord#never-counted", at_ms=1)
    assert store.record("chord#never-counted") is None


def test_results_are_read_back_for_chains_and_chords(store):
    store.write([{"id": "a", "status": "succeeded", "attempts": 1, "result": "[1, 2]"},
                 {"id": "b", "status": "succeeded", "attempts": 1, "result_payload": {"key": "results/b"}},
                 {"id": "c", "status": "dead", "attempts": 2}])
    assert store.read_results(["a", "b", "c", "missing", "a"]) == {
        "a": ("succeeded", "[1, 2]", None), "b": ("succeeded", None, {"key": "results/b"}), "c": ("dead", None, None)}
