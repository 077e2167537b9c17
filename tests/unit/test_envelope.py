import pytest
from kindling import codec
from kindling.envelope import decode_job, encode_job, new_job, new_job_id
from kindling.errors import InvalidJob


def test_round_trip():
    job = new_job("resize", ["a.png"], {"width": 64}, max_attempts=4, timeout=2.5)
    assert decode_job(encode_job(job)) == job
    assert decode_job(encode_job(job).decode()) == job


def test_ids_are_unique_and_sort_by_time():
    ids = [new_job_id(at_ms=1_700_000_000_000 + i) for i in range(200)]
    assert ids == sorted(ids) and len(set(ids)) == 200
    assert all(len(i) == 26 for i in ids)
    assert len({new_job_id() for _ in range(1000)}) == 1000


def envelope(**changes):
    base = {"version": 1, "id": "j1", "task": "noop", "args": [], "kwargs": {}, "enqueued_at": 1}
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
        (envelope(version=2), "envelope version 2 needs a newer kindling"),
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
    ],
)
def test_every_invalid_message_gets_a_clear_reason(body, reason):
    with pytest.raises(InvalidJob) as err:
        decode_job(body)
    assert reason in err.value.reason


def test_a_rejection_names_the_job_when_it_can():
    with pytest.raises(InvalidJob) as err:
        decode_job(envelope(id="keep-me", extra=1))
    assert err.value.job_id == "keep-me" and err.value.task == "noop"


def test_arguments_that_json_cannot_hold_fail_at_enqueue():
    with pytest.raises(TypeError, match="not JSON-serializable"):
        encode_job(new_job("t", [object()]))
