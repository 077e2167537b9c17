"""Every response body kindling.drivers.aws reads is read in linear time and never past a bound:
a payload pointer's size for an S3 GET (plus one byte), a sane default for everything else.

Servers are fakes: a scripted socket handed to the connection, or raw loopback servers.
"""

import contextlib
import hashlib
import threading
import tracemalloc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kindling.core.envelope import encode_job, new_job
from kindling.core.registry import Registry
from kindling.drivers import aws
from kindling.drivers.aws import connection as connection_module
from kindling.drivers.aws.connection import Connection
from kindling.drivers.aws.errors import ResponseTooLarge
from kindling.drivers.aws.s3 import S3Client
from kindling.engine.runner import Delivery, Runner
from kindling.shared.payloads import argument_key
from kindling.stores.results import MemoryResultStore

MiB = 1024 * 1024


@pytest.fixture
def env(monkeypatch):
    for name in ("AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_DYNAMODB",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")  # botocore reads this one first
    return monkeypatch


class ScriptedSocket:
    """A connected socket whose peer has written ``reply``, handed out at most ``piece`` bytes a
    read. Counts the bytes the connection pulled, its reads, and (under tracemalloc) the memory
    allocated between one read and the next: copying a growing buffer on every read shows up
    there as O(body²) bytes, whatever the buffer's type."""

    def __init__(self, reply: bytes, piece: int = 65536) -> None:
        self.reply, self.piece, self.pos = reply, piece, 0
        self.reads = 0
        self.allocated = 0
        self._mark: int | None = None

    def settimeout(self, timeout):
        pass

    def send(self, data):
        return len(data)

    def close(self):
        pass

    def account(self) -> None:
        if not tracemalloc.is_tracing():
            return
        current, peak = tracemalloc.get_traced_memory()
        if self._mark is not None:
            self.allocated += max(0, peak - self._mark)
        tracemalloc.reset_peak()
        self._mark = current

    def _take(self, n: int) -> bytes:
        self.account()
        self.reads += 1
        data = self.reply[self.pos : self.pos + min(n, self.piece)]
        self.pos += len(data)
        return data

    def recv(self, n):
        return self._take(n)

    def recv_into(self, buffer, nbytes=0):
        data = self._take(nbytes or len(buffer))
        buffer[: len(data)] = data
        return len(data)


def scripted(reply: bytes, piece: int = 65536) -> tuple[Connection, ScriptedSocket]:
    conn = Connection("http", "127.0.0.1", 9, 5.0)
    conn.sock = sock = ScriptedSocket(reply, piece)
    return conn, sock


def chunked(body: bytes, size: int) -> bytes:
    parts = [b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size]) for i in range(0, len(body), size)]
    return b"".join(parts) + b"0\r\n\r\n"


BODY = bytes(range(256)) * 1024  # 256 KiB
FRAMINGS = {
    "content-length": b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY,
    "one large chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(BODY, len(BODY)),
    "many small chunks": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(BODY, 100),
    "until close": b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + BODY,
}


# -- (a) linear time ---------------------------------------------------------------------------


@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_body_dripped_in_tiny_pieces_is_read_with_linear_work(framing):
    conn, sock = scripted(FRAMINGS[framing], piece=16)
    tracemalloc.start()
    try:
        status, _, data = conn.request("GET", "/", b"", {})
        sock.account()  # what the last read and the final assembly allocated
    finally:
        tracemalloc.stop()
    assert (status, data) == (200, BODY)
    # A few copies of the body, plus a constant per read (the pieces, views on the buffer);
    # appending each piece to an immutable buffer allocates ~len(BODY)**2 / 32 bytes (2 GiB).
    assert sock.allocated <= 4 * len(BODY) + 1024 * sock.reads, (sock.allocated, sock.reads)


def test_a_body_of_known_length_takes_one_receive_per_64_kib_the_peer_offers():
    conn, sock = scripted(FRAMINGS["content-length"])
    _, _, data = conn.request("GET", "/", b"", {})
    assert data == BODY and sock.reads <= len(BODY) // 65536 + 2  # one read per 64 KiB the peer offers


# -- (b) a pointer's size bounds the GET ---------------------------------------------------------


class ObjectStore(ThreadingHTTPServer):
    """S3's GET of one object, Range honoured as S3 does; counts the body bytes it sends."""

    daemon_threads = True

    def __init__(self, objects: dict[str, bytes]) -> None:
        super().__init__(("127.0.0.1", 0), ObjectHandler)
        self.objects = objects
        self.ranges: list[str | None] = []
        self.sent = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class ObjectHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        data = self.server.objects[self.path.split("/", 2)[2]]
        wanted = self.headers.get("Range")
        self.server.ranges.append(wanted)
        status, headers = 200, {}
        if wanted:
            first, _, last = wanted.removeprefix("bytes=").partition("-")
            first, last = int(first), min(int(last), len(data) - 1)
            if first >= len(data):
                return self._send(416, b"<Error><Code>InvalidRange</Code></Error>", {})
            status, headers = 206, {"Content-Range": f"bytes {first}-{last}/{len(data)}"}
            data = data[first : last + 1]
        self._send(status, data, headers)

    def _send(self, status, data, headers):
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        try:
            self.wfile.write(data)
            self.server.sent += len(data)
        except OSError:
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def start_object_store():
    """``start_object_store(objects)``: a loopback S3 of these objects, shut down after the test."""
    servers = []

    def start(objects):
        server = ObjectStore(objects)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


EIGHT_MIB = b"x" * (8 * MiB)


def test_a_get_bounded_to_100_bytes_asks_for_101_and_refuses_a_larger_object(env, start_object_store, sleeps):
    server = start_object_store({"args/big": EIGHT_MIB})
    with pytest.raises(aws.AwsError) as info:
        S3Client(endpoint=server.url).get_object("bkt", "args/big", max_bytes=100)
    assert server.ranges == ["bytes=0-100"] and server.sent <= 101
    assert (info.value.code, info.value.retryable) == ("ObjectTooLarge", False)
    assert "8,388,608 bytes" in info.value.message and "100" in info.value.message


def test_a_bounded_get_returns_an_object_within_the_bound_whole(env, start_object_store):
    server = start_object_store({"k": b"0123456789", "empty": b""})
    s3 = S3Client(endpoint=server.url)
    assert s3.get_object("bkt", "k", max_bytes=10) == b"0123456789"
    assert s3.get_object("bkt", "k", max_bytes=100) == b"0123456789"
    assert s3.get_object("bkt", "empty", max_bytes=0) == b""  # S3 answers 416 to a range of an empty object
    assert server.ranges == ["bytes=0-10", "bytes=0-100", "bytes=0-0"]


def test_a_server_ignoring_the_range_is_cut_off_at_the_bound(env):
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(EIGHT_MIB) + EIGHT_MIB
    for framing in (reply, b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + EIGHT_MIB,
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(EIGHT_MIB, 65536)):
        s3 = S3Client(endpoint="http://127.0.0.1:9")
        conn, sock = scripted(framing)
        s3._conns[("http", "127.0.0.1", 9)] = conn
        with pytest.raises(aws.AwsError) as info:
            s3.get_object("bkt", "k", max_bytes=100)
        assert info.value.code in ("ObjectTooLarge", "ResponseTooLarge") and not info.value.retryable
        assert sock.pos <= 2 * 65536, sock.pos  # what the head's read brought along, never the 8 MiB


def test_a_pointer_naming_100_bytes_to_an_8_mib_object_is_refused_having_read_101(env, start_object_store):
    reg = Registry()

    @reg.task(name="size")
    def size(blob):
        return len(blob)

    digest = hashlib.sha256(EIGHT_MIB[:100]).hexdigest()
    job = new_job("size", job_id="J", payload={"bucket": "bkt", "key": argument_key("J", digest), "size": 100,
                                               "sha256": digest})
    server = start_object_store({argument_key("J", digest): EIGHT_MIB})
    runner = Runner(reg, MemoryResultStore(), log=None, metrics=False, s3=S3Client(endpoint=server.url),
                    payload_bucket="bkt")
    (outcome,) = runner.run([Delivery(job.id, encode_job(job).decode(), 1)])
    assert outcome.status == "dead"  # no retry makes the object the pointer's
    error = outcome.record["error"]
    assert error["type"] == "PayloadUnavailable"
    assert f"s3://bkt/args/J/{digest}" in error["message"]
    assert "larger than the pointer says 100 bytes" in error["message"]
    assert server.ranges == ["bytes=0-100"] and server.sent <= 101


# -- (c) every other body has a bound --------------------------------------------------------------


@pytest.mark.parametrize("framing", ["content-length", "one large chunk", "many small chunks", "until close"])
def test_a_body_over_the_bound_is_a_clear_error_read_no_further(framing):
    conn, sock = scripted(FRAMINGS[framing], piece=4096)
    with pytest.raises(ResponseTooLarge) as info:
        conn.request("GET", "/", b"", {}, max_body=10_000)
    assert "10,000 bytes" in str(info.value)
    assert sock.pos <= 10_000 + 2 * 4096 + 200, sock.pos
    assert conn.sock is None  # the rest of the body is never read: the connection is dropped


def test_the_default_bound_applies_without_one(monkeypatch):
    monkeypatch.setattr(connection_module, "MAX_BODY_BYTES", 1000)
    conn, _ = scripted(FRAMINGS["content-length"])
    with pytest.raises(ResponseTooLarge):
        conn.request("GET", "/", b"", {})


def test_an_error_body_has_its_own_bound(monkeypatch):
    monkeypatch.setattr(connection_module, "MAX_ERROR_BODY_BYTES", 1000)
    conn, _ = scripted(b"HTTP/1.1 500 Oops\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
    with pytest.raises(ResponseTooLarge):
        conn.request("GET", "/", b"", {}, max_body=10 * MiB)
    conn, _ = scripted(b"HTTP/1.1 404 No\r\nContent-Length: 300\r\n\r\n" + b"e" * 300)
    assert conn.request("GET", "/", b"", {}, max_body=10)[0] == 404  # an error document past a small GET's bound


def _json_reply(size: int) -> bytes:
    body = b'{"pad":"' + b"p" * (size - 10) + b'"}'
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body


def test_a_json_reply_over_the_clients_bound_fails_the_call_once(env, sleeps):
    ddb = aws.JsonClient("dynamodb", "DynamoDB_20120810", endpoint="http://127.0.0.1:9", max_response_bytes=1000)
    conn, sock = scripted(_json_reply(5000))
    ddb._conn = conn
    with pytest.raises(aws.AwsError) as info:
        ddb.call("GetItem", {})
    assert (info.value.code, info.value.retryable, info.value.attempts) == ("ResponseTooLarge", False, 1)
    assert "1,000 bytes" in info.value.message and sleeps == []


def test_json_clients_are_bounded_by_default(env):
    assert aws.JsonClient("sqs", "AmazonSQS").max_response_bytes == connection_module.MAX_BODY_BYTES


def test_container_credentials_over_their_bound_are_refused_at_once(env, monkeypatch):
    from kindling.drivers.aws import container as credentials

    replies = []

    class Endpoint(ScriptedSocket):
        pass

    def fake_connection(*args):
        conn = Connection(*args)
        conn.sock = Endpoint(_json_reply(credentials.MAX_CREDENTIALS_BYTES + 1))
        replies.append(conn)
        return conn

    monkeypatch.setattr(credentials, "Connection", fake_connection)
    credentials._container_cache.clear()
    with pytest.raises(aws.AwsError) as info:
        credentials.container_credentials("http://127.0.0.1:9/creds")
    assert info.value.code == "CredentialsError" and "bytes" in info.value.message and len(replies) == 1


# -- memory and framing are bounded by the body's bound too -----------------------------------------


@pytest.mark.parametrize("framing", ["one-byte chunks", "one byte a read until close"])
def test_the_memory_a_body_holds_is_bounded_by_its_bytes_not_by_its_pieces(framing):
    body = b"z" * 65536
    if framing == "one-byte chunks":
        conn, sock = scripted(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(body, 1))
    else:
        conn, sock = scripted(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body, piece=1)
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        _, _, data = conn.request("GET", "/", b"", {})
        peak = tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()
    assert data == body
    # Kept as one buffer; a list of one-byte bytes objects holds ~40 bytes for each byte.
    assert peak <= 4 * len(body) + 65536, peak


def test_chunked_framing_is_bounded_by_the_body_bound():
    trailers = b"X-Pad: y\r\n" * 100_000  # 1 MB of trailers after a 5-byte body
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    conn, sock = scripted(head + b"5\r\nhello\r\n0\r\n" + trailers + b"\r\n")
    with pytest.raises(aws.HttpProtocolError, match="framing"):
        conn.request("GET", "/", b"", {}, max_body=10_000)
    assert sock.pos <= 10_000 + 65536 + 2 * 65536, sock.pos


def _serve_once(reply: bytes) -> tuple[str, threading.Thread]:
    import socket

    listener = socket.create_server(("127.0.0.1", 0))

    def serve():
        with listener:
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                with contextlib.suppress(OSError):  # the client stops reading at its bound
                    conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}", thread


@pytest.mark.parametrize("ref", ["my-secret", "ssm:/my/parameter"])
def test_a_secret_reply_is_bounded_far_below_the_default(env, sleeps, ref):
    from kindling.drivers import secrets

    url, thread = _serve_once(_json_reply(2 * MiB))  # secrets are <= 64 KiB, parameters <= 8 KiB
    env.setenv("AWS_ENDPOINT_URL", url)
    with pytest.raises(secrets.SecretUnavailable, match="ResponseTooLarge"):
        secrets.read(ref)
    thread.join(5)
