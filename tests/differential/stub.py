"""One loopback HTTP server that plays every credential endpoint the chains call: STS
(AssumeRole, AssumeRoleWithWebIdentity), the container endpoint and EC2 instance metadata.

Each answer says what the request carried (the role, the source identity, the web identity
token, the Authorization header, the IMDS session token), so two clients that asked
differently get different credentials and the comparison sees it."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


def _stamp(seconds_from_now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + seconds_from_now))


class _Handler(BaseHTTPRequestHandler):
    server: Stub

    def log_message(self, *args) -> None:  # quiet
        pass

    def _reply(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self) -> None:  # IMDSv2 session token
        self.server.requests.append(("PUT", self.path))
        if self.path == "/latest/api/token":
            return self._reply(200, b"imds-session", "text/plain")
        return self._reply(404, b"")

    def do_GET(self) -> None:
        self.server.requests.append(("GET", self.path))
        url = urlsplit(self.path)
        if url.path == "/latest/meta-data/iam/security-credentials/":
            return self._reply(200, b"instance-role", "text/plain")
        if url.path == "/latest/meta-data/iam/security-credentials/instance-role":
            token = self.headers.get("X-aws-ec2-metadata-token", "none")
            return self._reply(200, json.dumps({
                "Code": "Success", "AccessKeyId": "AKIDIMDS", "SecretAccessKey": "imds-secret",
                "Token": f"imds-session:{token}", "Expiration": _stamp(6 * 3600)}).encode())
        if url.path.startswith("/container/"):
            ttl = float(parse_qs(url.query).get("ttl", ["21600"])[0])
            return self._reply(200, json.dumps({
                "AccessKeyId": "AKIDCONTAINER", "SecretAccessKey": f"container:{url.path}",
                "Token": f"authorization:{self.headers.get('Authorization', 'none')}",
                "Expiration": _stamp(ttl)}).encode())
        return self._reply(404, b"")

    def do_POST(self) -> None:  # STS, query protocol
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        self.server.requests.append(("POST", self.path))
        form = {k: v[0] for k, v in parse_qs(body).items()}
        action, role = form.get("Action"), form.get("RoleArn", "")
        if action == "AssumeRole":
            auth = self.headers.get("Authorization", "")
            source = auth.partition("Credential=")[2].partition("/")[0]
            creds = ("AKIDROLE", f"role:{role}", f"source:{source}")
        elif action == "AssumeRoleWithWebIdentity":
            creds = ("AKIDWEBIDENTITY", f"role:{role}", f"jwt:{form.get('WebIdentityToken')}")
        else:
            return self._reply(400, b"<ErrorResponse><Error><Code>InvalidAction</Code></Error></ErrorResponse>",
                               "text/xml")
        xml = (f"<{action}Response xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><{action}Result>"
               f"<Credentials><AccessKeyId>{creds[0]}</AccessKeyId><SecretAccessKey>{creds[1]}</SecretAccessKey>"
               f"<SessionToken>{creds[2]}</SessionToken><Expiration>{_stamp(3600)}</Expiration></Credentials>"
               f"<AssumedRoleUser><AssumedRoleId>AROA:s</AssumedRoleId><Arn>{role}</Arn></AssumedRoleUser>"
               f"</{action}Result><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></{action}Response>")
        return self._reply(200, xml.encode(), "text/xml")


class Stub(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[str, str]] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


_running: Stub | None = None


def running() -> Stub:
    """The process's stub, started at the first call (a daemon thread: it ends with the process)."""
    global _running
    if _running is None:
        _running = Stub()
    return _running


@contextmanager
def relative_uri_host(url: str) -> Iterator[None]:
    """``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`` goes to the stub rather than 169.254.170.2,
    for botocore and kindling alike: the question is which path and token they send."""
    from botocore.utils import ContainerMetadataFetcher
    from kindling.drivers.aws import container

    saved = ContainerMetadataFetcher.IP_ADDRESS, container.RELATIVE_URI_BASE
    ContainerMetadataFetcher.IP_ADDRESS = url.partition("://")[2]
    container.RELATIVE_URI_BASE = url
    try:
        yield
    finally:
        ContainerMetadataFetcher.IP_ADDRESS, container.RELATIVE_URI_BASE = saved


_LOOPBACK = ("127.0.0.1", "::1", "localhost")


@contextmanager
def loopback_only() -> Iterator[list]:
    """Any connection to another address fails at once and is recorded in the list yielded
    (botocore's requests to AWS are stopped before they are sent; a slip shows there, even
    where a client turned the failure into an answer, and never reaches the network)."""
    real = socket.socket.connect
    attempts: list = []

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in _LOOPBACK:
            attempts.append(address)
            raise AssertionError(f"a differential case connected to {address!r}: only loopback stubs here")
        return real(self, address)

    socket.socket.connect = connect
    try:
        yield attempts
    finally:
        socket.socket.connect = real
