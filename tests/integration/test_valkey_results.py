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
