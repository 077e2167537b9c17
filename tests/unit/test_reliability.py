"""Nothing lost, nothing overwritten: what an adversarial message, task or store does to a batch.

Each test names the defect class it guards. Every batch here carries a valid batch-mate,
and every test checks the batch-mate's outcome: one job's trouble is never the batch's.
"""

import asyncio
import time

import pytest
from kindling.core import codec
from kindling.core.envelope import new_job
from kindling.core.registry import Registry
from kindling.engine.runner import STORE_OUTAGE, Delivery, Runner
from support.tasks import delivery, statuses


def record_of(store, outcome):
    return store.records[outcome.record["id"]]


# -- 1. one message cannot crash the batch -----------------------------------------------

POISON_BODIES = [
    "[" * 40_000,  # the decoder's recursion limit
    '{"a":' * 40_000,
    '{"version": 1, "id": "x", "task": "add", "args": ' + "[" * 40_000 + "]" * 40_000 + ', "kwargs": {}, '
    '"enqueued_at": 1700000000000}',
    b"\xff\xfe not utf-8",
    "",
    "null",
    '"\\ud800"',
    "1e999999",
]


@pytest.mark.parametrize("body", POISON_BODIES, ids=range(len(POISON_BODIES)))
def test_a_body_that_breaks_the_decoder_is_its_own_rejection(reg, store, body):
    good = delivery("add", 1, 2)
    outcomes = Runner(reg, store, log=None).run([Delivery("m-poison", body, 1), good])
    assert statuses(outcomes) == ["rejected", "succeeded"]
    poison = record_of(store, outcomes[0])
    assert poison["id"] == "rejected#m-poison" and poison["status"] == "rejected"
    assert poison["error"]["type"] == "InvalidJob"


def test_the_codec_turns_any_nesting_into_a_decode_error():
    with pytest.raises(codec.DecodeError):
        codec.loads("[" * 100_000)


# -- 3. every record fits DynamoDB by construction ---------------------------------------


def test_byte_limits_count_utf8_bytes_not_characters(store):
    reg = Registry()
    reg.task(name="wide")(lambda: "é" * 200_000)  # 200,000 characters, 400,000 bytes of JSON
    outcomes = Runner(reg, store, log=None).run([delivery("wide")])
    record = record_of(store, outcomes[0])
    assert record["status"] == "failed" and record["error"]["type"] == "ResultTooLarge"


def test_an_enormous_unknown_task_name_is_refused_with_a_short_record(reg, store):
    body = codec.dumps({"version": 1, "id": "job-1", "task": "t" * 140_000, "args": [], "kwargs": {},
                        "enqueued_at": 1_700_000_000_000})
    outcomes = Runner(reg, store, log=None).run([Delivery("m-1", body, 1), delivery("add", 1, 1)])
    assert statuses(outcomes) == ["rejected", "succeeded"]
    record = record_of(store, outcomes[0])
    assert len(codec.dumps(record).encode()) < 400_000
    assert record["id"] == "rejected#m-1" and record["job_id"] == "job-1"
    assert len(record["task"].encode()) <= 256 and record["truncated"]["task"] == 140_000
    assert "140,000" not in record["error"]["message"] or len(record["error"]["message"]) <= 4000


def test_a_body_stamped_in_seconds_is_recorded_rejected_saying_so(reg, store):
    body = codec.dumps({"version": 1, "id": "secs", "task": "add", "args": [1, 2], "kwargs": {},
                        "enqueued_at": 1_763_725_000})
    outcomes = Runner(reg, store, log=None).run([Delivery("m-s", body, 1)])
    assert statuses(outcomes) == ["rejected"]
    assert "enqueued_at 1763725000 looks like seconds" in record_of(store, outcomes[0])["error"]["message"]


@pytest.mark.parametrize("bad_id", ["x" * 3000, "a\x00b", "tab\there", "ünïcode", ""])
def test_an_invalid_job_id_never_becomes_a_record_key(reg, store, bad_id):
    body = codec.dumps({"version": 1, "id": bad_id, "task": "add", "args": [1, 2], "kwargs": {},
                        "enqueued_at": 1_700_000_000_000})
    outcomes = Runner(reg, store, log=None).run([Delivery("m-2", body, 1)])
    assert statuses(outcomes) == ["rejected"]
    assert list(store.records) == ["rejected#m-2"]
    assert len(store.records["rejected#m-2"].get("job_id", "").encode()) <= 512


def test_an_error_message_with_a_lone_surrogate_is_recorded_escaped(store):
    reg = Registry()

    @reg.task(name="weird")
    def weird():
        raise ValueError("bad \ud800 text " + "x" * 10_000)

    outcomes = Runner(reg, store, log=None).run([delivery("weird")])
    error = record_of(store, outcomes[0])["error"]
    error["message"].encode("utf-8")  # valid UTF-8 now
    assert "\\ud800" in error["message"] and len(error["message"].encode()) <= 4000


# -- 4. a task cannot destroy its batch-mates' results ------------------------------------


class Custom(BaseException):
    pass


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no")


class BadIso:
    def isoformat(self):
        raise SystemExit(3)


def _deep():
    value = []
    for _ in range(50_000):
        value = [value]
    return value


RAISERS = {
    "SystemExit": lambda: (_ for _ in ()).throw(SystemExit(1)),
    "KeyboardInterrupt": lambda: (_ for _ in ()).throw(KeyboardInterrupt()),
    "GeneratorExit": lambda: (_ for _ in ()).throw(GeneratorExit()),
    "Custom": lambda: (_ for _ in ()).throw(Custom("mine")),
    "Unprintable": lambda: (_ for _ in ()).throw(Unprintable()),
}
RESULTS = {
    "deep": _deep,
    "bad_isoformat": lambda: BadIso(),
    "surrogate": lambda: "\ud800",
    "object": lambda: object(),
}


@pytest.mark.parametrize("kind", list(RAISERS) + list(RESULTS))
def test_whatever_a_task_raises_or_returns_is_only_its_own_failure(reg, store, kind):
    fn = RAISERS.get(kind) or RESULTS[kind]
    reg.task(name="evil")(fn)
    before, evil, after = delivery("add", 1, 2), delivery("evil"), delivery("add", 3, 4)
    outcomes = Runner(reg, store, log=None).run([before, evil, after])
    # A result JSON cannot hold is dead at once (the next run would return the same kind of value).
    assert statuses(outcomes) == ["succeeded", "dead" if kind in RESULTS else "failed", "succeeded"]
    assert record_of(store, outcomes[1])["error"]["type"] == ("UnencodableResult" if kind in RESULTS else kind)
    assert codec.loads(record_of(store, outcomes[2])["result"]) == 7


@pytest.mark.parametrize("exc", [asyncio.CancelledError, SystemExit, KeyboardInterrupt])
def test_an_async_task_raising_a_base_exception_fails_alone(store, exc):
    reg = Registry()

    @reg.task(name="acancel")
    async def acancel():
        raise exc()

    @reg.task(name="aok")
    async def aok():
        await asyncio.sleep(0.01)
        return "ok"

    outcomes = Runner(reg, store, log=None).run([delivery("acancel"), delivery("aok")])
    assert statuses(outcomes) == ["failed", "succeeded"]
    assert record_of(store, outcomes[0])["error"]["type"] == exc.__name__


def test_an_all_succeeded_batch_keeps_one_read_and_one_write(reg, store):
    Runner(reg, store, log=None).run([delivery("add", i, i) for i in range(10)])
    assert (store.reads, store.writes) == (1, 1)


def test_a_task_that_swallows_its_timeout_is_interrupted_again_and_recorded_timed_out(store):
    reg = Registry()

    @reg.task(name="stubborn", timeout=0.1)
    def stubborn():
        swallowed = 0
        while swallowed < 2:
            try:
                time.sleep(5)
            except Exception:  # noqa: BLE001 - the task under test ignores its timeout
                swallowed += 1
        return "late"

    started = time.monotonic()
    outcomes = Runner(reg, store, log=None).run([delivery("stubborn")])
    assert time.monotonic() - started < 4
    assert record_of(store, outcomes[0])["error"]["type"] == "JobTimeout"


# -- 5. records only move forward ----------------------------------------------------------


def test_a_stale_failure_never_replaces_a_success(reg, store):
    d = delivery("add", 1, 2)
    job_id = new_job_id_of(d)
    Runner(reg, store, log=None).run([d])
    # A slow, concurrent delivery of the same job failed, and writes after the success.
    stale = {"id": job_id, "task": "add", "status": "failed", "attempts": 1, "finished_at": 1, "started_at": 1}
    assert store.write([stale]) == {job_id: "succeeded"}
    assert store.records[job_id]["status"] == "succeeded"


def test_a_stale_dead_never_replaces_a_success_but_a_success_replaces_dead(store):
    store.write([{"id": "j", "status": "succeeded", "attempts": 2}])
    assert store.write([{"id": "j", "status": "dead", "attempts": 3}]) == {"j": "succeeded"}
    store.records["j"] = {"id": "j", "status": "dead", "attempts": 3}
    assert store.write([{"id": "j", "status": "succeeded", "attempts": 2}]) == {}
    assert store.records["j"]["status"] == "succeeded"


def test_a_failure_never_rolls_back_a_later_attempt(store):
    store.write([{"id": "j", "status": "failed", "attempts": 3}])
    assert store.write([{"id": "j", "status": "failed", "attempts": 2}]) == {"j": "failed"}
    assert store.records["j"]["attempts"] == 3


def test_a_malformed_message_carrying_a_real_jobs_id_cannot_touch_its_record(reg, store):
    d = delivery("add", 1, 2)
    job_id = new_job_id_of(d)
    Runner(reg, store, log=None).run([d])
    forged = codec.dumps({"version": 1, "id": job_id, "task": "add", "args": [], "kwargs": {}, "junk": 1,
                          "enqueued_at": 1_700_000_000_000})
    unknown = codec.dumps({"version": 1, "id": job_id, "task": "nope", "args": [], "kwargs": {},
                           "enqueued_at": 1_700_000_000_000})
    outcomes = Runner(reg, store, log=None).run([Delivery("m-forged", forged, 1), Delivery("m-unknown", unknown, 1)])
    assert store.records[job_id]["status"] == "succeeded"
    assert store.records["rejected#m-forged"]["job_id"] == job_id
    assert statuses(outcomes) == ["rejected", "skipped"]  # the unknown-task copy may not replace a real record


def test_rejected_bodies_sharing_an_id_each_keep_their_own_record(reg, store):
    bodies = [codec.dumps({"version": 1, "id": "same", "task": "add", "args": [], "kwargs": {}, "n": i,
                           "enqueued_at": 1_700_000_000_000}) for i in range(9)]
    Runner(reg, store, log=None).run([Delivery(f"m-{i}", b, 1) for i, b in enumerate(bodies)])
    assert sorted(store.records) == sorted(f"rejected#m-{i}" for i in range(9))


def test_a_valid_job_id_cannot_take_the_rejected_key_form(reg, store):
    Runner(reg, store, log=None).run([Delivery("m-bad", "{nope", 1)])
    with pytest.raises(ValueError, match="id must be"):
        new_job("add", [1, 2], job_id="rejected#m-bad")


# -- 2. hand-backs do not use attempts ---------------------------------------------------


def test_attempts_are_counted_in_the_record_not_from_deliveries(reg, store):
    runner = Runner(reg, store, max_attempts=3, log=None)
    d = delivery("boom")
    # Delivered many times (store outages, cut-offs), run once so far: attempt 1, not 7.
    outcomes = runner.run([Delivery(d.ref, d.body, 7)])
    assert statuses(outcomes) == ["failed"] and record_of(store, outcomes[0])["attempts"] == 1
    assert statuses(runner.run([Delivery(d.ref, d.body, 8)])) == ["failed"]
    outcomes = runner.run([Delivery(d.ref, d.body, 9)])
    assert statuses(outcomes) == ["dead"] and record_of(store, outcomes[0])["attempts"] == 3


def test_a_store_outage_hands_back_with_growing_backoff_and_no_attempt(reg, store):
    store.fail = True
    runner = Runner(reg, store, log=None)
    d = delivery("boom")
    delays = [runner.run([Delivery(d.ref, d.body, n)])[0].retry_in for n in (1, 2, 3, 4)]
    assert delays == sorted(delays) and delays[0] < delays[-1]
    store.fail = False
    outcomes = runner.run([Delivery(d.ref, d.body, 5)])
    assert record_of(store, outcomes[0])["attempts"] == 1


def test_a_job_not_due_comes_back_when_due(reg, store):
    d = delivery("add", 1, 2, not_before=int(time.time() * 1000) + 90_000)
    outcome = Runner(reg, store, log=None).run([d])[0]
    assert outcome.status == "deferred" and 89 <= outcome.retry_in <= 90


def test_on_its_last_delivery_an_unfinished_job_is_recorded_dead_not_run(reg, store):
    d = delivery("add", 1, 2)
    outcomes = Runner(reg, store, max_deliveries=10, log=None).run([Delivery(d.ref, d.body, 10)])
    assert statuses(outcomes) == ["dead"] and reg.runs == []
    assert record_of(store, outcomes[0])["error"]["type"] == "TooManyDeliveries"


def test_a_newer_envelope_is_handed_back_not_rejected(reg, store):
    body = codec.dumps({"version": 3, "id": "j2", "task": "add", "args": [1, 2], "kwargs": {},
                        "enqueued_at": 1_700_000_000_000,
                        "group": "g"})
    outcomes = Runner(reg, store, log=None).run([Delivery("m-v3", body, 1)])
    assert statuses(outcomes) == ["deferred"] and outcomes[0].retry_in > 0
    assert store.records == {}


# -- 7. the threaded runner -------------------------------------------------------------


def test_threaded_timeouts_count_from_each_jobs_own_start(store):
    reg = Registry()
    ran = []

    @reg.task(name="hang", timeout=0.5)
    def hang():
        time.sleep(1.5)

    @reg.task(name="quick", timeout=0.5)
    def quick():
        ran.append(1)
        time.sleep(0.05)
        return "ok"

    runner = Runner(reg, store, threads=2, log=None)
    outcomes = runner.run([delivery("hang"), delivery("hang")] + [delivery("quick") for _ in range(4)])
    assert statuses(outcomes) == ["failed", "failed", "succeeded", "succeeded", "succeeded", "succeeded"]
    assert len(ran) == 4


@pytest.mark.parametrize("field,value", [("timeout", "1e10"), ("timeout", "1e999"), ("max_attempts", "1000000000"),
                                         ("not_before", "100000000000000000000"),
                                         ("enqueued_at", "100000000000000000000")])
def test_absurd_values_are_rejected_at_validation(reg, store, field, value):
    fields = {"version": "1", "id": '"j"', "task": '"add"', "args": "[1, 2]", "kwargs": "{}", "enqueued_at": "1",
              field: value}
    body = "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}"  # by hand: codecs differ on these
    outcomes = Runner(reg, store, threads=2, log=None).run([Delivery("m", body, 1), delivery("add", 1, 1)])
    assert statuses(outcomes) == ["rejected", "succeeded"]
    assert store.records["rejected#m"]["status"] == "rejected"


def new_job_id_of(d: Delivery) -> str:
    return codec.loads(d.body)["id"]


# -- 8. every store call respects the invocation's remaining time ---------------------------


@pytest.fixture
def black_hole():
    """A loopback endpoint that accepts connections and never answers."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.close()


@pytest.mark.service  # a moto server: to move to tests/service
@pytest.mark.parametrize("phase", ["read", "write"])
def test_a_black_holed_dynamodb_is_given_up_on_before_the_invocation_ends(reg, black_hole, monkeypatch, phase):
    from kindling.drivers.aws import JsonClient
    from kindling.stores.results import DynamoResultStore

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    dynamo = DynamoResultStore("t", client=JsonClient("dynamodb", "DynamoDB_20120810", region="us-east-1",
                                                      endpoint=black_hole, timeout=10, max_attempts=5))
    store = dynamo
    if phase == "write":  # the read answers, the write meets the black hole
        class ReadsFine(DynamoResultStore):
            def read_states(self, job_ids, *, deadline=None):
                return {}

        store = ReadsFine("t", client=dynamo.client)
    budget_s = 2.5
    deadline = time.monotonic() + budget_s
    started = time.monotonic()
    outcomes = Runner(reg, store, safety_ms=1000, log=None).run(
        [delivery("add", 1, 2), delivery("add", 3, 4)], remaining_ms=lambda: int((deadline - time.monotonic()) * 1000))
    assert time.monotonic() - started < budget_s  # handed back before Lambda would kill it
    assert statuses(outcomes) == ["deferred", "deferred"]
    assert all(o.handed_back_because == STORE_OUTAGE for o in outcomes)  # the cause triggers act on
    assert all("result store unavailable" in o.reason for o in outcomes)


def test_a_run_that_ends_without_an_outcome_is_never_acknowledged(reg, store):
    """Whatever goes wrong inside kindling's own runner, no outcome stays blank (blank = acknowledged)."""

    class Broken(Runner):
        def run_job(self, o, deadline):  # a bug in the step every strategy runs sync jobs with
            return None  # runs nothing, settles nothing

    runner = Broken(reg, store, threads=2, log=None)
    outcomes = runner.run([delivery("add", 1, 2), delivery("add", 3, 4)])
    assert statuses(outcomes) == ["deferred", "deferred"]


def test_index_keys_are_never_empty_and_spread_over_shards(reg, store):
    bodies = [Delivery("m-bad", "{nope", 1)] + [delivery("add", i, i) for i in range(40)] + [delivery("boom")]
    outcomes = Runner(reg, store, log=None).run(bodies)
    rejected, *succeeded, failed = (store.records[o.record["id"]] for o in outcomes)
    assert "task_shard" not in rejected and rejected["status_shard"].startswith("rejected#")
    assert all("status_shard" not in r for r in succeeded)  # by_status is sparse
    assert {r["task_shard"] for r in succeeded} == {f"add#{n}" for n in range(4)}
    assert failed["status_shard"].startswith("failed#") and failed["task_shard"].startswith("boom#")


def test_a_newer_envelope_on_its_last_delivery_is_recorded_not_dropped(reg, store):
    body = codec.dumps({"version": 3, "id": "j2", "task": "add", "args": [1, 2], "kwargs": {},
                        "enqueued_at": 1_700_000_000_000})
    outcomes = Runner(reg, store, max_deliveries=5, log=None).run([Delivery("m-v3", body, 5)])
    assert statuses(outcomes) == ["rejected"]
    record = store.records["rejected#m-v3"]
    assert "needs a newer kindling" in record["error"]["message"] and record["job_id"] == "j2"


def test_a_revoked_job_is_skipped_by_the_read_the_batch_already_makes(reg, store):
    d = delivery("add", 1, 2)
    job_id = new_job_id_of(d)
    assert store.write([{"id": job_id, "status": "revoked", "attempts": 0}]) == {}
    outcomes = Runner(reg, store, log=None).run([d, delivery("add", 3, 4)])
    assert statuses(outcomes) == ["skipped", "succeeded"] and reg.runs == [("add", 3, 4)]
    assert (store.reads, store.writes) == (1, 2)  # the revoke's write, then the batch's one write


def test_a_finished_job_cannot_be_revoked_but_a_success_replaces_a_revoke(store):
    store.write([{"id": "done", "status": "succeeded", "attempts": 1}])
    assert store.write([{"id": "done", "status": "revoked", "attempts": 0}]) == {"done": "succeeded"}
    store.write([{"id": "late", "status": "revoked", "attempts": 0}])
    assert store.write([{"id": "late", "status": "failed", "attempts": 1}]) == {"late": "revoked"}
    assert store.write([{"id": "late", "status": "succeeded", "attempts": 1}]) == {}


class FakeClient:
    """kindling.drivers.aws.JsonClient's two entry points over a ``call`` of the test's own."""

    def start(self, operation, payload, deadline=None):
        client = self

        class Pending:
            def result(self):
                return client.call(operation, payload, deadline=deadline)

        return Pending()


def test_a_write_is_retried_through_an_outage_until_its_deadline_so_jobs_do_not_run_twice(reg, monkeypatch):
    """The store fails the write 6 times (more than the client's own retries), then recovers:
    the batch is recorded, not handed back to run again."""
    from kindling.drivers.aws import AwsError
    from kindling.stores.results import DynamoResultStore

    monkeypatch.setattr("kindling.stores.dynamo.time.sleep", lambda s: None)

    class Flaky(FakeClient):
        def __init__(self):
            self.failures = 6
            self.calls = []

        def call(self, operation, payload, deadline=None):
            self.calls.append(operation)
            if operation == "BatchGetItem":
                return {"Responses": {"t": []}}
            if self.failures:
                self.failures -= 1
                raise AwsError("ConnectionError", "reset by peer", 0, True)
            return {}

    client = Flaky()
    store = DynamoResultStore("t", client=client)
    outcomes = Runner(reg, store, log=None).run([delivery("add", 1, 2)])
    assert statuses(outcomes) == ["succeeded"] and reg.runs == [("add", 1, 2)]
    assert client.calls.count("BatchWriteItem") == 7


def test_a_read_in_an_outage_gives_up_at_once_nothing_has_run(reg):
    from kindling.drivers.aws import AwsError
    from kindling.stores.results import DynamoResultStore

    class Down(FakeClient):
        calls = 0

        def call(self, operation, payload, deadline=None):
            Down.calls += 1
            raise AwsError("ConnectionError", "refused", 0, True)

    outcomes = Runner(reg, DynamoResultStore("t", client=Down()), log=None).run([delivery("add", 1, 2)])
    assert statuses(outcomes) == ["deferred"] and Down.calls == 1 and reg.runs == []
