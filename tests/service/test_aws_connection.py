"""kindling.drivers.aws under deadlines: a request sent now and read later, black holes, slow drips.

Every server here is a raw socket on 127.0.0.1.
"""

import socket
import threading
import time

import pytest
from kindling.core import policy
from kindling.drivers import aws
from kindling.drivers.aws import container
from kindling.drivers.aws.connection import Connection
from kindling.drivers.aws.errors import DeadlineExceeded

OK = b'HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n{"ok":1}'


@pytest.fixture
def env(monkeypatch):
    for name in ("AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")  # botocore reads this one first
    return monkeypatch


@pytest.fixture
def black_hole():
    """A loopback port that accepts connections (the kernel's backlog) and never answers."""
    with socket.create_server(("127.0.0.1", 0), backlog=16) as sock:
        yield sock


def url_of(sock: socket.socket) -> str:
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


def nothing_connected(listener: socket.socket) -> bool:
    listener.setblocking(False)
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return True
    conn.close()
    return False


def read_request(conn: socket.socket) -> bytes:
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = conn.recv(65536)
        if not chunk:
            return buf
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body


class OneShotServer:
    """Accepts one connection and serves each request with ``respond(conn, request)``."""

    def __init__(self, respond):
        self.respond = respond
        self.requests: list[bytes] = []
        self.received = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = url_of(self.sock)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        conn, _ = self.sock.accept()
        with conn:
            while request := read_request(conn):
                self.requests.append(request)
                self.received.set()
                try:
                    self.respond(conn, request)
                except OSError:  # the client gave up and closed
                    return


def client(url, **kw):
    return aws.JsonClient("dynamodb", "DynamoDB_20120810", endpoint=url, **kw)


# ---------------------------------------------------------------- the connection itself


def test_send_now_read_later():
    replied = threading.Event()

    def respond(conn, request):
        replied.wait(5)
        conn.sendall(OK)

    srv = OneShotServer(respond)
    conn = Connection("http", "127.0.0.1", srv.sock.getsockname()[1], 5.0)
    conn.send("POST", "/", b"{}", {"Host": "h"})
    assert srv.received.wait(5)  # the request is on the server before anything is read
    assert srv.requests[0].startswith(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}")
    with pytest.raises(RuntimeError):  # one request at a time
        conn.send("POST", "/", b"{}", {})
    replied.set()
    assert conn.read_response(time.monotonic() + 5) == (200, {"content-length": "8"}, b'{"ok":1}')
    with pytest.raises(RuntimeError):  # nothing left to read
        conn.read_response()
    assert conn.sock is not None  # kept alive for the next request
    conn.close()


def test_connection_read_is_bounded_by_the_deadline(black_hole):
    conn = Connection("http", "127.0.0.1", black_hole.getsockname()[1], 10.0)
    conn.send("POST", "/", b"{}", {})
    began = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        conn.read_response(began + 0.2)
    assert 0.2 <= time.monotonic() - began < 2
    assert conn.sock is None  # half a reply: the connection is closed


def test_connection_timeout_still_applies_without_a_deadline(black_hole):
    conn = Connection("http", "127.0.0.1", black_hole.getsockname()[1], 0.2)
    conn.send("POST", "/", b"{}", {})
    with pytest.raises(TimeoutError) as info:
        conn.read_response()
    assert not isinstance(info.value, DeadlineExceeded)


def test_connection_refuses_to_send_past_the_deadline(black_hole):
    conn = Connection("http", "127.0.0.1", black_hole.getsockname()[1], 10.0)
    with pytest.raises(DeadlineExceeded):
        conn.send("POST", "/", b"{}", {}, time.monotonic() - 1)
    assert conn.sock is None and nothing_connected(black_hole)


# ------------------------------------------------------------------ calls with deadlines


def test_black_holed_endpoint_is_bounded_by_the_deadline(env, sleeps, black_hole):
    began = time.monotonic()
    with pytest.raises(aws.AwsError) as info:
        client(url_of(black_hole), timeout=10.0).call("GetItem", {}, deadline=began + 0.3)
    elapsed = time.monotonic() - began
    err = info.value
    assert (err.code, err.status, err.retryable, err.attempts) == ("DeadlineExceeded", 0, True, 1)
    assert 0.3 <= elapsed < 2 and sleeps == []


def test_slow_drip_reply_is_bounded_by_the_deadline(env, sleeps):
    reply = b'HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n{"a":"' + b"x" * 192 + b'"}'

    def respond(conn, request):
        for i in range(len(reply)):  # a byte every 50 ms: no single recv ever times out
            conn.sendall(reply[i : i + 1])
            time.sleep(0.05)

    srv = OneShotServer(respond)
    began = time.monotonic()
    with pytest.raises(aws.AwsError) as info:
        client(srv.url, timeout=1.0).call("GetItem", {}, deadline=began + 0.5)
    assert info.value.code == "DeadlineExceeded" and info.value.retryable
    assert time.monotonic() - began < 1.5 and sleeps == []


def test_a_passed_deadline_sends_nothing(env, sleeps, black_hole):
    with pytest.raises(aws.AwsError) as info:
        client(url_of(black_hole)).call("GetItem", {}, deadline=time.monotonic())
    assert (info.value.code, info.value.attempts) == ("DeadlineExceeded", 0)
    assert nothing_connected(black_hole)


def test_backoff_never_sleeps_past_the_deadline(env, sleeps, monkeypatch):
    busy = b'HTTP/1.1 503 Service Unavailable\r\nContent-Length: 31\r\n\r\n{"__type":"ServiceUnavailable"}'
    srv = OneShotServer(lambda conn, request: conn.sendall(busy))
    monkeypatch.setattr(policy, "compute_backoff", lambda attempt, base, cap: 1.0)
    with pytest.raises(aws.AwsError) as info:
        client(srv.url).call("GetItem", {}, deadline=time.monotonic() + 0.5)
    err = info.value
    assert (err.code, err.status, err.retryable, err.attempts) == ("DeadlineExceeded", 503, True, 1)
    assert "ServiceUnavailable" in err.message and sleeps == [] and len(srv.requests) == 1


def test_retries_within_the_deadline(env, sleeps, monkeypatch):
    replies = [b'HTTP/1.1 500 x\r\nContent-Length: 2\r\n\r\n{}', OK]
    srv = OneShotServer(lambda conn, request: conn.sendall(replies.pop(0)))
    monkeypatch.setattr(policy, "compute_backoff", lambda attempt, base, cap: 0.01)
    assert client(srv.url).call("GetItem", {}, deadline=time.monotonic() + 5) == {"ok": 1}
    assert sleeps == [0.01] and len(srv.requests) == 2


# ------------------------------------------------------------------- start now, read later


def test_start_overlaps_calls_on_two_clients(env):
    both_sent = threading.Event()

    def respond_after_the_other(conn, request):
        both_sent.wait(5)
        conn.sendall(OK)

    slow = OneShotServer(respond_after_the_other)
    fast = OneShotServer(lambda conn, request: conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n{"ok":2}'))
    pending = client(slow.url).start("PutItem", {"n": 1}, deadline=time.monotonic() + 5)
    assert slow.received.wait(5)  # sent by start(), before result() is asked for
    assert client(fast.url).call("SendMessage", {}) == {"ok": 2}
    both_sent.set()
    assert pending.result() == {"ok": 1}
    assert pending.result() == {"ok": 1}  # collected once, kept


def test_a_started_call_holds_its_client(env, black_hole):
    ddb = client(url_of(black_hole))
    pending = ddb.start("GetItem", {}, deadline=time.monotonic() + 5)
    with pytest.raises(RuntimeError):  # the same thread would wait for itself
        ddb.start("GetItem", {})
    errors = []

    def other_thread():
        try:
            ddb.call("GetItem", {}, deadline=time.monotonic() + 0.2)
        except aws.AwsError as exc:
            errors.append(exc)

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join(5)
    assert [(e.code, e.attempts) for e in errors] == [("DeadlineExceeded", 0)]
    pending.cancel()
    with pytest.raises(aws.AwsError) as info:
        pending.result()
    assert info.value.code == "Cancelled"
    assert ddb._conn is None  # the unread reply's connection is closed
    assert ddb._lock.acquire(blocking=False)  # and the client released
    ddb._lock.release()


def test_a_dropped_pending_call_releases_its_client(env, black_hole):
    ddb = client(url_of(black_hole))
    ddb.start("GetItem", {})
    assert ddb._lock.acquire(blocking=False) and ddb._conn is None
    ddb._lock.release()


def test_start_defers_failures_to_result(env, sleeps):
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pending = client(f"http://127.0.0.1:{port}", max_attempts=2).start("GetItem", {})
    with pytest.raises(aws.AwsError) as info:
        pending.result()
    assert (info.value.code, info.value.attempts) == ("ConnectionError", 2) and len(sleeps) == 1


def test_stale_connection_found_at_read_is_reopened(env, sleeps):
    """The server closes a kept-alive connection; the next reply's read finds it dead."""
    served = []

    def serve():
        with socket.create_server(("127.0.0.1", 0)) as listener:
            served.append(url_of(listener))
            for _ in range(2):
                conn, _ = listener.accept()
                with conn:
                    read_request(conn)
                    conn.sendall(OK)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    while not served:
        time.sleep(0.01)
    ddb = client(served[0], max_attempts=1)
    assert ddb.call("GetItem", {}) == {"ok": 1}
    time.sleep(0.1)  # the server has closed the first connection
    assert ddb.start("GetItem", {}, deadline=time.monotonic() + 5).result() == {"ok": 1}
    assert sleeps == []


def test_container_credentials_fetch_is_bounded_by_the_deadline(env, black_hole):
    env.delenv("AWS_ACCESS_KEY_ID")
    env.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", url_of(black_hole) + "/creds")
    container._container_cache.clear()
    began = time.monotonic()
    with pytest.raises(aws.AwsError) as info:
        client("http://127.0.0.1:9").call("GetItem", {}, deadline=began + 0.3)
    assert info.value.code == "DeadlineExceeded" and time.monotonic() - began < 1.5
