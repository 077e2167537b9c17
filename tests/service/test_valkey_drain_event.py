"""A drain event is untrusted: it may select a configured stream and carry that stream's
kick flag, nothing else.

Every producer role may invoke the worker, so whatever an event says reaches the drain.
The deployment's environment names the Valkey URL, the streams, the group and the
visibility; an event naming anything else is refused with one log line, before the drain
touches any key. Against real valkey-servers on loopback ports (tests/support/valkey.py).

Run: .venv/bin/python -m pytest tests/service/test_valkey_drain_event.py -q
"""

from __future__ import annotations

import time
import uuid

import pytest
from kindling.core.valkey.keys import dead_key, flag_key

pytestmark = pytest.mark.valkey


@pytest.fixture
def stream() -> str:
    return f"ev:{uuid.uuid4().hex[:8]}"


@pytest.fixture
def configured(own_valkey, stream, monkeypatch) -> str:
    """The deployment: this server, this stream (and a second one), the default group."""
    monkeypatch.setenv("KINDLING_VALKEY_URL", own_valkey.url)
    monkeypatch.setenv("KINDLING_VALKEY_STREAMS", f"{stream},{stream}-b")
    for name in ("KINDLING_VALKEY_GROUP", "KINDLING_DRAIN_VISIBILITY_MS", "KINDLING_VALKEY_URL_SECRET"):
        monkeypatch.delenv(name, raising=False)
    return own_valkey.url


class Ledger:
    def __init__(self):
        from kindling.core.registry import Registry
        from kindling.stores.results import MemoryResultStore

        self.runs: list[str] = []
        self.lines: list[dict] = []
        self.store = MemoryResultStore()
        self.registry = Registry()

        @self.registry.task(name="job")
        def job(key: str, ms: float = 0) -> str:
            self.runs.append(key)
            time.sleep(ms / 1000)
            return key

    def drain(self, event: dict, budget_ms: int = 3000, invoker=None) -> dict:
        from kindling.engine.runner import Runner
        from kindling.triggers.valkey.lambda_drain import drain

        runner = Runner(self.registry, self.store, safety_ms=100, cutoff_ms=50, log=self.lines.append)
        deadline = time.monotonic() + budget_ms / 1000
        return drain(runner, event, lambda: max(0, int((deadline - time.monotonic()) * 1000)),
                     invoker=invoker if invoker is not None else (lambda event: None))

    def refusals(self) -> list[dict]:
        return [line for line in self.lines if line.get("kindling") == "drain_refused"]


def _client(url: str):
    from kindling.shared.valkey.connection import connect

    return connect(url, socket_timeout=5)


def _enqueue(url: str, stream: str, n: int, ms: float = 0) -> list[str]:
    from kindling.valkey import StreamProducer

    producer = StreamProducer(url, stream=stream)
    return [s.id for s in producer.enqueue_many([("job", [str(i), ms], {}) for i in range(n)])]


def _assert_refused(ledger: Ledger, summary: dict) -> None:
    assert summary["kindling"] == "drain_refused", summary
    assert ledger.runs == []
    (line,) = ledger.refusals()
    assert line["level"] == "WARNING" and line["reason"]


def test_a_flag_naming_the_stream_key_is_refused_and_every_job_stays(configured, stream):
    _enqueue(configured, stream, 50)
    ledger = Ledger()

    summary = ledger.drain({"kindling": "drain", "stream": stream, "flag": stream})

    _assert_refused(ledger, summary)
    client = _client(configured)
    assert client.execute_command("TYPE", stream) in (b"stream", "stream")
    assert client.xlen(stream) == 50


@pytest.mark.parametrize("flag", ["{{{s}}}:scheduled", "{{{s}}}:dead", "{{{s}-b}}:kick", "{{{s}}}:kick:x",
                                  "{{{s}}}:kick:0", "{{{s}}}:kick:-1", "{{{s}}}:kick:100000", "{{other}}:kick",
                                  "{s}:kick"])
def test_a_flag_that_is_not_one_of_the_streams_kick_keys_is_refused(configured, stream, flag):
    _enqueue(configured, stream, 2)
    client = _client(configured)
    client.set(dead_key(stream), b"keep")
    ledger = Ledger()

    summary = ledger.drain({"kindling": "drain", "stream": stream, "flag": flag.format(s=stream)})

    _assert_refused(ledger, summary)
    assert client.xlen(stream) == 2
    assert client.get(dead_key(stream)) == b"keep"
    assert not client.exists(flag.format(s=stream)) or flag == "{{{s}}}:dead"


def test_an_event_cannot_point_the_drain_at_another_server_or_stream(configured, stream, start_valkey):
    other = start_valkey()
    _enqueue(other.url, "victim:jobs", 3)
    ledger = Ledger()

    summary = ledger.drain({"kindling": "drain", "url": other.url, "stream": "victim:jobs"})

    _assert_refused(ledger, summary)
    assert _client(other.url).xlen("victim:jobs") == 3
    assert _client(other.url).xinfo_groups("victim:jobs") == []
    assert not _client(configured).exists("victim:jobs")
    assert other.url not in str(ledger.refusals())  # a URL may carry a password: never logged


def test_a_url_alone_is_refused_even_for_a_configured_stream(configured, stream, start_valkey):
    other = start_valkey()
    _enqueue(other.url, stream, 3)
    ledger = Ledger()

    summary = ledger.drain({"kindling": "drain", "url": other.url, "stream": stream})

    _assert_refused(ledger, summary)
    assert _client(other.url).xlen(stream) == 3


def test_an_unknown_stream_is_refused(configured, stream):
    _enqueue(configured, "elsewhere:" + stream, 4)
    ledger = Ledger()

    summary = ledger.drain({"kindling": "drain", "stream": "elsewhere:" + stream})

    _assert_refused(ledger, summary)
    client = _client(configured)
    assert client.xlen("elsewhere:" + stream) == 4
    assert client.xinfo_groups("elsewhere:" + stream) == []


def test_an_event_cannot_shorten_the_visibility_of_a_running_job(configured, stream):
    _enqueue(configured, stream, 1)
    client = _client(configured)
    client.xgroup_create(stream, "kindling", id="0", mkstream=True)
    client.xreadgroup("kindling", "busy-drain", {stream: ">"}, count=1)  # a drain is running it
    time.sleep(0.02)
    ledger = Ledger()

    summary = ledger.drain({"kindling": "drain", "stream": stream, "visibility_ms": 1})

    _assert_refused(ledger, summary)
    (pending,) = client.xpending_range(stream, "kindling", "-", "+", 10)
    assert pending["consumer"] == b"busy-drain"


def test_an_event_cannot_choose_another_consumer_group(configured, stream):
    _enqueue(configured, stream, 3)
    client = _client(configured)
    client.xgroup_create(stream, "kindling", id="$")  # the deployment's group has read them all
    ledger = Ledger()

    summary = ledger.drain({"kindling": "drain", "stream": stream, "group": "fresh"})

    _assert_refused(ledger, summary)
    assert [g["name"] for g in client.xinfo_groups(stream)] == [b"kindling"]


@pytest.mark.parametrize("extra", [{"batch": 100_000}, {"horizon_ms": 900_000}, {"block_ms": 0},
                                   {"consumer": 7}, {"consumer": "x" * 300}, {"consumer": "a\nb"},
                                   {"stream": ["x"]}, {"flag": 1}, {"surprise": True}])
def test_any_other_key_or_shape_is_refused(configured, stream, extra):
    _enqueue(configured, stream, 1)
    ledger = Ledger()

    summary = ledger.drain(dict({"kindling": "drain", "stream": stream}, **extra))

    _assert_refused(ledger, summary)
    assert _client(configured).xlen(stream) == 1


def test_a_producers_kick_still_drains_and_gives_up_its_flag(configured, stream):
    from kindling.valkey import StreamProducer

    events: list[dict] = []
    producer = StreamProducer(configured, stream=stream, invoker=events.append, max_drains=2, backlog_per_drain=2)
    producer.enqueue_many([("job", [str(i)], {}) for i in range(4)])
    assert [e["flag"] for e in events] == [flag_key(stream), flag_key(stream, 1)]
    ledger = Ledger()

    summaries = [ledger.drain(event) for event in events]

    assert [s["kindling"] for s in summaries] == ["drained", "drained"]
    assert sorted(ledger.runs) == ["0", "1", "2", "3"]
    assert ledger.refusals() == []
    client = _client(configured)
    assert not client.exists(flag_key(stream)) and not client.exists(flag_key(stream, 1))


def test_the_schedule_drains_the_first_configured_stream_and_a_kick_selects_another(configured, stream):
    _enqueue(configured, stream, 1)
    _enqueue(configured, f"{stream}-b", 1)
    ledger = Ledger()

    first = ledger.drain({"kindling": "drain"})
    second = ledger.drain({"kindling": "drain", "stream": f"{stream}-b", "flag": flag_key(f"{stream}-b")})

    assert (first["stream"], second["stream"]) == (stream, f"{stream}-b")
    assert ledger.runs == ["0", "0"]


def test_a_drain_hands_on_with_an_event_the_next_drain_accepts(configured, stream, monkeypatch):
    monkeypatch.setenv("KINDLING_DRAIN_BATCH", "1")
    _enqueue(configured, stream, 30, ms=50)
    handed: list[dict] = []
    ledger = Ledger()

    summary = ledger.drain({"kindling": "drain", "stream": stream, "flag": flag_key(stream)}, budget_ms=600,
                           invoker=handed.append)

    assert summary["kicked"] is True
    (event,) = handed
    assert event["consumer"] == summary["consumer"] and event["flag"] == flag_key(stream)
    after = ledger.drain(event, budget_ms=20_000)
    assert after["kindling"] == "drained" and ledger.refusals() == []
    assert sorted(ledger.runs, key=int) == [str(i) for i in range(30)]


def test_the_group_and_visibility_come_from_the_environment(configured, stream, monkeypatch):
    monkeypatch.setenv("KINDLING_VALKEY_GROUP", "team")
    monkeypatch.setenv("KINDLING_DRAIN_VISIBILITY_MS", "60000")
    _enqueue(configured, stream, 1)
    client = _client(configured)
    client.xgroup_create(stream, "team", id="0", mkstream=True)
    client.xreadgroup("team", "busy-drain", {stream: ">"}, count=1)
    _enqueue(configured, stream, 1)
    ledger = Ledger()

    ledger.drain({"kindling": "drain", "stream": stream, "group": "team"})  # naming the configured group is fine

    assert ledger.runs == ["0"]  # the new one; the running one is not reclaimed within 60 s
    assert [g["name"] for g in client.xinfo_groups(stream)] == [b"team"]
