"""kindling.drivers.aws.connection over https: the SSL context verifies, honours SSL_CERT_FILE, and is built once.

The server is a TLS socket on 127.0.0.1 with a certificate from a throwaway CA (the
benchmark harness's infra/bench/tls.py makes both, and a bundle of the system CAs plus
that CA).
"""

import importlib.util
import socket
import ssl
import threading
from pathlib import Path

import pytest
from kindling.drivers.aws import connection

pytest.importorskip("cryptography")

_PATH = Path(__file__).resolve().parents[2] / "infra" / "bench" / "tls.py"
_spec = importlib.util.spec_from_file_location("bench_tls", _PATH)
bench_tls = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_tls)

OK = b'HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n{"ok":1}'


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    try:
        return bench_tls.make_pki(tmp_path_factory.mktemp("pki"))
    except FileNotFoundError as exc:  # no system CA bundle on this machine
        pytest.skip(str(exc))


@pytest.fixture
def fresh_context(monkeypatch):
    """No context left over from an earlier test: each test sees the first https connection."""
    monkeypatch.setattr(connection, "_ssl_context", None)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    return monkeypatch


@pytest.fixture
def tls_server(pki):
    """127.0.0.1:<port> answering each request with OK over TLS; yields (port, handshake errors)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki["cert"], pki["key"])
    errors: list[Exception] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                raw, _ = listener.accept()
            except OSError:
                return
            try:
                with ctx.wrap_socket(raw, server_side=True) as conn:
                    buf = b""
                    while b"\r\n\r\n" not in buf:
                        buf += conn.recv(65536)
                    conn.sendall(OK)
            except (OSError, ssl.SSLError) as exc:
                errors.append(exc)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield listener.getsockname()[1], errors
    listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept (close alone does not)
    listener.close()
    t.join(5)


def test_https_verifies_the_server_against_ssl_cert_file(pki, tls_server, fresh_context):
    port, _ = tls_server
    fresh_context.setenv("SSL_CERT_FILE", str(pki["bundle"]))
    conn = connection.Connection("https", "127.0.0.1", port, 5.0)
    status, _, body = conn.request("GET", "/", b"", {"Host": "127.0.0.1"})
    conn.close()
    assert (status, body) == (200, b'{"ok":1}')
    ctx = connection._ssl_context
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.check_hostname


def test_a_server_outside_the_trusted_cas_is_refused(pki, tls_server, fresh_context):
    port, errors = tls_server
    fresh_context.setenv("SSL_CERT_FILE", str(bench_tls.system_bundle()))  # without the test CA
    conn = connection.Connection("https", "127.0.0.1", port, 5.0)
    with pytest.raises(ssl.SSLCertVerificationError):
        conn.request("GET", "/", b"", {"Host": "127.0.0.1"})
    assert conn.sock is None


def test_the_context_and_its_ca_bundle_are_loaded_once_per_process(pki, tls_server, fresh_context):
    port, _ = tls_server
    fresh_context.setenv("SSL_CERT_FILE", str(pki["bundle"]))
    made = []
    real = ssl.create_default_context
    fresh_context.setattr(ssl, "create_default_context", lambda *a, **k: made.append(1) or real(*a, **k))
    for _ in range(3):
        conn = connection.Connection("https", "127.0.0.1", port, 5.0)
        assert conn.request("GET", "/", b"", {"Host": "127.0.0.1"})[0] == 200
        conn.close()
    assert made == [1]


def test_plain_http_never_builds_a_context(fresh_context):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def answer():
            c, _ = listener.accept()
            with c:
                c.recv(65536)
                c.sendall(OK)

        t = threading.Thread(target=answer, daemon=True)
        t.start()
        conn = connection.Connection("http", "127.0.0.1", port, 5.0)
        assert conn.request("GET", "/", b"", {"Host": "127.0.0.1"})[0] == 200
        conn.close()
        t.join(5)
    assert connection._ssl_context is None
