"""kindling's own Valkey client against real valkey-servers, and against valkey-py on them.

The servers (a plain one, a password and an ACL user, TLS with a throwaway CA, one restarted
under the client) are valkey-server processes of this module on free loopback ports
(start_valkey, tests/support/valkey.py). Connections cut mid-command go through a small proxy here.

Run: .venv/bin/pytest tests/service/test_resp_client.py -q -m valkey
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from kindling.drivers.valkey import errors
from kindling.drivers.valkey.client import Valkey
from support.valkey import ValkeyServer

pytestmark = pytest.mark.valkey

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "layers/kindling"


@pytest.fixture(scope="module")
def plain_url(start_valkey) -> str:
    return start_valkey().url


@pytest.fixture
def client(plain_url):
    c = Valkey.from_url(plain_url, socket_timeout=5)
    yield c
    c.close()


@pytest.fixture
def key() -> str:
    return f"resp:{uuid.uuid4().hex[:8]}"


# -- the same replies as valkey-py ------------------------------------------------------------------


def _script(c, s: str) -> list:
    """One run of the commands kindling uses, on keys under ``s``; every reply, in order."""
    out = []

    def record(fn, *args, **kwargs):
        try:
            out.append(fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - the error is part of the comparison
            out.append(("raised", type(exc).__name__, str(exc).replace(s, "S")))

    stream, group = f"{s}:stream", "g"
    record(c.xgroup_create, stream, group, id="0", mkstream=True)
    record(c.xgroup_create, stream, group, id="0", mkstream=True)  # BUSYGROUP
    record(c.xreadgroup, "nogroup", "c", {stream: ">"}, count=1)  # NOGROUP
    for i in range(1, 6):
        record(c.xadd, stream, {b"job": f"body-{i}".encode(), "n": i}, id=f"1-{i}")
    record(c.xlen, stream)
    record(c.xreadgroup, group, "c1", {stream: ">"}, count=3, block=10)
    record(c.xreadgroup, group, "c1", {stream: ">"}, count=3)
    record(c.xreadgroup, group, "c1", {stream: ">"}, count=3, block=5)  # nothing: []
    record(c.xpending, stream, group)
    record(lambda: [dict(r, time_since_delivered=0) for r in c.xpending_range(stream, group, "-", "+", 10)])
    record(c.xautoclaim, stream, group, "c2", 0, start_id="0-0", count=2)
    record(c.xautoclaim, stream, group, "c2", 0, start_id="0-0", count=2, justid=True)
    record(c.xclaim, stream, group, "c3", 0, ["1-1"])
    record(c.xclaim, stream, group, "c3", 0, ["1-2"], idle=60_000, justid=True)
    record(c.xack, stream, group, "1-1", "1-2")
    record(c.xdel, stream, "1-1", "1-2", "9-9")
    record(c.xrange, stream)
    record(c.xrange, stream, "1-3", "1-3")
    record(c.xrange, stream, count=1)
    record(lambda: [dict(r, idle=0, inactive=0) for r in c.xinfo_consumers(stream, group)])
    record(c.xpending, stream, group)
    pipe = c.pipeline(transaction=False)
    pipe.xlen(stream)
    pipe.xpending(stream, group)
    pipe.xadd(stream, {"a": "b"}, id="2-1")
    record(lambda: (len(pipe), pipe.execute()))
    pipe = c.pipeline(transaction=False)
    pipe.xlen(stream).xadd(stream, {"a": "b"}, id="1-1").xlen(stream)
    record(pipe.execute)  # an XADD with a smaller id fails: raised, annotated
    record(lambda: c.pipeline(transaction=False).execute())
    k = f"{s}:k"
    record(c.set, k, "v", px=60_000, nx=True)
    record(c.set, k, "w", px=60_000, nx=True)  # None
    record(c.set, k, b"x", ex=60)
    record(c.set, k, 7, get=True)
    record(c.get, k)
    record(c.get, f"{s}:missing")
    record(c.mget, [k, f"{s}:missing"])
    record(c.mget, [])
    record(c.rpush, f"{s}:l", 1, 2)
    record(c.blpop, [f"{s}:l"], timeout=1)
    record(c.blpop, [f"{s}:empty"], timeout=0.05)
    record(c.expire, f"{s}:l", 60)
    record(c.expire, f"{s}:missing", 60)
    record(c.exists, k, f"{s}:missing")
    record(c.zadd, f"{s}:z", {"a": 1, "b": 2.5})
    record(c.zrangebyscore, f"{s}:z", "-inf", "+inf", withscores=True)
    record(c.zrangebyscore, f"{s}:z", 2, 3)
    record(c.zscore, f"{s}:z", "b")
    record(c.zrem, f"{s}:z", "a")
    record(c.eval, "return {1, 'two', {3}, redis.status_reply('OK'), false}", 0)
    record(c.eval, "return redis.error_reply('MYERR bad')", 0)
    script = c.register_script("return {KEYS[1], ARGV[1]}")
    record(script, keys=[k], args=["x"])
    pipe = c.pipeline(transaction=False)
    script(keys=[k], args=["y"], client=pipe)
    pipe.get(k)
    record(pipe.execute)
    record(c.delete, k, f"{s}:z", f"{s}:missing")
    record(c.ping)
    pipe = c.pipeline()  # a transaction
    pipe.set(k, "t").get(k).delete(k)
    record(pipe.execute)
    return out


def test_every_reply_is_what_valkey_py_returns(plain_url, key):
    import valkey

    theirs = _script(valkey.Valkey.from_url(plain_url), key + "a")
    ours = _script(Valkey.from_url(plain_url), key + "b")
    names = {(key + "a").encode(): b"S", (key + "b").encode(): b"S"}

    def same(value):  # the stream names differ; nothing else may
        if isinstance(value, bytes):
            for name, s in names.items():
                value = value.replace(name, s)
            return value
        if isinstance(value, list | tuple):
            return type(value)(same(v) for v in value)
        if isinstance(value, dict):
            return {same(k): same(v) for k, v in value.items()}
        return value

    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert same(a) == same(b), f"reply {i}"


def test_a_big_pipeline_and_big_values(client, key):
    pipe = client.pipeline(transaction=False)
    bodies = [os.urandom(n) for n in (0, 1, 1000, 300_000)] * 3
    for body in bodies:
        pipe.xadd(key, {b"job": body})
    for _ in range(1000):
        pipe.xadd(key, {b"job": b"x"})
    assert len(pipe) == 1012
    ids = pipe.execute()
    assert len(ids) == 1012 and all(isinstance(i, bytes) for i in ids)
    got = [f[b"job"] for _, f in client.xrange(key, count=12)]
    assert got == bodies
    assert client.xlen(key) == 1012


# -- AUTH, ACL users, SELECT ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def auth_server(start_valkey):
    server = start_valkey("--requirepass", "s3cret:@/")
    admin = Valkey("127.0.0.1", port=server.port, password="s3cret:@/", socket_timeout=5)
    assert admin.execute_command("ACL", "SETUSER", "alice", "on", ">won der", "~*", "&*", "+@all") == b"OK"
    admin.execute_command("ACL", "SETUSER", "bob", "on", ">bob", "~bob:*", "+@all")
    return server


def test_auth_with_a_password_only(auth_server):
    c = Valkey.from_url(f"redis://:s3cret%3A%40%2F@127.0.0.1:{auth_server.port}/0", socket_timeout=5)
    assert c.ping() is True
    assert c.execute_command("ACL", "WHOAMI") == b"default"


def test_auth_with_an_acl_user(auth_server):
    c = Valkey.from_url(f"redis://alice:won%20der@127.0.0.1:{auth_server.port}", socket_timeout=5)
    assert c.execute_command("ACL", "WHOAMI") == b"alice"
    bob = Valkey.from_url(f"redis://bob:bob@127.0.0.1:{auth_server.port}", socket_timeout=5)
    assert bob.set("bob:k", 1) is True
    with pytest.raises(errors.NoPermissionError):
        bob.set("other", 1)


def test_a_wrong_password_or_none_is_an_authentication_error(auth_server):
    with pytest.raises(errors.AuthenticationError):
        Valkey.from_url(f"redis://alice:nope@127.0.0.1:{auth_server.port}", socket_timeout=5).ping()
    with pytest.raises(errors.AuthenticationError):  # NOAUTH
        Valkey("127.0.0.1", port=auth_server.port, socket_timeout=5).ping()


def test_select_keeps_databases_apart(plain_url, key):
    base = plain_url.rsplit("/", 1)[0]
    one, two = Valkey.from_url(f"{base}/1"), Valkey.from_url(f"{base}/2?socket_timeout=5")
    one.set(key, "in one")
    assert two.get(key) is None and one.get(key) == b"in one"
    assert Valkey.from_url(f"{base}/0?db=1").get(key) == b"in one"
    with pytest.raises(errors.ResponseError, match="DB index is out of range"):
        Valkey.from_url(f"{base}/99999").ping()


# -- TLS --------------------------------------------------------------------------------------------


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """A throwaway CA, a server certificate for 127.0.0.1 and one for another name."""
    if not shutil.which("openssl"):
        pytest.skip("no openssl CLI")
    d = tmp_path_factory.mktemp("pki")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    # Python 3.13 verifies strictly (VERIFY_X509_STRICT): the CA needs its key usage, the leaf its key ids.
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=kindling test CA",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    for name, san in (("server", "IP:127.0.0.1"), ("elsewhere", "DNS:elsewhere.invalid")):
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
        (d / f"{name}.ext").write_text(f"subjectAltName={san}\nsubjectKeyIdentifier=hash\n"
                                       "authorityKeyIdentifier=keyid,issuer\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d)
    return d


def _tls_server(start_valkey, pki: Path, name: str, *extra: str) -> ValkeyServer:
    return start_valkey("--tls-cert-file", str(pki / f"{name}.crt"), "--tls-key-file", str(pki / f"{name}.key"),
                        "--tls-ca-cert-file", str(pki / "ca.crt"), "--tls-auth-clients", "no", *extra, tls=True)


@pytest.fixture(scope="module")
def tls_server(start_valkey, pki):
    return _tls_server(start_valkey, pki, "server", "--requirepass", "tlspass")


def test_rediss_verifies_the_server_against_the_given_ca(tls_server, pki, key):
    url = f"rediss://:tlspass@127.0.0.1:{tls_server.port}/0?ssl_ca_certs={pki / 'ca.crt'}"
    c = Valkey.from_url(url, socket_timeout=5)
    assert c.ping() is True
    pipe = c.pipeline(transaction=False)
    for i in range(600):
        pipe.xadd(key, {"i": i})
    assert len(pipe.execute()) == 600 and c.xlen(key) == 600
    assert c.xrange(key, count=1)[0][1] == {b"i": b"0"}


def test_rediss_refuses_a_server_it_cannot_verify(tls_server, pki):
    with pytest.raises(errors.ConnectionError, match="certificate verify failed"):
        Valkey.from_url(f"rediss://:tlspass@127.0.0.1:{tls_server.port}", socket_timeout=5).ping()
    insecure = f"rediss://:tlspass@127.0.0.1:{tls_server.port}?ssl_cert_reqs=none"
    assert Valkey.from_url(insecure, socket_timeout=5).ping() is True


def test_rediss_checks_the_host_name_unless_told_not_to(start_valkey, pki):
    server = _tls_server(start_valkey, pki, "elsewhere")
    try:
        url = f"rediss://127.0.0.1:{server.port}?ssl_ca_certs={pki / 'ca.crt'}"
        with pytest.raises(errors.ConnectionError, match="IP address mismatch|hostname"):
            Valkey.from_url(url, socket_timeout=5).ping()
        assert Valkey.from_url(url + "&ssl_check_hostname=false", socket_timeout=5).ping() is True
    finally:
        server.stop()


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={"PYTHONPATH": str(LAYER), "PATH": os.environ["PATH"]})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_ssl_is_imported_for_rediss_only(plain_url, tls_server, pki):
    loaded = _python(
        "import sys; from kindling.drivers.valkey.client import Valkey\n"
        f"Valkey.from_url({plain_url!r}).xadd('resp:cold', {{'a': 1}})\n"
        "print(sorted(m for m in ('ssl', 'socket', 'asyncio', 'importlib.metadata', 're', 'hashlib', 'valkey')"
        " if m in sys.modules))\n"
        f"Valkey.from_url('rediss://:tlspass@127.0.0.1:{tls_server.port}?ssl_ca_certs={pki / 'ca.crt'}').ping()\n"
        "print('ssl' in sys.modules)")
    assert loaded.splitlines() == ["[]", "True"]


# -- timeouts and deadlines -------------------------------------------------------------------------


def test_a_server_that_never_answers_times_out():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        c = Valkey("127.0.0.1", port=listener.getsockname()[1], socket_timeout=0.3)
        started = time.monotonic()
        with pytest.raises(errors.TimeoutError):
            c.xadd("s", {"a": 1})
        assert 0.25 < time.monotonic() - started < 3


def test_a_connect_that_hangs_times_out():
    with socket.create_server(("127.0.0.1", 0), backlog=0) as listener:
        port = listener.getsockname()[1]
        filler = socket.create_connection(("127.0.0.1", port))  # the backlog is full: SYNs go unanswered
        try:
            c = Valkey("127.0.0.1", port=port, socket_connect_timeout=0.3, socket_timeout=10)
            started = time.monotonic()
            with pytest.raises(errors.TimeoutError):
                c.ping()
            assert time.monotonic() - started < 3
        finally:
            filler.close()


def test_a_deadline_ends_a_call_before_its_socket_timeout(client, key):
    started = time.monotonic()
    with pytest.raises(errors.DeadlineExceeded):
        client.execute_command("BLPOP", key, 5, deadline=time.monotonic() + 0.3)
    assert time.monotonic() - started < 2
    pipe = client.pipeline(transaction=False)
    pipe.blpop([key], timeout=5)
    with pytest.raises(errors.DeadlineExceeded):
        pipe.execute(deadline=time.monotonic() + 0.2)
    with pytest.raises(errors.DeadlineExceeded):  # passed already: nothing is sent
        client.execute_command("PING", deadline=time.monotonic() - 1)
    assert client.ping() is True


# -- dropped connections ---------------------------------------------------------------------------


def test_a_connection_the_server_closed_is_opened_again_before_a_write(client, key):
    assert client.ping()
    own_id = client.execute_command("CLIENT", "ID")
    killer = Valkey.from_url(f"redis://127.0.0.1:{client.port}")
    assert killer.execute_command("CLIENT", "KILL", "ID", own_id) == 1
    assert isinstance(client.xadd(key, {"a": 1}), bytes)  # not an error: nothing had been sent
    assert client.xlen(key) == 1 and client.execute_command("CLIENT", "ID") != own_id


def test_a_restarted_server_is_reconnected_to(start_valkey):
    server = start_valkey()
    try:
        c = Valkey("127.0.0.1", port=server.port, socket_timeout=5, socket_connect_timeout=2)
        script = c.register_script("return 42")
        assert script() == 42 and c.xadd("s", {"a": 1})
        server.stop()
        with pytest.raises(errors.ConnectionError):
            c.ping()
        server.start()
        assert c.xadd("s", {"a": 2}) and c.xlen("s") == 1  # no persistence: a new stream
        assert script() == 42  # NOSCRIPT on the new server: loaded again
    finally:
        server.stop()


class CuttingProxy:
    """Loopback TCP proxy to a server that can cut the client's connection at its next request:
    ``before`` it reaches the server, or ``after`` the server has answered it."""

    def __init__(self, port: int):
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cut: str | None = None
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._pump, args=(conn,), daemon=True).start()

    def _pump(self, client: socket.socket):
        server = socket.create_connection(("127.0.0.1", self.target))
        try:
            while True:
                ready, _, _ = select.select([client, server], [], [], 5)
                if client in ready:
                    data = client.recv(65536)
                    if not data:
                        return
                    mode, self.cut = self.cut, None
                    if mode is not None:
                        self.cuts += 1
                    if mode == "before":
                        return
                    server.sendall(data)
                    if mode == "after":
                        server.settimeout(5)
                        server.recv(65536)  # the server ran it and answered; the client never hears
                        return
                if server in ready:
                    data = server.recv(65536)
                    if not data:
                        return
                    client.sendall(data)
        except OSError:
            return
        finally:
            client.close()
            server.close()

    def close(self):
        self.listener.close()


@pytest.fixture
def proxy(plain_url):
    p = CuttingProxy(int(plain_url.rsplit(":", 1)[1].split("/")[0]))
    yield p
    p.close()


def test_a_read_is_sent_again_on_a_new_connection(proxy, key):
    c = Valkey("127.0.0.1", port=proxy.port, socket_timeout=5)
    c.set(key, "v")
    for mode in ("before", "after"):
        proxy.cut = mode
        assert c.get(key) == b"v"
        pipe = c.pipeline(transaction=False)
        proxy.cut = mode
        assert pipe.xlen(key + ":s").mget([key]).execute() == [0, [b"v"]]
    assert proxy.cuts == 4


def test_a_write_is_never_sent_twice(proxy, key):
    c = Valkey("127.0.0.1", port=proxy.port, socket_timeout=5)
    assert c.ping()
    proxy.cut = "after"  # the server ran it; the reply was lost
    with pytest.raises(errors.ConnectionError, match="may or may not have run"):
        c.xadd(key, {"a": 1})
    assert c.xlen(key) == 1
    proxy.cut = "before"  # it never reached the server: still not sent again by the client
    pipe = c.pipeline(transaction=False)
    pipe.xadd(key, {"a": 2}).xlen(key)
    with pytest.raises(errors.ConnectionError, match="may or may not have run"):
        pipe.execute()
    assert c.xlen(key) == 1
    proxy.cut = "after"
    with pytest.raises(errors.ConnectionError):
        c.blpop([key + ":l"], timeout=0.01)


def test_a_health_check_finds_a_dead_connection_before_a_write_is_sent(proxy, key):
    c = Valkey("127.0.0.1", port=proxy.port, socket_timeout=5, health_check_interval=0.05)
    assert c.ping()
    time.sleep(0.1)
    proxy.cut = "before"  # the PING of the health check is lost, not the XADD
    assert isinstance(c.xadd(key, {"a": 1}), bytes)
    assert proxy.cuts == 1 and c.xlen(key) == 1


# -- kindling's Valkey trigger on this client ---------------------------------------------------------


def test_the_stream_producer_worker_and_result_store_run_on_this_client(plain_url, key):
    from kindling.core.registry import Registry
    from kindling.stores.results import MemoryResultStore
    from kindling.valkey import StreamProducer, StreamWorker, ValkeyResultStore

    registry = Registry()

    @registry.task(name="double")
    def double(x: int) -> int:
        return 2 * x

    c = Valkey.from_url(plain_url, socket_timeout=10)
    producer = StreamProducer(plain_url, stream=key, client=c)
    sent = producer.enqueue_many([("double", [i], {}) for i in range(1200)])
    assert len(sent) == 1200 and c.xlen(key) == 1200
    store = MemoryResultStore()
    worker = StreamWorker(plain_url, registry=registry, store=store, stream=key, consumer="w1", batch=500,
                          block_ms=50, client=c, log=False)
    counts = worker.run(burst=True)
    assert counts == {"succeeded": 1200}
    assert {r["result"] for r in store.records.values()} == {str(2 * i) for i in range(1200)}
    assert c.xlen(key) == 0 and c.xpending(key, "kindling")["pending"] == 0

    results = ValkeyResultStore(plain_url, prefix=key, client=c)
    record = {"id": "job-1", "task": "double", "status": "succeeded", "attempts": 1, "result": "2"}
    assert results.write([record]) == {}
    failed = dict(record, status="failed", attempts=1)
    assert results.write([failed]) == {"job-1": "succeeded"}  # the script refuses to go back
    assert results.read_states(["job-1", "job-2"]) == {"job-1": ("succeeded", 1)}
    assert results.wait("job-1", timeout=1)["status"] == "succeeded"
    c.execute_command("SCRIPT", "FLUSH")  # the server forgets the script: the pipeline loads it again
    assert results.write([dict(record, id="job-3", status="dead")]) == {}


# -- cost: import and memory against valkey-py ----------------------------------------------------------


def _rss_probe(client: str, url: str) -> tuple[float, int]:
    """VmRSS (MiB) of a fresh ``python -S`` after importing the client, connecting and one XADD,
    and the number of modules it loaded."""
    if client == "kindling":
        path, code = str(LAYER), "from kindling.drivers.valkey.client import Valkey as V"
    else:
        import valkey

        path, code = str(Path(valkey.__file__).parents[1]), "from valkey import Valkey as V"
    out = subprocess.run(
        [sys.executable, "-S", "-c",
         f"import sys; {code}\nV.from_url({url!r}).xadd('resp:rss', {{'job': b'x' * 100}})\n"
         "rss = [l for l in open('/proc/self/status') if l.startswith('VmRSS')][0].split()[1]\n"
         "print(int(rss) / 1024, len(sys.modules))"],
        env={"PYTHONPATH": path, "PATH": os.environ["PATH"]}, capture_output=True, text=True, timeout=60, check=True)
    rss, modules = out.stdout.split()
    return float(rss), int(modules)


def test_this_client_costs_less_memory_and_fewer_modules_than_valkey_py(plain_url):
    ours = sorted(_rss_probe("kindling", plain_url) for _ in range(3))[1]
    theirs = sorted(_rss_probe("valkey", plain_url) for _ in range(3))[1]
    print(f"\nVmRSS after import + connect + XADD: kindling {ours[0]:.1f} MiB ({ours[1]} modules), "
          f"valkey-py {theirs[0]:.1f} MiB ({theirs[1]} modules)")
    assert ours[0] < theirs[0] and ours[1] < theirs[1] / 2
