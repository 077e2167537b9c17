import pytest
from kindling.core import codec
from kindling.core.envelope import Job, decode_job, encode_job, new_job, new_job_id, replace
from kindling.core.errors import InvalidJob


def test_round_trip():
    job = new_job("resize", ["a.png"], {"width": 64}, max_attempts=4, timeout=2.5)
    assert decode_job(encode_job(job)) == job
    assert decode_job(encode_job(job).decode()) == job


def test_ids_are_unique_and_sort_by_time():
    ids = [new_job_id(at_ms=1_700_000_000_000 + i) for i in range(200)]
    assert ids == sorted(ids) and len(set(ids)) == 200
    assert all(len(i) == 26 for i in ids)
    assert len({new_job_id() for _ in range(1000)}) == 1000


NOW_MS = 1_763_725_000_000  # 2025-11-21, a plausible enqueue time
SECONDS = 1_763_725_000  # the same moment in seconds, as another language's producer may write it
DAY_MS = 86_400_000


def envelope(**changes):
    base = {"version": 1, "id": "j1", "task": "noop", "args": [], "kwargs": {}, "enqueued_at": NOW_MS}
    base.update(changes)
    return codec.dumps({k: v for k, v in base.items() if v is not ...})


@pytest.mark.parametrize(
    "body, reason",
    [
        ("not json", "message body is not JSON"),
        ("", "message body is not JSON"),
        ('{"a": 1} x', "message body is not JSON"),
        ("[1, 2]", "message body is JSON list, expected an object"),
        ('{"id": "x", "version": 1, "a": NaN}', "message body is not JSON"),
        (envelope(task=...), "missing field(s): task"),
        (envelope(extra=1), "unknown field(s): extra"),
        (envelope(version=3), "envelope version 3 needs a newer kindling"),
        (envelope(version=0), "unsupported envelope version 0"),
        (envelope(id=""), "id must be"),
        (envelope(id="has space"), "id must be"),
        (envelope(id="x" * 129), "id must be"),
        (envelope(task=5), "task must be a string of 1-200 characters"),
        (envelope(args={}), "args must be a JSON array"),
        (envelope(kwargs=[]), "kwargs must be a JSON object"),
        (envelope(enqueued_at="now"), "enqueued_at must be epoch milliseconds"),
        (envelope(max_attempts=0), "max_attempts must be an integer from 1 to 1000"),
        (envelope(timeout=-1), "timeout must be a number of seconds above 0"),
        (envelope(not_before=True), "not_before must be epoch milliseconds"),
        (envelope(enqueued_at=SECONDS), "enqueued_at 1763725000 looks like seconds"),
        (envelope(not_before=SECONDS), "not_before 1763725000 looks like seconds"),
        (envelope(enqueued_at=1), "enqueued_at 1 looks like seconds"),
    ],
)
def test_every_invalid_message_gets_a_clear_reason(body, reason):
    with pytest.raises(InvalidJob) as err:
        decode_job(body)
    assert reason in err.value.reason


def test_an_enqueue_time_more_than_a_day_ahead_of_the_worker_clock_is_refused(monkeypatch):
    import kindling.core.envelope as envelope_module

    monkeypatch.setattr(envelope_module, "now_ms", lambda: NOW_MS)
    decode_job(envelope(enqueued_at=NOW_MS + DAY_MS))  # clocks disagree by up to a day: accepted
    with pytest.raises(InvalidJob) as err:
        decode_job(envelope(enqueued_at=NOW_MS + DAY_MS + 1))
    assert "more than a day ahead" in err.value.reason


def test_a_producer_refuses_a_seconds_timestamp_at_the_call():
    with pytest.raises(InvalidJob, match="looks like seconds"):
        new_job("t", not_before=SECONDS)
    job = new_job("t")
    with pytest.raises(InvalidJob, match="looks like seconds"):
        replace(job, enqueued_at=SECONDS)


def test_a_rejection_names_the_job_when_it_can():
    with pytest.raises(InvalidJob) as err:
        decode_job(envelope(id="keep-me", extra=1))
    assert err.value.job_id == "keep-me" and err.value.task == "noop"


def test_arguments_that_json_cannot_hold_fail_at_enqueue():
    with pytest.raises(TypeError, match="not JSON-serializable"):
        encode_job(new_job("t", [object()]))


# -- version 2: chain, parent (a group member) and payload (an S3 pointer) ---------------

CALL = {"task": "add", "args": [1], "kwargs": {}}
PARENT = {"id": "chord-1", "index": 0, "size": 3, "then": {"task": "total", "args": [], "kwargs": {}}}
PAYLOAD = {"bucket": "kindling-payloads", "key": "jobs/j1", "size": 2_097_152, "sha256": "ab" * 32}


def test_a_plain_job_stays_version_1_so_older_workers_read_it():
    assert codec.loads(encode_job(new_job("t", [1])))["version"] == 1


@pytest.mark.parametrize("fields", [
    {"chain": [CALL, {**CALL, "max_attempts": 2, "timeout": 5}]},
    {"parent": PARENT},
    {"parent": {**PARENT, "then": None}},
    {"payload": PAYLOAD},
    {"chain": [CALL], "parent": PARENT},
])
def test_a_job_using_a_version_2_field_is_written_as_version_2_and_round_trips(fields):
    job = new_job("t", **fields)
    body = encode_job(job)
    assert codec.loads(body)["version"] == 2
    assert decode_job(body) == job


@pytest.mark.parametrize(
    "changes, reason",
    [
        ({"chain": [CALL]}, "field(s) chain need envelope version 2"),
        ({"payload": PAYLOAD, "args": []}, "field(s) payload need envelope version 2"),
        ({"version": 2, "chain": []}, "chain must be a list of 1-100 call objects"),
        ({"version": 2, "chain": [CALL] * 101}, "chain must be a list of 1-100 call objects"),
        ({"version": 2, "chain": "add"}, "chain must be a list"),
        ({"version": 2, "chain": [5]}, "chain[0] must be a call object, got int"),
        ({"version": 2, "chain": [CALL, {"task": "x"}]}, "chain[1] is missing field(s): args, kwargs"),
        ({"version": 2, "chain": [{**CALL, "queue": "q"}]}, "chain[0] has unknown field(s): queue"),
        ({"version": 2, "chain": [{**CALL, "task": ""}]}, "chain[0]: task must be a string"),
        ({"version": 2, "chain": [{**CALL, "args": {}}]}, "chain[0]: args must be a JSON array"),
        ({"version": 2, "chain": [{**CALL, "max_attempts": 0}]}, "chain[0]: max_attempts must be"),
        ({"version": 2, "chain": [{**CALL, "timeout": 1e9}]}, "chain[0]: timeout must be"),
        ({"version": 2, "parent": {"id": "c"}}, "parent must be an object with exactly id, index, size, then"),
        ({"version": 2, "parent": {**PARENT, "id": "no spaces"}}, "parent.id must be a job id"),
        ({"version": 2, "parent": {**PARENT, "size": 0}}, "parent.size must be an integer from 1 to 10000"),
        ({"version": 2, "parent": {**PARENT, "size": True}}, "parent.size must be an integer"),
        ({"version": 2, "parent": {**PARENT, "index": 3}}, "parent.index must be an integer from 0 to size - 1"),
        ({"version": 2, "parent": {**PARENT, "index": -1}}, "parent.index must be"),
        ({"version": 2, "parent": {**PARENT, "then": []}}, "parent.then must be a call object"),
        ({"version": 2, "payload": {**PAYLOAD, "extra": 1}}, "payload must be an object with exactly"),
        ({"version": 2, "payload": {**PAYLOAD, "bucket": "UPPER"}}, "payload.bucket must be an S3 bucket name"),
        ({"version": 2, "payload": {**PAYLOAD, "key": ""}}, "payload.key must be 1-1024 bytes"),
        ({"version": 2, "payload": {**PAYLOAD, "key": "é" * 513}}, "payload.key must be 1-1024 bytes"),
        ({"version": 2, "payload": {**PAYLOAD, "key": "a\nb"}}, "payload.key must be 1-1024 bytes"),
        ({"version": 2, "payload": {**PAYLOAD, "size": -1}}, "payload.size must be a byte count"),
        ({"version": 2, "payload": {**PAYLOAD, "sha256": "AB" * 32}}, "payload.sha256 must be 64 lowercase hex"),
        ({"version": 2, "payload": PAYLOAD, "args": [1]}, "args must be [] and kwargs {}"),
        ({"version": 2, "payload": PAYLOAD, "kwargs": {"a": 1}}, "args must be [] and kwargs {}"),
    ],
)
def test_every_invalid_version_2_field_gets_a_clear_reason(changes, reason):
    with pytest.raises(InvalidJob) as err:
        decode_job(envelope(**changes))
    assert reason in err.value.reason


def test_new_job_refuses_a_bad_chain_before_it_is_sent():
    with pytest.raises(InvalidJob, match=r"chain\[0\] is missing"):
        new_job("t", chain=[{"task": "x"}])


def test_replace_carries_every_field_it_is_not_told_to_change_and_validates_the_copy():
    job = new_job("resize", ["a.png"], {"w": 1}, job_id="r1", max_attempts=2, timeout=3.0, not_before=NOW_MS,
                  chain=[{"task": "next", "args": [], "kwargs": {}}],
                  parent={"id": "c1", "index": 0, "size": 2, "then": None})
    copy = replace(job, enqueued_at=job.enqueued_at + 1)
    assert copy is not job and copy.enqueued_at == job.enqueued_at + 1
    assert all(getattr(copy, f) == getattr(job, f) for f in Job.__slots__ if f != "enqueued_at")
    with pytest.raises(TypeError, match="no field"):
        replace(job, queue="reports")
    with pytest.raises(InvalidJob, match="payload"):  # a pointer beside inline arguments
        replace(job, payload={"bucket": "bkt", "key": "k", "size": 1, "sha256": "0" * 64})
