"""Operating the Valkey trigger against a real valkey-server (tests/support/valkey.py): spans per job
on the stream worker, and the dead stream through ``kindling dlq peek|redrive --valkey``.

Run: .venv/bin/pytest tests/service/test_valkey_ops.py -q -m valkey
"""

from __future__ import annotations

import uuid

import pytest
from kindling.core.registry import Registry
from kindling.core.valkey.keys import dead_key
from kindling.shared.valkey.connection import connect
from kindling.stores.results import MemoryResultStore
from kindling.valkey import StreamProducer, StreamWorker

pytestmark = [pytest.mark.valkey, pytest.mark.stores("valkey")]

PRODUCER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"


@pytest.fixture
def stream() -> str:
    return f"ops:{uuid.uuid4().hex[:8]}"


def registry() -> Registry:
    reg = Registry()

    @reg.task(name="ok")
    def ok(x):
        return x

    @reg.task(name="doomed", max_attempts=1)
    def doomed(x):
        raise RuntimeError(f"doomed {x}")

    return reg


# -- spans ----------------------------------------------------------------------------------


def test_the_stream_worker_opens_a_span_per_job_with_the_producers_trace(valkey_url, stream, spans, monkeypatch):
    monkeypatch.setenv("_X_AMZN_TRACE_ID", PRODUCER)
    sent = StreamProducer(valkey_url, stream).enqueue_many([("ok", (1,), {}), ("doomed", (2,), {})])
    monkeypatch.delenv("_X_AMZN_TRACE_ID")
    fields = connect(valkey_url).xrange(stream)[0][1]
    assert fields[b"trace"] == PRODUCER.encode()
    worker = StreamWorker(valkey_url, registry=registry(), store=MemoryResultStore(), stream=stream, log=False,
                          heartbeat=False, otel=True)
    counts = worker.run(burst=True)
    assert counts == {"succeeded": 1, "dead": 1}
    got = {s.name: s for s in spans.get_finished_spans()}
    assert sorted(got) == ["doomed", "ok"]
    for sent_job in sent:
        span = got[sent_job.task]
        assert span.attributes["kindling.job.id"] == sent_job.id
        assert span.attributes["messaging.message.id"] == sent_job.entry
        assert span.attributes["kindling.xray_trace_id"] == "1-5759e988-bd862e3fe1be46a994272793"
        assert span.context.trace_id == 0x5759E988BD862E3FE1BE46A994272793
    assert got["ok"].attributes["kindling.job.status"] == "succeeded"
    assert got["doomed"].attributes["kindling.job.status"] == "dead"
    assert got["doomed"].events[0].attributes["exception.message"] == "doomed 2"
    # the dead stream keeps the trace, for a redrive
    (_, dead), = connect(valkey_url).xrange(dead_key(stream))
    assert dead[b"trace"] == PRODUCER.encode()


def test_without_a_trace_the_entry_has_only_its_job(valkey_url, stream, monkeypatch):
    monkeypatch.delenv("_X_AMZN_TRACE_ID", raising=False)
    StreamProducer(valkey_url, stream).enqueue("ok", 1)
    assert set(connect(valkey_url).xrange(stream)[0][1]) == {b"job"}


# -- the dead stream from the command line ---------------------------------------------------

_broken: set[str] = set()


def flaky_registry() -> Registry:
    """``mail`` fails for good while its argument is in ``_broken`` (one attempt), then works."""
    reg = Registry()

    @reg.task(name="mail", max_attempts=1)
    def mail(to):
        if to in _broken:
            raise RuntimeError(f"smtp refused {to}")
        return f"sent {to}"

    @reg.task(name="join")
    def join(results):
        return ", ".join(results)

    return reg


def kill_jobs(valkey_url: str, stream: str, store, *targets: str) -> list:
    """Send a ``mail`` job per target while it is broken; run them into the dead stream."""
    _broken.update(targets)
    sent = StreamProducer(valkey_url, stream).enqueue_many([("mail", (t,), {}) for t in targets])
    counts = StreamWorker(valkey_url, registry=flaky_registry(), store=store, stream=stream, log=False,
                          heartbeat=False).run(burst=True)
    assert counts == {"dead": len(targets)}
    _broken.clear()
    return sent


def drain(valkey_url: str, stream: str, store) -> dict:
    return StreamWorker(valkey_url, registry=flaky_registry(), store=store, stream=stream, log=False,
                        heartbeat=False).run(burst=True)


def cli(monkeypatch, capsys, valkey_url: str | None, *argv: str) -> tuple[int, str, str]:
    from kindling.tools.cli import main

    if valkey_url is None:
        monkeypatch.delenv("KINDLING_VALKEY_URL", raising=False)
    else:
        monkeypatch.setenv("KINDLING_VALKEY_URL", valkey_url)
    monkeypatch.delenv("KINDLING_RESULTS", raising=False)
    monkeypatch.delenv("KINDLING_TABLE", raising=False)
    monkeypatch.setenv("COLUMNS", "120")
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def prefix_env(store, monkeypatch):
    # the CLI reads records under the worker's prefix; tests keep theirs apart
    import kindling.tools.ops.dead_stream as dead_stream

    original = dead_stream.ValkeyRecords.__init__

    def init(self, valkey_url, *, prefix="kindling", client=None):
        original(self, valkey_url, prefix=store.prefix, client=client)

    monkeypatch.setattr(dead_stream.ValkeyRecords, "__init__", init)


def test_peek_shows_the_dead_entries_with_their_records(valkey_url, stream, store, prefix_env, monkeypatch, capsys):
    sent = kill_jobs(valkey_url, stream, store, "ada@example.com", "bob@example.com")
    code, out, _ = cli(monkeypatch, capsys, valkey_url, "dlq", "peek", "--valkey", "--stream", stream, "--results",
                       "valkey")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"dead stream {dead_key(stream)}: 2 entries; oldest dead ")
    assert lines[1].split() == ["DEAD", "AT", "(UTC)", "JOB", "ID", "TASK", "RECORD", "ATT", "REASON"]
    for line, job in zip(lines[2:], sent, strict=True):
        assert job.id in line and " mail " in line and " dead " in line
        assert line.index(job.id) == lines[1].index("JOB ID")  # aligned columns
    assert "RuntimeError: smtp refused ada@example.com" in lines[2] or "smtp refused ada@example.com" in lines[2]
    assert all(len(line) <= 120 for line in lines)

    code, out, _ = cli(monkeypatch, capsys, valkey_url, "dlq", "peek", "--valkey", "--stream", stream, "--results",
                       "valkey",
                       "--json", "--limit", "1")
    from kindling.core import codec

    report = codec.loads(out)
    assert report["length"] == 2 and len(report["entries"]) == 1
    (entry,) = report["entries"]
    assert (entry["job_id"], entry["task"], entry["status"], entry["attempts"]) == (sent[0].id, "mail", "dead", 1)
    assert entry["entry"] == sent[0].entry


def test_redrive_revives_dead_jobs_and_they_run_again(valkey_url, stream, store, prefix_env, monkeypatch, capsys):
    sent = kill_jobs(valkey_url, stream, store, "ada@example.com", "bob@example.com", "cy@example.com")
    code, out, _ = cli(monkeypatch, capsys, valkey_url, "dlq", "redrive", "--valkey", "--stream", stream, "--results",
                       "valkey")
    assert code == 0, out
    assert "3 entries in" in out and "moved 3 of 3" in out and "revived 3" in out
    client = connect(valkey_url)
    assert client.xlen(dead_key(stream)) == 0 and client.xlen(stream) == 3
    for job in sent:
        assert store.get(job.id)["status"] == "queued"
    assert drain(valkey_url, stream, store) == {"succeeded": 3}
    for job in sent:
        record = store.get(job.id)
        assert (record["status"], record["attempts"]) == ("succeeded", 1)

    code, out, _ = cli(monkeypatch, capsys, valkey_url, "jobs", "show", sent[0].id, "--valkey", "--results", "valkey")
    assert code == 0
    assert "succeeded (generation 2)" in out and "generation 1  dead after 1 attempt(s)" in out
    assert "smtp refused ada@example.com" in out


def test_valkey_is_a_flag_that_never_takes_the_job_id_after_it_for_a_url(valkey_url, stream, store, prefix_env,
                                                                         monkeypatch,
                                                                          capsys):
    import json

    job_id = kill_jobs(valkey_url, stream, store, "ada@example.com")[0].id
    code, out, err = cli(monkeypatch, capsys, valkey_url, "jobs", "show", "--valkey", job_id, "--results", "valkey")
    assert (code, err) == (0, "") and "smtp refused ada@example.com" in out
    code, out, _ = cli(monkeypatch, capsys, None, "jobs", "show", f"--valkey={valkey_url}", job_id, "--results",
                       "valkey", "--json")
    assert code == 0 and json.loads(out)["id"] == job_id


def test_without_revive_a_dead_job_goes_straight_back(valkey_url, stream, store, prefix_env, monkeypatch, capsys):
    (job,) = kill_jobs(valkey_url, stream, store, "ada@example.com")
    code, out, _ = cli(monkeypatch, capsys, valkey_url, "dlq", "redrive", "--valkey", "--stream", stream, "--no-revive")
    assert code == 0 and "moved 1 of 1" in out
    assert drain(valkey_url, stream, store) == {"dead": 1}  # "already dead; not run again"
    (_, fields), = connect(valkey_url).xrange(dead_key(stream))
    assert fields[b"error"] == b"already dead; not run again"


def test_redrive_keeps_the_trace_and_the_body_unchanged(valkey_url, stream, store, monkeypatch, capsys):
    monkeypatch.setenv("_X_AMZN_TRACE_ID", PRODUCER)
    kill_jobs(valkey_url, stream, store, "ada@example.com")
    monkeypatch.delenv("_X_AMZN_TRACE_ID")
    client = connect(valkey_url)
    (_, dead), = client.xrange(dead_key(stream))
    code, _, _ = cli(monkeypatch, capsys, valkey_url, "dlq", "redrive", "--valkey", "--stream", stream, "--no-revive")
    assert code == 0
    (_, fields), = client.xrange(stream)
    assert fields == {b"job": dead[b"job"], b"trace": PRODUCER.encode()}


def test_redrive_keeps_a_signed_jobs_signature(valkey_url, stream, monkeypatch, capsys):
    client = connect(valkey_url)
    client.xadd(dead_key(stream), {"job": b'{"id": "j1"}', "sig": b"v1:abc", "error": b"x", "job_id": b"j1"})
    code, _, _ = cli(monkeypatch, capsys, valkey_url, "dlq", "redrive", "--valkey", "--stream", stream, "--no-revive")
    assert code == 0
    (_, fields), = client.xrange(stream)
    assert fields == {b"job": b'{"id": "j1"}', b"sig": b"v1:abc"}


def test_an_entry_is_deleted_only_once_its_copy_was_added(valkey_url, stream, store, monkeypatch, capsys):
    kill_jobs(valkey_url, stream, store, "ada@example.com", "bob@example.com")
    client = connect(valkey_url)
    client.delete(stream)
    client.set(stream, "not a stream")  # every XADD to it fails
    code, out, _ = cli(monkeypatch, capsys, valkey_url, "dlq", "redrive", "--valkey", "--stream", stream, "--no-revive")
    assert code == 1
    assert "2 entries could not be added" in out and "WRONGTYPE" in out
    assert client.xlen(dead_key(stream)) == 2
    client.delete(stream)


def test_redrive_moves_only_what_was_dead_when_it_started_in_chunks(valkey_url, stream, store, monkeypatch):
    from kindling.tools.ops.dead_stream import DeadStream, redrive

    kill_jobs(valkey_url, stream, store, *(f"u{n}@example.com" for n in range(7)))
    lines = []
    dead = DeadStream(valkey_url, stream)
    client = connect(valkey_url)
    original = client.xdel

    def xdel_then_die_again(name, *ids):
        done = original(name, *ids)
        client.xadd(dead_key(stream), {"job": b"{}", "job_id": "late"})  # a job dying meanwhile
        return done

    dead.client.xdel = xdel_then_die_again
    report = redrive(dead, revive_dead=False, progress=lines.append, chunk=3)
    assert report == {"moved": 7, "revived": 0, "revive_refused": 0, "unverified": 0, "total": 7}
    assert lines[1:] == ["moved 3 of 7", "moved 6 of 7", "moved 7 of 7"]
    assert client.xlen(stream) == 7 and client.xlen(dead_key(stream)) == 3


def test_redrive_revives_records_in_the_results_table(valkey_url, stream, table, monkeypatch, capsys):
    from kindling.stores.results import DynamoResultStore

    dynamo = DynamoResultStore(table)
    (job,) = kill_jobs(valkey_url, stream, dynamo, "ada@example.com")
    code, out, _ = cli(monkeypatch, capsys, valkey_url, "dlq", "peek", "--valkey", "--stream", stream, "--table", table)
    assert code == 0 and job.id in out and " dead " in out
    code, out, _ = cli(monkeypatch, capsys, valkey_url, "dlq", "redrive", "--valkey", "--stream", stream, "--table",
                       table)
    assert code == 0 and "revived 1" in out
    assert dynamo.read_states([job.id])[job.id][0] == "queued"
    assert drain(valkey_url, stream, dynamo) == {"succeeded": 1}
    code, out, _ = cli(monkeypatch, capsys, None, "jobs", "show", job.id, "--table", table)
    assert "succeeded (generation 2)" in out


@pytest.mark.parametrize("argv,message,exit_code", [
    (["--valkey-url", "redis://:s3cret@127.0.0.1:1/0"], "the URL holds a password", 1),
    (["--valkey=redis://:s3cret@127.0.0.1:1/0"], "the URL holds a password", 1),
    (["--valkey"], "no URL: set KINDLING_VALKEY_URL", 2),  # a setting neither passed nor set: usage
])
def test_the_url_comes_as_the_worker_takes_it_never_a_password_on_argv(monkeypatch, capsys, argv, message,
                                                                       exit_code):
    code, out, err = cli(monkeypatch, capsys, None, "dlq", "peek", *argv)
    assert code == exit_code and message in err and "s3cret" not in out + err


def test_a_missing_url_file_is_said_clearly(monkeypatch, capsys):
    with pytest.raises(SystemExit, match="--valkey-url-file"):
        cli(monkeypatch, capsys, None, "dlq", "peek", "--valkey-url-file", "/nonexistent/kindling-url")


def test_a_url_file_is_read(valkey_url, stream, store, monkeypatch, capsys, tmp_path):
    kill_jobs(valkey_url, stream, store, "ada@example.com")
    path = tmp_path / "url"
    path.write_text(valkey_url + "\n")
    code, out, _ = cli(monkeypatch, capsys, None, "dlq", "peek", "--valkey-url-file", str(path), "--stream", stream)
    assert code == 0 and f"dead stream {dead_key(stream)}: 1 entries" in out
    assert " - " in out.splitlines()[2]  # no results named: the record column says nothing
    code, again, _ = cli(monkeypatch, capsys, None, "dlq", "peek", "--valkey-url", valkey_url, "--stream", stream)
    assert code == 0 and again.splitlines()[2:] == out.splitlines()[2:]  # a URL without a password may be given


def test_redrive_without_records_asks_for_them_or_no_revive(valkey_url, stream, monkeypatch, capsys):
    monkeypatch.delenv("KINDLING_TABLE", raising=False)
    code, _, err = cli(monkeypatch, capsys, valkey_url, "dlq", "redrive", "--valkey", "--stream", stream, "--table", "")
    assert code == 2 and "--no-revive" in err  # a setting neither passed nor set: usage


def test_a_signed_traced_job_dies_is_redriven_and_still_verifies(valkey_url, stream, store, prefix_env, monkeypatch,
                                                                 capsys):
    import base64
    import json

    from kindling.shared.signed import Keyring, Verifier

    value = json.dumps({"current": "k1", "keys": {"k1": base64.b64encode(b"v" * 32).decode()}})

    def keyring():
        return Keyring("arn:test", fetch=lambda ref, deadline: value)

    def worker():
        return StreamWorker(valkey_url, registry=flaky_registry(), store=store, stream=stream, log=False,
                            heartbeat=False,
                            verifier=Verifier(keyring()), metrics=False)

    monkeypatch.setenv("_X_AMZN_TRACE_ID", PRODUCER)
    _broken.add("ada@example.com")
    (job,) = StreamProducer(valkey_url, stream, signing=keyring()).enqueue_many([("mail", ("ada@example.com",), {})])
    monkeypatch.delenv("_X_AMZN_TRACE_ID")
    assert set(connect(valkey_url).xrange(stream)[0][1]) == {b"job", b"sig", b"trace"}
    assert worker().run(burst=True) == {"dead": 1}
    _broken.clear()
    code, out, _ = cli(monkeypatch, capsys, valkey_url, "dlq", "redrive", "--valkey", "--stream", stream, "--results",
                       "valkey")
    assert code == 0 and "revived 1" in out
    assert set(connect(valkey_url).xrange(stream)[0][1]) == {b"job", b"sig", b"trace"}
    assert worker().run(burst=True) == {"succeeded": 1}
    record = store.get(job.id)
    assert record["status"] == "succeeded" and record["trace_id"] == "1-5759e988-bd862e3fe1be46a994272793"


def test_redrive_reopens_the_chord_of_a_member_it_revives(valkey_url, stream, store, prefix_env, monkeypatch, capsys):
    """Results in Valkey: the chord a dead member failed completes once the member runs again."""
    from kindling.engine.followups import callback_id, chord_key
    from kindling.producer.client import Call

    chord = f"ch{uuid.uuid4().hex[:6]}"
    parent = {"id": chord, "size": 2, "then": {"task": "join", "args": [], "kwargs": {}}}
    _broken.add("bob@example.com")
    StreamProducer(valkey_url, stream).enqueue_many([
        Call("mail", [to], job_id=f"{chord}.{i}", parent=dict(parent, index=i))
        for i, to in enumerate(["ada@example.com", "bob@example.com"])])
    assert drain(valkey_url, stream, store) == {"succeeded": 1, "dead": 1}
    assert store.record(chord_key(chord))["status"] == "dead"
    _broken.clear()
    code, out, _ = cli(monkeypatch, capsys, valkey_url, "dlq", "redrive", "--valkey", "--stream", stream, "--results",
                       "valkey")
    assert code == 0 and "revived 1" in out
    record = store.record(chord_key(chord))
    assert record["status"] == "waiting" and "dead" not in record and "error" not in record
    assert drain(valkey_url, stream, store) == {"succeeded": 2}  # the member, then the callback
    assert store.record(chord_key(chord))["status"] == "completed"
    assert store.get(callback_id(chord))["result"] == '"sent ada@example.com, sent bob@example.com"'


def test_a_job_revoked_in_the_valkey_result_store_is_never_run(valkey_url, stream, store, prefix_env, monkeypatch,
                                                               capsys):
    (doomed,) = StreamProducer(valkey_url, stream).enqueue_many([("mail", ("ada@example.com",), {})])
    code, out, err = cli(monkeypatch, capsys, valkey_url, "jobs", "revoke", doomed.id, "--valkey", "--results",
                         "valkey")
    assert code == 0 and f"{doomed.id} revoked" in out, err
    assert store.get(doomed.id)["status"] == "revoked"
    counts = drain(valkey_url, stream, store)
    assert counts.get("succeeded") is None and store.get(doomed.id)["status"] == "revoked", counts
    assert connect(valkey_url).xlen(stream) == 0  # acknowledged, not left to come back

    (done,) = StreamProducer(valkey_url, stream).enqueue_many([("mail", ("bob@example.com",), {})])
    assert drain(valkey_url, stream, store) == {"succeeded": 1}
    code, _, err = cli(monkeypatch, capsys, valkey_url, "jobs", "revoke", done.id, "--valkey", "--results", "valkey")
    assert code == 1 and "already succeeded: not revoked" in err
    code, _, err = cli(monkeypatch, capsys, valkey_url, "jobs", "revoke", done.id, "--valkey")
    assert code == 1 and "add --results valkey" in err


def test_one_dead_job_is_retried_from_the_dead_stream_and_runs_again(valkey_url, stream, store, prefix_env, monkeypatch,
                                                                      capsys):
    ada, bob = kill_jobs(valkey_url, stream, store, "ada@example.com", "bob@example.com")
    code, out, err = cli(monkeypatch, capsys, valkey_url, "jobs", "retry", bob.id, "--valkey", "--stream", stream,
                         "--results", "valkey")
    assert code == 0, err
    assert f"job {bob.id} enqueued again on stream {stream} (revived as generation 2; entry " in out
    client = connect(valkey_url)
    assert client.xlen(stream) == 1 and client.xlen(dead_key(stream)) == 1  # ada's entry stays dead
    assert drain(valkey_url, stream, store) == {"succeeded": 1}
    assert (store.get(bob.id)["status"], store.get(bob.id)["generation"]) == ("succeeded", 2)
    assert store.get(ada.id)["status"] == "dead"

    code, _, err = cli(monkeypatch, capsys, valkey_url, "jobs", "retry", bob.id, "--valkey", "--stream", stream,
                       "--results", "valkey")
    assert code == 1 and "already succeeded" in err
    code, _, err = cli(monkeypatch, capsys, valkey_url, "jobs", "retry", "nobody", "--valkey", "--stream", stream,
                       "--results", "valkey")
    assert code == 1 and "not in" in err and "looked at 1 entries" in err


def test_a_dead_job_is_retried_from_the_dead_stream_with_its_record_in_the_results_table(valkey_url, stream, table,
                                                                                          monkeypatch, capsys):
    from kindling.stores.results import DynamoResultStore

    dynamo = DynamoResultStore(table)
    (job,) = kill_jobs(valkey_url, stream, dynamo, "ada@example.com")
    code, out, err = cli(monkeypatch, capsys, valkey_url, "jobs", "retry", job.id, "--valkey", "--stream", stream,
                         "--table", table, "--json")
    assert code == 0, err
    from kindling.core import codec

    done = codec.loads(out)
    assert (done["previous_status"], done["generation"], done["stream"]) == ("dead", 2, stream)
    assert drain(valkey_url, stream, dynamo) == {"succeeded": 1}
    code, _, err = cli(monkeypatch, capsys, valkey_url, "jobs", "retry", job.id, "--valkey", "--stream", stream)
    assert code == 2 and "--table / KINDLING_TABLE, or --results valkey" in err  # usage


def test_a_job_that_dies_while_retry_searches_the_dead_stream_is_revived(valkey_url, stream, store, monkeypatch):
    """The retry read no record, then the worker recorded ``dead`` and added the entry its
    search finds: the job must be revived, not added back beside its ``dead`` record."""
    from kindling.tools.ops import dead_stream

    _broken.add("ada@example.com")
    (job,) = StreamProducer(valkey_url, stream).enqueue_many([("mail", ("ada@example.com",), {})])
    search = dead_stream._entries

    def worker_finishes_first(*args, **kwargs):
        if store.get(job.id) is None:
            assert drain(valkey_url, stream, store) == {"dead": 1}
        return search(*args, **kwargs)

    monkeypatch.setattr(dead_stream, "_entries", worker_finishes_first)
    records = dead_stream.ValkeyRecords(valkey_url, prefix=store.prefix)
    done = dead_stream.retry(dead_stream.DeadStream(valkey_url, stream), records, job.id)
    assert (done["previous_status"], done["generation"]) == ("dead", 2)
    _broken.clear()
    assert drain(valkey_url, stream, store) == {"succeeded": 1}
