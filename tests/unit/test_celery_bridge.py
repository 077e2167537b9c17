"""The Celery bridge, held to Celery itself: every message here is written by Celery's own
producer (``apply_async`` through ``as_task_v2``, kombu's ``Producer`` and kombu's SQS
transport: tests/support/celery_bridge.py), and read by kindling's runner. Each case says
what the task received and what record its id has, against what Celery's worker does
(kombu's own decoding of the same message is the reference for the arguments).

Where kindling differs from Celery on purpose, the case says so (``deliberately``), and
docs/coming-from-celery.md lists it.
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from types import SimpleNamespace

import kombu.compression
import kombu.serialization
import pytest
from celery import group
from celery.app.task import Context
from kindling import current_job
from kindling.core import envelope, policy
from kindling.core.batch import Delivery
from kindling.core.celery_message import MAX_BODY_BYTES
from kindling.core.envelope import decode_job, encode_job, new_job
from kindling.core.errors import JobFailed
from kindling.core.registry import Registry
from kindling.engine.runner import Runner
from kindling.producer.handles import wait_result
from kindling.stores.results import MemoryResultStore
from support.celery_bridge import CeleryProducer


@pytest.fixture(scope="module")
def celery():
    return CeleryProducer()


@pytest.fixture
def worker():
    """A kindling worker whose ``bridge.echo`` notes what it received and its job's headers."""
    reg, store = Registry(), MemoryResultStore()
    received = []

    @reg.task(name="bridge.echo")
    def echo(*args, **kwargs):
        received.append(SimpleNamespace(args=list(args), kwargs=kwargs, headers=current_job().headers))
        return "ok"

    runner = Runner(reg, store, log=None, metrics=False)

    def run(*sent):
        return runner.run([Delivery(s.message_id, s.body) for s in sent])

    yield SimpleNamespace(run=run, store=store, received=received, runner=runner)
    # Whatever the case: no kombu marker reached the task.
    assert not [got for got in received if _markers_in([got.args, got.kwargs, got.headers])]


def _markers_in(value) -> bool:
    if isinstance(value, dict):
        return set(value) == {"__type__", "__value__"} or any(_markers_in(v) for v in value.values())
    return isinstance(value, list | tuple) and any(_markers_in(v) for v in value)


def outcome_of(store: MemoryResultStore, job_id: str) -> tuple[str, str]:
    """What ``client.result(job_id)`` answers: ``("succeeded", result)`` or (status, error message)."""
    try:
        return "succeeded", wait_result(store, job_id, timeout=0)
    except JobFailed as failed:
        return failed.status, failed.error.get("message", "")


# -- arguments: every type kombu's JSON encoder registers, as Celery's worker decodes them -----

IST = timezone(timedelta(hours=5, minutes=30))
ARGUMENTS = {
    "datetime (aware)": ((datetime(2030, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),), {}),
    "datetime (naive)": ((datetime(2030, 1, 2, 3, 4, 5),), {}),
    "datetime (+05:30)": ((datetime(2030, 1, 2, 3, 4, tzinfo=IST),), {}),
    "date": ((date(2030, 1, 2),), {}),
    "time": ((time(1, 2, 3, 4),), {}),
    "time (aware)": ((time(1, 2, tzinfo=UTC),), {}),
    "Decimal": ((Decimal("1.10"), Decimal("-0"), Decimal("1E+3"), Decimal("Infinity"), Decimal("NaN")), {}),
    "UUID": ((uuid.UUID("0b1c5a4e-3f0e-4c53-9b6a-2f7f5d1e9a11"),), {}),
    "bytes (UTF-8)": ((b"caf\xc3\xa9",), {}),
    "bytes (binary: base64)": ((bytes(range(256)),), {}),
    "nested in lists and dicts": (([{"at": [datetime(2030, 1, 2, tzinfo=UTC), date(2031, 5, 6)]},
                                    {"amount": Decimal("9.99"), "ids": [uuid.UUID(int=7)]}],), {}),
    "in kwargs": ((), {"when": date(2030, 1, 2), "blob": b"\x00\xff", "deep": {"t": time(23, 59)}}),
    "plain JSON": ((2**70, 1.5, "é", None, True, [], {}), {"n": -1}),
    "a tuple (a list, as in Celery)": (((1, 2),), {}),
    "int dict keys (strings, as in Celery)": (({1: "a"},), {}),
    "a marker look-alike with a third key (a plain dict)": (({"__type__": "uuid", "__value__": "x", "y": 1},), {}),
}


def test_every_type_kombu_s_json_registers_has_a_case_and_a_decoder():
    import kombu.utils.json as kombu_json
    from kindling.core.celery_message import _MARKERS

    def values(value):
        yield value
        if isinstance(value, list | tuple):
            for v in value:
                yield from values(v)
        if isinstance(value, dict):
            for v in value.values():
                yield from values(v)

    sent = [v for args, kwargs in ARGUMENTS.values() for v in values([args, kwargs])]
    assert all(any(isinstance(v, t) for v in sent) for t in [*kombu_json._encoders, bytes])
    assert set(kombu_json._decoders) == set(_MARKERS)


@pytest.mark.parametrize("name", list(ARGUMENTS))
def test_a_task_receives_what_celery_s_worker_would_hand_it(celery, worker, name):
    args, kwargs = ARGUMENTS[name]
    sent = celery.send(args, kwargs)
    celery_args, celery_kwargs, _ = celery.celery_sees(sent)
    worker.run(sent)
    [got] = worker.received
    # repr: Decimal("1.10") is not Decimal("1.1"), a naive datetime is not an aware one.
    assert (repr(got.args), repr(got.kwargs)) == (repr(celery_args), repr(celery_kwargs))
    assert outcome_of(worker.store, sent.task_id) == ("succeeded", "ok")


# Celery's worker refuses these too (kombu raises while decoding): kindling records why, under the id.
REFUSED_BY_BOTH = {
    "a marker of a type no one registered": ({"__type__": "money", "__value__": "1.00"}, "unsupported type 'money'"),
    "a UUID marker that is not a UUID": ({"__type__": "uuid", "__value__": {"hex": "zz"}}, "cannot be read as uuid"),
    "a datetime marker that is not ISO 8601": ({"__type__": "datetime", "__value__": "soon"},
                                               "cannot be read as datetime"),
}


@pytest.mark.parametrize("name", list(REFUSED_BY_BOTH))
def test_a_marker_celery_cannot_decode_is_rejected_with_the_reason_under_its_id(celery, worker, name):
    marker, reason = REFUSED_BY_BOTH[name]
    sent = celery.send(([marker],))
    with pytest.raises(kombu.exceptions.DecodeError):
        celery.celery_sees(sent)
    worker.run(sent)
    assert worker.received == []
    status, message = outcome_of(worker.store, sent.task_id)
    assert status == "rejected" and reason in message


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")], ids=["nan", "inf", "-inf"])
def test_nan_and_infinity_are_rejected_under_the_id_deliberately(celery, worker, value):
    # Celery's worker hands the task the float; kindling's JSON contract (kindling.core.codec) has no
    # such numbers, written or read.
    sent = celery.send((value,))
    assert repr(celery.celery_sees(sent)[0]) == repr([value])
    worker.run(sent)
    assert worker.received == []
    status, message = outcome_of(worker.store, sent.task_id)
    assert status == "rejected" and "is not JSON" in message


# -- compressions and serializers: every one kombu offers ---------------------------------------

READ_COMPRESSIONS = {"application/x-gzip", "application/x-bz2", "application/x-lzma"}


@pytest.mark.parametrize("compression", sorted(kombu.compression.encoders()))
def test_every_compression_kombu_offers_is_read(celery, worker, compression):
    assert compression in READ_COMPRESSIONS  # one kombu offers and kindling does not read needs a case below
    args = ("x" * 5000, datetime(2030, 1, 2, tzinfo=UTC), b"\xff")
    sent = celery.send(args, compression=compression)
    assert sent.message["headers"]["compression"] == compression
    worker.run(sent)
    assert repr(worker.received[0].args) == repr(celery.celery_sees(sent)[0])
    assert outcome_of(worker.store, sent.task_id) == ("succeeded", "ok")


@pytest.mark.parametrize("alias", ["gzip", "zlib", "bzip2", "lzma", "xz"])
def test_kombu_s_compression_aliases_are_read(celery, worker, alias):
    sent = celery.send((1,), compression=alias)
    worker.run(sent)
    assert worker.received[0].args == [1]


@pytest.fixture
def unread_compressions():
    """Compressions kombu offers when their libraries are installed (brotli, zstd before Python
    3.14), registered through kombu's own ``register`` (as a stand-in codec) for the test."""
    names = {"application/x-brotli": ["brotli"], "application/zstd": ["zstd", "zstandard"]}
    saved = (dict(kombu.compression._encoders), dict(kombu.compression._decoders), dict(kombu.compression._aliases))
    for content_type, aliases in names.items():
        if content_type not in kombu.compression._encoders:
            kombu.compression.register(lambda b: b"stand-in" + b, lambda b: b[8:], content_type, aliases=aliases)
    yield list(names)
    for registry, before in zip((kombu.compression._encoders, kombu.compression._decoders,
                                 kombu.compression._aliases), saved, strict=True):
        registry.clear()
        registry.update(before)


def test_a_compression_kindling_does_not_read_is_rejected_by_name(celery, worker, unread_compressions):
    for compression in unread_compressions:
        sent = celery.send((1,), compression=compression)
        worker.run(sent)
        status, message = outcome_of(worker.store, sent.task_id)
        assert status == "rejected" and compression in message
    assert worker.received == []


@pytest.mark.parametrize("compression", ["gzip", "bzip2", "lzma"])
def test_a_body_that_decompresses_past_the_bound_is_rejected_unread(celery, worker, compression):
    sent = celery.send(("0" * (MAX_BODY_BYTES + 1),), compression=compression)
    assert len(sent.body) < 20_000  # a small message, a large body: read no further than the bound
    worker.run(sent)
    status, message = outcome_of(worker.store, sent.task_id)
    assert status == "rejected" and f"over {MAX_BODY_BYTES:,} bytes" in message
    assert worker.received == []


def _serializers() -> list[str]:
    """The serializers kombu offers here: registered, and with their library installed."""
    offered = []
    for name in sorted(kombu.serialization.registry._encoders):
        try:
            kombu.serialization.dumps([1], serializer=name)
        except kombu.exceptions.SerializerNotInstalled:
            continue
        offered.append(name)
    return offered


def test_json_and_pickle_are_among_the_serializers():
    assert {"json", "pickle"} <= set(_serializers())


@pytest.mark.parametrize(("damage", "reason"), [
    (lambda data: data[: len(data) // 2], "cut short"),
    (lambda data: b"\x00" + data[1:], "is not application/x-gzip data"),
], ids=["cut short", "not zlib"])
def test_a_compressed_body_damaged_on_the_way_is_rejected_under_the_id(celery, worker, damage, reason):
    sent = celery.send(("x" * 1000,), compression="gzip")
    message = sent.message
    message["body"] = base64.b64encode(damage(base64.b64decode(message["body"]))).decode()
    damaged = SimpleNamespace(message_id=sent.message_id, body=base64.b64encode(json.dumps(message).encode()).decode())
    worker.run(damaged)
    status, message = outcome_of(worker.store, sent.task_id)
    assert status == "rejected" and reason in message


@pytest.mark.parametrize("serializer", [s for s in _serializers() if s != "json"])
def test_every_other_serializer_kombu_offers_is_rejected_by_name_under_the_id(celery, worker, serializer):
    # Celery's worker also refuses them unless accept_content allows them; pickle is never read.
    sent = celery.send((1, "a"), serializer=serializer)
    content_type = sent.message["content-type"]
    worker.run(sent)
    status, message = outcome_of(worker.store, sent.task_id)
    assert status == "rejected" and f"serializer {content_type!r}" in message
    assert worker.received == []


def test_a_message_of_protocol_1_is_rejected_under_the_id_it_names():
    sent = CeleryProducer(task_protocol=1).send((1,))
    reg, store = Registry(), MemoryResultStore()
    Runner(reg, store, log=None, metrics=False).run([Delivery(sent.message_id, sent.body)])
    status, message = outcome_of(store, sent.task_id)
    assert status == "rejected" and "protocol 1" in message


# -- apply_async's options ------------------------------------------------------------------------


def test_countdown_and_eta_schedule_the_job_under_its_id(celery, worker):
    due = datetime.now(UTC) + timedelta(minutes=10)
    for sent in (celery.send((1,), countdown=600), celery.send((1,), eta=due)):
        worker.run(sent)
        record = worker.store.record(sent.task_id)
        eta = datetime.fromisoformat(sent.message["headers"]["eta"])
        assert record["status"] == "scheduled" and record["due_at"] == int(eta.timestamp() * 1000)
    assert worker.received == []


def test_a_naive_eta_is_utc_as_celery_reads_it(celery):
    when = datetime(2030, 1, 2, 3, 4, 5)
    sent = celery.send((1,), eta=when)
    assert decode_job(sent.body).not_before == int(when.replace(tzinfo=UTC).timestamp() * 1000)


def test_an_eta_past_runs_now(celery, worker):
    sent = celery.send((1,), eta=datetime.now(UTC) - timedelta(minutes=1))
    worker.run(sent)
    assert outcome_of(worker.store, sent.task_id) == ("succeeded", "ok")


def test_expires_ahead_runs(celery, worker):
    sent = celery.send((1,), expires=3600)
    worker.run(sent)
    assert outcome_of(worker.store, sent.task_id) == ("succeeded", "ok")


def test_a_message_past_its_expires_is_recorded_revoked_under_its_id(celery, worker):
    # Celery's worker marks an expired task REVOKED (expired) and does not run it.
    sent = celery.send((1,), expires=datetime.now(UTC) - timedelta(seconds=1))
    worker.run(sent)
    assert worker.received == []
    status, message = outcome_of(worker.store, sent.task_id)
    assert status == "revoked" and "expired at" in message


def test_a_message_that_expires_before_it_is_due_is_revoked_at_once(celery, worker):
    sent = celery.send((1,), countdown=60, expires=5)
    worker.run(sent)
    assert worker.received == []
    status, message = outcome_of(worker.store, sent.task_id)
    assert status == "revoked" and "before it is due" in message


def test_a_scheduled_job_that_expires_while_it_waits_ends_revoked(celery, worker, monkeypatch):
    sent = celery.send((1,), countdown=60, expires=120)
    worker.run(sent)
    assert worker.store.record(sent.task_id)["status"] == "scheduled"
    later = envelope.now_ms() + 180_000
    monkeypatch.setattr(policy, "time", SimpleNamespace(time_ns=lambda: later * 1_000_000))
    worker.run(sent)  # its redelivery, once due: past its expiry by then
    assert worker.received == []
    assert outcome_of(worker.store, sent.task_id)[0] == "revoked"


def test_a_job_that_failed_and_expired_before_its_retry_ends_revoked(celery, monkeypatch):
    reg, store = Registry(), MemoryResultStore()

    @reg.task(name="bridge.echo")
    def echo(*args):
        raise RuntimeError("down")

    runner = Runner(reg, store, log=None, metrics=False)
    sent = celery.send((1,), expires=60)
    runner.run([Delivery(sent.message_id, sent.body)])
    assert store.record(sent.task_id)["status"] == "failed"
    later = envelope.now_ms() + 120_000
    monkeypatch.setattr(policy, "time", SimpleNamespace(time_ns=lambda: later * 1_000_000))
    runner.run([Delivery(sent.message_id, sent.body, attempts=2)])
    assert outcome_of(store, sent.task_id)[0] == "revoked"


@pytest.mark.parametrize(("options", "timeout"), [
    ({"time_limit": 30}, 30),
    ({"soft_time_limit": 10}, 10),
    ({"time_limit": 30, "soft_time_limit": 10}, 10),
    ({}, None),
], ids=["time_limit", "soft_time_limit alone", "both: the earlier", "neither"])
def test_time_limits_become_the_job_s_timeout(celery, options, timeout):
    assert decode_job(celery.send((1,), **options).body).timeout == timeout


@pytest.mark.parametrize("headers", [
    {"tenant": "acme", "trace": {"span": 7}},
    {"at": datetime(2030, 1, 2, tzinfo=UTC), "ids": [uuid.UUID(int=3)], "blob": b"\xff"},
    None,
], ids=["headers", "kombu's types in headers", "none"])
def test_headers_reach_the_task_as_celery_s_request_headers(celery, worker, headers):
    sent = celery.send((1,), headers=headers)
    worker.run(sent)
    # Celery's self.request.headers: the message's headers less Celery's own, None when none are left.
    assert repr(worker.received[0].headers) == repr(celery.celery_request_headers(sent))
    assert worker.received[0].headers == headers


def test_the_headers_kindling_keeps_from_the_task_are_the_ones_celery_s_worker_keeps_from_it():
    from kindling.core.celery_message import _CELERY_HEADERS

    celery_s_own = {name for name in Context.__dict__ if not name.startswith("__")}
    assert celery_s_own | {"lang", "task", "argsrepr", "kwargsrepr", "compression"} == _CELERY_HEADERS


def test_a_task_id_of_the_job_id_alphabet_is_the_job_id(celery, worker):
    sent = celery.send((1,), task_id="order-42:a_b.c")
    worker.run(sent)
    assert outcome_of(worker.store, "order-42:a_b.c") == ("succeeded", "ok")


@pytest.mark.parametrize("task_id", ["order 42", "a/b", "x" * 129, "é"], ids=["space", "slash", "129", "non-ascii"])
def test_a_task_id_outside_the_job_id_alphabet_is_rejected_under_its_message(celery, worker, task_id):
    sent = celery.send((1,), task_id=task_id)
    worker.run(sent)
    assert worker.received == [] and worker.store.record(task_id) is None
    record = worker.store.record(f"rejected#{sent.message_id}")
    assert record["status"] == "rejected" and record["job_id"] == task_id
    assert "letters, digits and -_.:" in record["error"]["message"]


@pytest.mark.parametrize("options", [{"shadow": "a.display.name"}, {"priority": 5}, {"ignore_result": True},
                                     {"retries": 3}, {"reply_to": "elsewhere"}, {"argsrepr": "(secret)"}],
                         ids=lambda o: next(iter(o)))
def test_options_that_change_nothing_a_kindling_worker_does_run_the_task(celery, worker, options):
    sent = celery.send((1,), **options)
    worker.run(sent)
    assert worker.received[0].args == [1]
    assert outcome_of(worker.store, sent.task_id) == ("succeeded", "ok")


@pytest.mark.parametrize("option", ["link", "link_error"])
def test_callbacks_are_rejected_under_the_id(celery, worker, option):
    sent = celery.send((1,), **{option: celery.after.s()})
    worker.run(sent)
    status, message = outcome_of(worker.store, sent.task_id)
    assert status == "rejected" and "cannot be honoured" in message
    assert worker.received == []


def test_stamps_are_rejected_under_the_id(celery, worker):
    sent = celery.send((1,), stamped_headers=["tenant"], tenant="acme")
    worker.run(sent)
    status, message = outcome_of(worker.store, sent.task_id)
    assert status == "rejected" and "stamps" in message


def test_a_group_s_members_run_each_under_its_own_id(celery, worker):
    before = len(celery.capture.sent)
    group(celery.echo.s(1), celery.echo.s(2)).apply_async()
    bodies = celery.capture.sent[before:]
    ids = [json.loads(base64.b64decode(p["MessageBody"]))["headers"]["id"] for p in bodies]
    worker.runner.run([Delivery(f"g{i}", p["MessageBody"]) for i, p in enumerate(bodies)])
    assert sorted(r.args for r in worker.received) == [[1], [2]]
    assert [outcome_of(worker.store, i) for i in ids] == [("succeeded", "ok")] * 2


# -- the record under the id never takes a real job's place ----------------------------------------


def test_a_rejection_does_not_replace_a_real_job_s_record(celery, worker):
    sent = celery.send((1,), task_id="shared-1")
    worker.run(sent)
    worker.run(celery.send((1,), task_id="shared-1", link=celery.after.s()))
    assert outcome_of(worker.store, "shared-1") == ("succeeded", "ok")


@pytest.mark.parametrize("order", ["job first", "rejection first"])
def test_a_rejection_and_a_job_of_one_id_in_one_batch(celery, worker, order):
    job = new_job("bridge.echo", [1], job_id="shared-2")
    good = SimpleNamespace(message_id="good", body=encode_job(job).decode())
    bad = celery.send((1,), task_id="shared-2", link=celery.after.s())
    outcomes = worker.run(*((good, bad) if order == "job first" else (bad, good)))
    if order == "job first":  # the job runs; the bad copy follows it, unrecorded
        assert outcome_of(worker.store, "shared-2") == ("succeeded", "ok")
    else:  # the rejection takes the id; the job is handed back, and its next delivery replaces it
        assert worker.store.record("shared-2")["status"] == "rejected"
        assert [o.status for o in outcomes] == ["rejected", "deferred"]
        worker.run(good)
        assert outcome_of(worker.store, "shared-2") == ("succeeded", "ok")
    assert [r.args for r in worker.received] == [[1]]


@pytest.fixture(scope="module")
def celery_raw_json():
    """kombu's SQS transport without base64 (``sqs_base64_encoding=False``): the message as JSON text."""
    producer = CeleryProducer()
    producer.app.conf.broker_transport_options = dict(producer.app.conf.broker_transport_options,
                                                      sqs_base64_encoding=False)
    return producer


def test_a_message_sent_as_json_text_is_read_as_the_base64_one(celery_raw_json, worker):
    sent = celery_raw_json.send((datetime(2030, 1, 2, tzinfo=UTC),), compression="bzip2", headers={"h": 1})
    assert sent.body.startswith("{")
    worker.run(sent)
    assert worker.received[0].args == [datetime(2030, 1, 2, tzinfo=UTC)] and worker.received[0].headers == {"h": 1}


@pytest.mark.parametrize("b64", [True, False], ids=["base64", "json text"])
def test_a_message_whose_headers_are_not_json_still_names_its_id(celery, celery_raw_json, worker, b64):
    sent = (celery if b64 else celery_raw_json).send((1,), headers={"ratio": float("nan")})
    worker.run(sent)
    status, message = outcome_of(worker.store, sent.task_id)
    assert status == "rejected" and "not JSON" in message

