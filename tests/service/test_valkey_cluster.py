"""kindling on a Valkey Cluster (3 primaries, 3 replicas on loopback: tests/support/valkey.py):
keys of one stream in one slot, MOVED and ASK followed, a pipeline per node, the producer, the
stream worker, the Lambda drain, the Valkey result store and a chord, and a primary killed."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
from kindling.core.valkey.keys import beside, dead_key, done_key, flag_key, result_key, revive_key, scheduled_key
from support import ROOT
from support.valkey import ValkeyCluster

pytestmark = pytest.mark.valkey


@pytest.fixture(scope="module")
def cluster():
    with ValkeyCluster() as c:
        yield c


def _client(url: str, **options):
    from kindling.shared.valkey.connection import connect

    return connect(url, **options)


def _streams_on_every_primary(cluster) -> list[str]:
    """A stream name per primary: several streams spread over the cluster's nodes."""
    owners: dict[int, str] = {}
    run = uuid.uuid4().hex[:6]
    for i in range(200):
        name = f"vc:{run}:{i}"
        owners.setdefault(cluster.owner_port(name), name)
        if len(owners) == len(cluster.primary_ports()):
            return list(owners.values())
    raise AssertionError("no stream name landed on some primary")


# -- key names: one slot per stream --------------------------------------------------------------


@pytest.mark.parametrize("stream", ["kindling:jobs", "orders", "{orders}:jobs", "a:{b}:c", "jobs{}"])
def test_every_key_of_a_stream_shares_its_slot(stream):
    from kindling.drivers.valkey.cluster import key_slot

    if stream == "jobs{}":  # braces that make no tag cannot be given a key beside them
        with pytest.raises(ValueError, match="no hash tag"):
            scheduled_key(stream)
        return
    slots = {key_slot(k) for k in (stream, scheduled_key(stream), dead_key(stream), flag_key(stream),
                                   flag_key(stream, 3))}
    assert slots == {key_slot(stream)}


def test_a_records_done_list_and_ledger_share_its_slot_and_the_record_keeps_its_name():
    from kindling.drivers.valkey.cluster import key_slot

    assert result_key("kindling", "j1") == "kindling:result:j1"
    assert done_key("kindling", "j1") == "{kindling:result:j1}:done"
    assert {key_slot(result_key("p", "chord#c")), key_slot(done_key("p", "chord#c")),
            key_slot(revive_key("p", "chord#c"))} == {key_slot("p:result:chord#c")}
    assert beside("{t}x", ":y") == "{t}x:y"


def test_slots_are_the_clusters():
    """CRC16/XMODEM mod 16384, as the Valkey Cluster specification's examples."""
    from kindling.drivers.valkey.cluster import key_slot

    assert key_slot("123456789") == 0x31C3 % 16384
    assert key_slot("foo") == 12182
    assert key_slot("{user1000}.following") == key_slot("{user1000}.followers") == key_slot("user1000")


def test_a_single_node_never_loads_the_cluster_code(valkey_url):
    code = ("import sys; from kindling.shared.valkey.connection import connect; c = connect(sys.argv[1]); "
            "c.xadd('s', {'job': '{}'}); c.pipeline(transaction=False).get('a').mget(['a', 'b']).execute(); "
            "print('kindling.drivers.valkey.cluster' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, valkey_url], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "layers/kindling")})
    assert out.stdout.strip() == "False"


# -- the client: MOVED, ASK, a pipeline per node -------------------------------------------------


def test_a_plain_url_of_one_node_follows_moved_to_every_node(cluster):
    client = _client(cluster.url)
    keys = [f"m:{i}" for i in range(60)]
    for k in keys:
        client.set(k, k)  # most belong to another node: MOVED, then the map
    assert client.router is not None and client.router.refreshes >= 1
    assert client.mget(keys) == [k.encode() for k in keys]  # split per slot, joined in order
    pipe = client.pipeline(transaction=False)
    for k in keys:
        pipe.get(k)
    assert pipe.execute() == [k.encode() for k in keys]
    assert len(client.router.nodes) >= len(cluster.primary_ports())  # one pipeline went to each node
    assert client.delete(*keys) == len(keys)


def test_a_pipeline_sent_to_one_node_keeps_what_it_ran_and_resends_what_was_moved(cluster):
    """The first pipeline of a plain client: the commands the node ran are not sent twice."""
    client = _client(cluster.url)
    home = [k for k in (f"p:{i}" for i in range(200)) if cluster.owner_port(k) == cluster.servers[0].port][:3]
    away = [k for k in (f"q:{i}" for i in range(200)) if cluster.owner_port(k) != cluster.servers[0].port][:3]
    pipe = client.pipeline(transaction=False)
    for k in home + away:
        pipe.incr(k)
    assert pipe.execute() == [1] * 6
    assert client.mget(home + away) == [b"1"] * 6


def test_an_ask_during_a_slot_migration_is_followed_once(cluster):
    from kindling.drivers.valkey.cluster import key_slot

    client = _client(cluster.url, cluster=True)
    key = f"ask:{uuid.uuid4().hex[:6]}"
    slot = key_slot(key)
    source = cluster.owner_port(key)
    target = next(p for p in cluster.primary_ports() if p != source)
    ids = {p: cluster._info(p, "CLUSTER", "MYID").strip() for p in (source, target)}
    cluster._info(target, "CLUSTER", "SETSLOT", str(slot), "IMPORTING", ids[source])
    cluster._info(source, "CLUSTER", "SETSLOT", str(slot), "MIGRATING", ids[target])
    try:
        assert client.set(key, b"moved in") is True  # not on the source: ASK, then ASKING + SET on the target
        assert client.get(key) == b"moved in"
        assert cluster._info(source, "EXISTS", key).startswith("ASK ")  # not there: the source sends us on
        assert client.delete(key) == 1
    finally:
        for port in (source, target):
            cluster._info(port, "CLUSTER", "SETSLOT", str(slot), "STABLE")


# -- producer, worker, drain, result store, chord ------------------------------------------------


class Jobs:
    def __init__(self, url: str):
        from kindling.core.registry import Registry
        from kindling.valkey import ValkeyResultStore

        self.url = url
        self.store = ValkeyResultStore(url, ttl_s=600, prefix=f"vc-{uuid.uuid4().hex[:6]}")
        self.registry = Registry()
        self.registry.task(name="add")(lambda a, b=0: a + b)
        self.registry.task(name="total")(lambda parts, extra=0: sum(parts) + extra)

    def worker(self, stream: str, **options):
        from kindling.valkey import StreamWorker

        return StreamWorker(self.url, store=self.store, registry=self.registry, stream=stream, block_ms=100,
                            log=False, **options)


def test_producer_worker_and_drain_run_streams_spread_over_the_nodes(cluster, monkeypatch):
    from kindling.triggers.valkey.lambda_drain import drain
    from kindling.valkey import StreamProducer

    jobs = Jobs(cluster.url)
    streams = _streams_on_every_primary(cluster)
    assert len({cluster.owner_port(s) for s in streams}) == 3
    sent = {}
    for s in streams:
        producer = StreamProducer(cluster.url, stream=s)
        sent[s] = [h.id for h in producer.enqueue_many([("add", (i, 1), {}) for i in range(40)])]
    for s in streams[:2]:
        assert jobs.worker(s).run(burst=True) == {"succeeded": 40}
    monkeypatch.setenv("KINDLING_VALKEY_URL", cluster.url)
    monkeypatch.setenv("KINDLING_VALKEY_STREAMS", streams[2])
    monkeypatch.setenv("KINDLING_VALKEY_BLOCK_MS", "100")
    runner = jobs.worker(streams[2]).runner
    summary = drain(runner, {"kindling": "drain", "stream": streams[2], "flag": flag_key(streams[2])},
                    lambda: 20_000, invoker=lambda event: None)
    assert summary["ended"] == "empty", summary
    states = jobs.store.read_states([i for ids in sent.values() for i in ids])
    assert len(states) == 120 and {s for s, _ in states.values()} == {"succeeded"}


def test_a_delayed_job_moves_onto_its_stream_on_the_cluster(cluster):
    """The scheduled set and the stream in one script: CROSSSLOT before keys were hash-tagged."""
    import time

    from kindling.valkey import StreamProducer

    jobs = Jobs(cluster.url)
    stream = _streams_on_every_primary(cluster)[0]
    from kindling.core.envelope import Call

    handle = StreamProducer(cluster.url, stream=stream).send(Call("add", (2, 3), {}, delay=0.2))
    worker = jobs.worker(stream)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not jobs.store.read_states([handle.id]):
        worker.run(burst=True)
    assert jobs.store.read_states([handle.id]) == {handle.id: ("succeeded", 1)}


def test_the_result_store_and_a_chord_on_the_cluster(cluster):
    import kindling.producer.dispatch as dispatch
    from kindling import group
    from kindling.valkey import StreamProducer

    jobs = Jobs(cluster.url)
    stream = _streams_on_every_primary(cluster)[1]
    producer = StreamProducer(cluster.url, stream=stream)
    add, total = jobs.registry.get("add"), jobs.registry.get("total")
    dispatch.set_producer(producer)
    try:
        chord = group([add.s(i, i) for i in range(8)]).then(total.s(extra=1)).delay()
    finally:
        dispatch.set_producer(None)
    chord.reader = jobs.store
    assert jobs.worker(stream).run(burst=True).get("succeeded") == 9
    assert chord.result(timeout=5) == sum(2 * i for i in range(8)) + 1
    assert chord.status() == "completed" and sorted(chord.record()["done"]) == [str(i) for i in range(8)]
    # the records are spread over the nodes: one MGET split by slot reads them all
    ids = [f"r{i}" for i in range(30)]
    jobs.store.write([{"id": i, "status": "succeeded", "attempts": 1} for i in ids])
    assert set(jobs.store.read_states(ids).values()) == {("succeeded", 1)}
    assert jobs.store.wait("r7", timeout=1)["status"] == "succeeded"


def test_the_migration_moves_a_streams_keys_from_their_old_names(valkey_url):
    from kindling.tools.valkey_migrate import main

    client = _client(valkey_url)
    stream = f"old:{uuid.uuid4().hex[:6]}"
    client.zadd(f"{stream}:scheduled", {b'{"id": "a"}': 1, b'{"id": "b"}': 2})
    client.xadd(f"{stream}:dead", {"job": b"{}", "job_id": b"d1"})
    client.xadd(dead_key(stream), {"job": b"{}", "job_id": b"d2"})  # one died under the new name already
    assert main([valkey_url, "--stream", stream]) == 0
    assert client.zcard(scheduled_key(stream)) == 2 and client.xlen(dead_key(stream)) == 2
    assert not client.exists(f"{stream}:scheduled", f"{stream}:dead")


def _replica_of(cluster, primary_port: int) -> int:
    """The port of a replica of the primary on ``primary_port`` (CLUSTER NODES)."""
    lines = [line.split() for line in cluster._info(primary_port, "CLUSTER", "NODES").splitlines() if line]
    primary_id = next(f[0] for f in lines if f[1].split("@")[0].endswith(f":{primary_port}"))
    return next(int(f[1].split("@")[0].rsplit(":", 1)[1]) for f in lines if "slave" in f[2] and f[3] == primary_id)


def test_a_write_no_replica_acknowledged_in_time_does_not_count(cluster, monkeypatch):
    """With ``wait_replicas=1`` a write counts once a replica has it: WAIT answering fewer
    replicas than asked (the replica stopped here) raises instead of passing for done, as
    an outcome unknown (the primary applied it), so that a worker keeps its entries pending
    rather than acknowledge jobs whose records a failover could lose."""
    import os
    import signal

    from kindling.drivers.valkey import errors

    monkeypatch.setattr("kindling.drivers.valkey.cluster.WAIT_MS", 200)
    client = _client(cluster.url + "?cluster=true&wait_replicas=1")
    key = f"acked:{uuid.uuid4().hex[:8]}"
    client.set(key, "1")  # the map read, the replica known, and WAIT answered 1
    replica = cluster.server(_replica_of(cluster, cluster.owner_port(key))).proc
    os.kill(replica.pid, signal.SIGSTOP)
    try:
        with pytest.raises(errors.ConnectionError, match="replica") as raised:
            client.set(key, "2")
        assert errors.outcome_unknown(raised.value)
    finally:
        os.kill(replica.pid, signal.SIGCONT)
    cluster.wait_ok()
    client.set(key, "3")  # the replica back: writes count again


def test_a_map_read_before_the_replicas_showed_is_read_again(cluster):
    """CLUSTER SLOTS lists a replica only seconds after it is attached. A client that read
    the map before then (no replica: nothing to wait for) reads it again, at most once a
    second, until the replicas it is to wait for show; a map with them is not read again."""
    client = _client(cluster.url + "?cluster=true&wait_replicas=1")
    key = f"reread:{uuid.uuid4().hex[:8]}"
    client.set(key, "1")
    router = client.router
    assert set(router.replicas.values()) == {1}
    read = router.refreshes
    client.set(key, "2")
    assert router.refreshes == read  # every primary shows its replica: the map stands
    router.replicas = dict.fromkeys(router.replicas, 0)  # as read before the replicas showed
    router.read_at = 0.0  # more than a second ago
    client.set(key, "3")
    assert router.refreshes == read + 1 and set(router.replicas.values()) == {1}
