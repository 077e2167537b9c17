"""What settling a batch does to each stream entry, planned without Valkey (kindling.triggers.valkey.consumer)."""

from kindling.core.envelope import encode_job, new_job
from kindling.core.valkey.keys import FIELD, SIG_FIELD, TRACE_FIELD
from kindling.engine.runner import Delivery, Outcome
from kindling.shared.valkey.scheduled import member
from kindling.triggers.valkey.consumer import plan_settlement

NOW = 1_700_000_000_000


def entry(ref, attempts=1, signature=None, trace=None):
    return Delivery(ref, encode_job(new_job("t", [], {})), attempts, signature=signature, trace=trace)


def outcome(d, status, retry_in=None, not_before=None, reason=None, recorded=True):
    o = Outcome(d.ref, f"job-{d.ref}", "t", status, d.attempts)
    o.retry_in, o.reason = retry_in, reason
    if recorded and status in ("succeeded", "failed", "dead", "rejected"):
        o.record = {"id": o.job_id, "status": status, "attempts": d.attempts}
    if not_before is not None:
        o.job = new_job("t", [], {}, not_before=not_before)
    return o


def test_every_outcome_is_acknowledged_copied_scheduled_or_given_back_exactly_once():
    ok, skipped, rejected = entry("1-0"), entry("2-0"), entry("3-0")
    dead = entry("4-0", attempts=3, signature=b"v1:k:mac", trace="Root=1-abc")
    retry, early, down, cut_off = entry("5-0"), entry("6-0"), entry("7-0", attempts=4), entry("8-0", attempts=2)
    failed_in_place = entry("9-0", attempts=2)
    plan = plan_settlement([
        outcome(ok, "succeeded"), outcome(skipped, "skipped"), outcome(rejected, "rejected"),
        outcome(dead, "dead", reason="boom"), outcome(retry, "failed", retry_in=30),
        outcome(early, "deferred", not_before=NOW + 5_000), outcome(down, "deferred", retry_in=2),
        outcome(cut_off, "deferred"), outcome(failed_in_place, "failed"),
    ], [ok, skipped, rejected, dead, retry, early, down, cut_off, failed_in_place], NOW, 30_000)

    assert plan.done == ["1-0", "2-0", "3-0", "4-0", "5-0", "6-0"]
    (fields,) = plan.dead
    assert fields[FIELD] == dead.body and fields[SIG_FIELD] == b"v1:k:mac" and fields[TRACE_FIELD] == "Root=1-abc"
    assert {k: fields[k] for k in ("error", "entry", "job_id", "attempts", "dead_at")} == {
        "error": "boom", "entry": "4-0", "job_id": "job-4-0", "attempts": "3", "dead_at": str(NOW)}
    assert plan.scheduled == [(member(retry.body, None), NOW + 30_000), (member(early.body, None), NOW + 5_000)]
    # given back with the delivery count before this delivery, in sight again after retry_in
    assert plan.given_back == [("7-0", 28_000, 3), ("8-0", None, 1)]


def test_a_signed_job_keeps_its_signature_in_the_scheduled_set():
    d = entry("1-0", signature=b"v1:k:mac")
    plan = plan_settlement([outcome(d, "failed", retry_in=1)], [d], NOW, 30_000)
    assert plan.scheduled == [(b"v1:k:mac\n" + d.body, NOW + 1_000)]


def test_a_failed_attempt_counted_by_deliveries_stays_pending_with_its_count():
    """Not read before it ran (results="failures"/"none", skip_succeeded=False), or not
    recorded at all: a new entry would start its delivery count afresh and its attempts with
    it, so it stays pending with this delivery counted, back in sight after retry_in."""
    unrecorded, unread = entry("1-0", attempts=2), entry("2-0", attempts=1)
    failed_unread = outcome(unread, "failed", retry_in=5)
    failed_unread.unread = True
    plan = plan_settlement([outcome(unrecorded, "failed", retry_in=5, recorded=False), failed_unread],
                           [unrecorded, unread], NOW, 30_000)
    assert plan.scheduled == [] and plan.done == []
    assert plan.given_back == [("1-0", 25_000, 2), ("2-0", 25_000, 1)]
