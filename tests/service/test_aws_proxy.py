"""kindling's AWS client through a proxy, as boto3 goes through one: a small CONNECT proxy
on 127.0.0.1 between the client and loopback fakes of a service (https through a CONNECT
tunnel, http with the absolute URL), NO_PROXY going around it."""

from __future__ import annotations

import base64
import contextlib
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kindling.drivers import aws
from kindling.drivers.aws import connection

PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy", "AWS_ENDPOINT_URL",
             "AWS_ENDPOINT_URL_DYNAMODB")


class ConnectProxy:
    """An HTTP proxy on 127.0.0.1: CONNECT tunnels and absolute-URL requests, to loopback
    targets only (anything else gets 403). ``seen`` holds each request line it was sent;
    with ``credentials`` ("user:pass") it answers 407 to requests without them."""

    def __init__(self, credentials: str | None = None):
        self.seen: list[str] = []
        self.authorizations: list[str | None] = []
        self.credentials = credentials
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.threads: list[threading.Thread] = []
        self._start(self._accept)

    def _start(self, target, *args):
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self.threads.append(thread)

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self._start(self._serve, client)

    def _serve(self, client):
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(65536)
            if not chunk:
                client.close()
                return
            head += chunk
        text, _, rest = head.partition(b"\r\n\r\n")
        lines = text.decode("latin-1").split("\r\n")
        self.seen.append(lines[0])
        auth = next((line.split(":", 1)[1].strip() for line in lines[1:]
                     if line.lower().startswith("proxy-authorization:")), None)
        self.authorizations.append(auth)
        if self.credentials and auth != "Basic " + base64.b64encode(self.credentials.encode()).decode():
            client.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
            client.close()
            return
        method, target, _ = lines[0].split(" ")
        authority = target if method == "CONNECT" else target.split("://", 1)[1].split("/", 1)[0]
        host, _, port = authority.rpartition(":")
        if host != "127.0.0.1":  # this proxy reaches loopback only
            client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            client.close()
            return
        upstream = socket.create_connection(("127.0.0.1", int(port)))
        if method == "CONNECT":
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            upstream.sendall(head)  # forwarded as sent: the fake service reads the absolute URL
            rest = b""
        if rest:
            upstream.sendall(rest)
        self._start(self._pipe, upstream, client)
        self._pipe(client, upstream)

    @staticmethod
    def _pipe(source, sink):
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self):
        self.listener.close()


class Service:
    """A loopback fake of a JSON service (http or https) that answers {} and counts calls."""

    def __init__(self, context: ssl.SSLContext | None = None):
        service = self
        self.paths: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                service.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if context is not None:
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        scheme = "https" if context is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def env(monkeypatch):
    for name in PROXY_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")  # botocore reads this one first
    return monkeypatch


@pytest.fixture
def proxy():
    made = ConnectProxy()
    yield made
    made.close()


@pytest.fixture
def tls(tmp_path, monkeypatch):
    """A server context with a certificate for 127.0.0.1, and kindling's client trusting it."""
    pytest.importorskip("cryptography.x509")
    from support.tls import self_signed_cert

    cert, key = self_signed_cert(tmp_path)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    monkeypatch.setattr(connection, "_ssl_context", ssl.create_default_context(cafile=str(cert)))
    return server


def call(endpoint: str) -> dict:
    with aws.JsonClient("dynamodb", "DynamoDB_20120810", endpoint=endpoint, max_attempts=1) as client:
        return client.call("ListTables", {})


def test_https_goes_through_a_connect_tunnel(env, proxy, tls):
    service = Service(tls)
    try:
        env.setenv("HTTPS_PROXY", proxy.url)
        assert call(service.url) == {} and call(service.url) == {}
        port = service.url.rsplit(":", 1)[1]
        assert proxy.seen == [f"CONNECT 127.0.0.1:{port} HTTP/1.1"] * 2  # one tunnel per connection
        assert service.paths == ["/", "/"]  # TLS end to end: the proxy saw no request inside
    finally:
        service.close()


def test_http_goes_to_the_proxy_with_the_absolute_url(env, proxy):
    service = Service()
    try:
        env.setenv("HTTP_PROXY", proxy.url)
        assert call(service.url) == {}
        assert proxy.seen == [f"POST {service.url}/ HTTP/1.1"]
        assert service.paths == [f"{service.url}/"]
    finally:
        service.close()


def test_https_proxy_is_not_used_for_http_nor_http_proxy_for_https(env, proxy, tls):
    plain, secure = Service(), Service(tls)
    try:
        env.setenv("HTTPS_PROXY", proxy.url)
        assert call(plain.url) == {}
        assert proxy.seen == []
        env.delenv("HTTPS_PROXY")
        env.setenv("HTTP_PROXY", proxy.url)
        assert call(secure.url) == {}
        assert proxy.seen == []
    finally:
        plain.close()
        secure.close()


@pytest.mark.parametrize("no_proxy", ["127.0.0.1", "localhost,127.0.0.1", "*", ".0.0.1"])
def test_no_proxy_goes_around_it(env, proxy, tls, no_proxy):
    service = Service(tls)
    try:
        env.setenv("HTTPS_PROXY", proxy.url)
        env.setenv("NO_PROXY", no_proxy)
        assert call(service.url) == {}
        assert proxy.seen == [] and service.paths == ["/"]
    finally:
        service.close()


def test_proxy_credentials_from_the_url(env, tls):
    guarded = ConnectProxy(credentials="kin dling:p@ss")
    service = Service(tls)
    try:
        env.setenv("HTTPS_PROXY", guarded.url)
        with pytest.raises(aws.AwsError, match="refused CONNECT .*HTTP 407") as info:
            call(service.url)
        assert info.value.code == "ConnectionError"
        env.setenv("HTTPS_PROXY", guarded.url.replace("http://", "http://kin%20dling:p%40ss@"))
        assert call(service.url) == {}
        assert guarded.authorizations == [None, "Basic " + base64.b64encode(b"kin dling:p@ss").decode()]
    finally:
        guarded.close()
        service.close()


def test_a_proxy_that_refuses_the_target_is_a_connection_error(env, proxy, tls):
    env.setenv("HTTPS_PROXY", proxy.url)
    client = aws.JsonClient("dynamodb", "DynamoDB_20120810", endpoint="https://localhost:1", max_attempts=1)
    with client, pytest.raises(aws.AwsError, match="HTTP 403") as info:
        client.call("ListTables", {})
    assert info.value.code == "ConnectionError" and proxy.seen == ["CONNECT localhost:1 HTTP/1.1"]
