"""Tests for kindling.drivers.aws: SigV4 against botocore, config resolution, retries, moto round trip."""

import calendar
import datetime
import hashlib
import hmac
import json
import socket
import subprocess
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from unittest import mock
from urllib.parse import quote, urlsplit

import botocore.auth
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kindling.core import codec, policy
from kindling.drivers import aws
from kindling.drivers.aws import chain, container, temporary
from support import examples

AWS_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_SQS",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
)


@pytest.fixture
def env(monkeypatch):
    """A clean AWS environment with static test credentials and a region."""
    for name in AWS_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret/TEST+key")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")  # botocore reads this one first
    # without keys, the chain's next sources: none of this machine's own shared files
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/kindling-test/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/kindling-test/config")
    chain.reset()
    return monkeypatch


# ------------------------------------------------------------------ signing vs botocore


def botocore_sign(method, url, headers, body, *, service, region, ak, sk, token, when):
    request = AWSRequest(method=method, url=url, headers=headers, data=body)
    # botocore.auth does `from botocore.compat import get_current_datetime`; patch its copy.
    with mock.patch.object(botocore.auth, "get_current_datetime", return_value=when):
        SigV4Auth(Credentials(ak, sk, token), service, region).add_auth(request)
    return request


UNRESERVED = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~"
TOKEN_CHARS = UNRESERVED + "!#$%&'*+^`|"

hosts = st.one_of(
    st.from_regex(r"[a-zA-Z0-9]([a-zA-Z0-9-]{0,10}[a-zA-Z0-9])?(\.[a-zA-Z]{2,6}){0,3}", fullmatch=True),
    st.sampled_from(["127.0.0.1", "10.0.0.2", "[::1]", "[2001:DB8::1]", "LOCALHOST"]),
)
# Percent-encoded text (what a client puts on the wire), plus raw characters that are
# legal unencoded in a path segment, plus dot segments and empty segments (// runs).
encoded_text = st.builds(quote, st.text(max_size=8), safe=st.sampled_from(["", "/", "-_.~", "!$'()*+,;=:@"]))
path_segments = st.one_of(
    encoded_text,
    st.text(alphabet=UNRESERVED + "!$&'()*+,;=:@%", max_size=8),
    st.sampled_from(["", ".", "..", "%2F", "%2f", "%20", "%7E", "~"]),
)
paths = st.one_of(
    st.just(""),
    st.builds(
        lambda segs, slash: "/" + "/".join(segs) + ("/" if slash else ""),
        st.lists(path_segments, max_size=6),
        st.booleans(),
    ),
)
query_parts = st.one_of(
    st.builds(quote, st.text(max_size=6), safe=st.sampled_from(["-_.~", ""])),
    st.text(alphabet=UNRESERVED + "!$'()*+,;:@/?%=", max_size=6),
)
query_pairs = st.lists(
    st.one_of(
        st.builds(lambda k, v: f"{k}={v}", query_parts, query_parts),
        query_parts,  # a name without "="
        st.builds(lambda k: f"{k}=", query_parts),  # empty value
    ),
    max_size=6,
).map(lambda pairs: pairs + pairs[:1] if len(pairs) % 3 == 0 else pairs)  # repeated keys
queries = st.one_of(st.just(""), query_pairs.map(lambda pairs: "?" + "&".join(pairs)))

header_names = st.one_of(
    st.text(alphabet=TOKEN_CHARS, min_size=1, max_size=12),
    st.sampled_from(
        [
            "Content-Type",
            "X-Amz-Target",
            "user-agent",
            "X-Amzn-Trace-Id",
            "Connection",
            "Expect",
            "Keep-Alive",
            "Transfer-Encoding",
            "traceparent",
            "Host",
            "x-amz-content-sha256",
            "Authorization",
            "X-Amz-Date",
            "x-amz-security-token",
        ]
    ),
)
header_values = st.one_of(
    st.text(alphabet=st.sampled_from(list(UNRESERVED + ' \t,;="/:') + ["é", "\u00a0"]), max_size=20),
    st.builds(lambda v: f"  {v}   x\t\t y  ", st.text(alphabet=UNRESERVED, max_size=5)),
)
header_dicts = st.dictionaries(header_names, header_values, max_size=7).map(
    # Add a case variant of one name: both values are signed, joined with ",".
    lambda h: {**h, next(iter(h)).swapcase(): "variant  value"} if h else h
)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "post"]),
    scheme=st.sampled_from(["http", "https"]),
    host=hosts,
    port=st.one_of(st.none(), st.sampled_from([80, 443]), st.integers(1, 65535)),
    path=paths,
    query=queries,
    headers=header_dicts,
    body=st.binary(max_size=200),
    service=st.sampled_from(["dynamodb", "sqs", "execute-api", "s3-outposts"]),
    region=st.sampled_from(["us-east-1", "eu-west-1", "cn-north-1", "us-gov-west-1"]),
    access_key=st.text(alphabet=UNRESERVED, min_size=1, max_size=20),
    secret_key=st.text(alphabet=UNRESERVED + "/+=", min_size=1, max_size=40),
    token=st.one_of(st.none(), st.text(alphabet=UNRESERVED + "/+=", min_size=1, max_size=60)),
    when=st.datetimes(datetime.datetime(2000, 1, 1), datetime.datetime(2099, 12, 31)),
)
def test_sign_matches_botocore(
    method,
    scheme,
    host,
    port,
    path,
    query,
    headers,
    body,
    service,
    region,
    access_key,
    secret_key,
    token,
    when,
):
    url = f"{scheme}://{host}{'' if port is None else f':{port}'}{path}{query}"
    original = dict(headers)
    amz_date = when.strftime("%Y%m%dT%H%M%SZ")
    ours = aws.sign(
        method,
        url,
        headers,
        body,
        service=service,
        region=region,
        access_key=access_key,
        secret_key=secret_key,
        session_token=token,
        amz_date=amz_date,
    )
    theirs = botocore_sign(
        method,
        url,
        headers,
        body,
        service=service,
        region=region,
        ak=access_key,
        sk=secret_key,
        token=token,
        when=when,
    )
    assert theirs.headers["X-Amz-Date"] == amz_date  # the time patch took effect
    assert ours["Authorization"] == theirs.headers["Authorization"]
    assert ours["X-Amz-Date"] == amz_date
    if token:
        assert ours["X-Amz-Security-Token"] == token
    if not any(name.lower() == "host" for name in headers):
        assert ours["Host"] == botocore.auth._host_from_url(url)
    assert headers == original  # not mutated


def test_sign_known_answer_get_vanilla():
    """AWS SigV4 test suite, get-vanilla."""
    out = aws.sign(
        "GET",
        "https://example.amazonaws.com/",
        {},
        b"",
        service="service",
        region="us-east-1",
        access_key="AKIDEXAMPLE",
        secret_key="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        amz_date="20150830T123600Z",
    )
    assert out == {
        "X-Amz-Date": "20150830T123600Z",
        "Host": "example.amazonaws.com",
        "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/"
        "aws4_request, SignedHeaders=host;x-amz-date, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
    }


def test_sign_does_not_mutate_and_replaces_stale_auth():
    headers = {"Authorization": "old", "X-Amz-Security-Token": "old", "x-amz-date": "old"}
    out = aws.sign(
        "POST",
        "http://127.0.0.1:4566/",
        headers,
        b"{}",
        service="sqs",
        region="us-east-1",
        access_key="a",
        secret_key="b",
        session_token="tok",
        amz_date="20260101T000000Z",
    )
    assert headers == {"Authorization": "old", "X-Amz-Security-Token": "old", "x-amz-date": "old"}
    assert out["X-Amz-Security-Token"] == "tok"
    assert out["Host"] == "127.0.0.1:4566"
    assert "x-amz-date" not in out and out["X-Amz-Date"] == "20260101T000000Z"
    assert "SignedHeaders=host;x-amz-date;x-amz-security-token," in out["Authorization"]


# -------------------------------------------------------------- configuration from env


# ------------------------------------------------------- stdlib stand-ins on the cold path


@given(st.binary(max_size=200), st.text(max_size=200))
def test_hmac_matches_the_hmac_module(key, msg):
    assert aws.signing._hmac(key, msg) == hmac.new(key, msg.encode(), hashlib.sha256).digest()


@given(st.text(max_size=60), st.sampled_from(["/", "/~", "", "/~:@"]))
def test_quote_matches_urllib(text, safe):
    assert aws.url.quote(text, safe) == quote(text, safe=safe)


@given(
    st.sampled_from(["http", "https", "HTTPS"]),
    st.sampled_from(["", "user:pw@", "u@"]),
    hosts,
    st.one_of(st.none(), st.integers(0, 65535)),
    st.from_regex(r"(/[a-zA-Z0-9%._~-]{0,8}){0,3}", fullmatch=True),
    st.one_of(st.just(""), st.from_regex(r"\?[a-zA-Z0-9=&%]{0,12}", fullmatch=True)),
    st.one_of(st.just(""), st.just("#frag")),
)
def test_url_parts_match_urlsplit(scheme, userinfo, host, port, path, query, fragment):
    url = f"{scheme}://{userinfo}{host}{'' if port is None else f':{port}'}{path}{query}{fragment}"
    ours, theirs = aws.url.Url(url), urlsplit(url)
    assert (ours.scheme, ours.hostname, ours.port, ours.path, ours.query) == (
        theirs.scheme, theirs.hostname, theirs.port, theirs.path, theirs.query)


def test_url_with_a_bad_port_is_refused():
    for url in ("http://h:99999", "http://h:port", "http://[::1]:x/"):
        with pytest.raises(ValueError):
            aws.url.Url(url)


def test_region_resolution(env):
    """botocore's order: AWS_DEFAULT_REGION first; AWS_REGION (which botocore does not read)
    only where nothing else names a region."""
    assert aws.JsonClient("dynamodb", "DynamoDB_20120810").region == "eu-west-1"
    env.setenv("AWS_DEFAULT_REGION", "us-west-2")
    assert aws.JsonClient("dynamodb", "DynamoDB_20120810").region == "us-west-2"
    env.delenv("AWS_REGION")
    assert aws.JsonClient("dynamodb", "DynamoDB_20120810").region == "us-west-2"
    assert aws.JsonClient("sqs", "AmazonSQS", region="ap-south-1").region == "ap-south-1"
    env.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(aws.AwsError) as info:
        aws.JsonClient("dynamodb", "DynamoDB_20120810")
    assert info.value.code == "MissingRegion"
    assert "AWS_REGION" in str(info.value) and "AWS_DEFAULT_REGION" in str(info.value)


def test_endpoint_resolution(env):
    def endpoint(service="dynamodb", **kw):
        return aws.JsonClient(service, "X", **kw).endpoint

    assert endpoint() == "https://dynamodb.eu-west-1.amazonaws.com"
    assert endpoint("sqs") == "https://sqs.eu-west-1.amazonaws.com"
    assert endpoint(region="cn-north-1") == "https://dynamodb.cn-north-1.amazonaws.com.cn"
    env.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
    assert endpoint() == "http://127.0.0.1:4566"
    env.setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://localhost:8000/ddb")
    assert endpoint() == "http://localhost:8000/ddb"
    assert endpoint("sqs") == "http://127.0.0.1:4566"
    assert endpoint(endpoint="https://example.test") == "https://example.test"
    env.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    assert endpoint() == "https://dynamodb.eu-west-1.amazonaws.com"
    with pytest.raises(ValueError):
        endpoint(endpoint="ftp://example.test")


def test_missing_credentials_fail_clearly_without_network(env, sleeps):
    env.delenv("AWS_ACCESS_KEY_ID")
    client = aws.JsonClient("dynamodb", "DynamoDB_20120810", endpoint="http://192.0.2.1:9")
    with pytest.raises(aws.AwsError) as info:
        client.call("ListTables", {})
    err = info.value
    assert (err.code, err.status, err.retryable) == ("MissingCredentials", 0, False)
    assert "AWS_ACCESS_KEY_ID" in str(err) and "AWS_SECRET_ACCESS_KEY" in str(err)
    assert client._conn is None and sleeps == []


def test_cached_clients(env):
    ddb, queue = aws.dynamodb(), aws.sqs()
    assert aws.dynamodb() is ddb and aws.sqs() is queue
    assert (ddb.service, ddb.target_prefix) == ("dynamodb", "DynamoDB_20120810")
    assert (queue.service, queue.target_prefix) == ("sqs", "AmazonSQS")
    with mock.patch("os.getpid", return_value=-1):  # as in a forked child
        assert aws.dynamodb() is not ddb
    aws.client._clients.clear()


def test_a_cached_client_follows_the_endpoint_and_region_the_environment_names_now(env):
    """A process that points AWS_ENDPOINT_URL elsewhere (tests, a CLI talking to two clouds)
    gets a client for the new endpoint, not the one made for the old."""
    env.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
    first = aws.dynamodb()
    env.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:5000")
    moved = aws.dynamodb()
    assert (first.endpoint, moved.endpoint) == ("http://127.0.0.1:4566", "http://127.0.0.1:5000")
    env.setenv("AWS_DEFAULT_REGION", "us-west-2")
    assert aws.dynamodb().region == "us-west-2" and aws.dynamodb() is aws.dynamodb()
    env.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    env.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
    assert aws.dynamodb() is first  # back to the first: its connection is reused
    aws.client._clients.clear()


# ------------------------------------------------------------- scripted local server


class Reply:
    def __init__(self, status=200, body=b"{}", headers=None, close=False):
        self.status, self.body, self.headers, self.close = status, body, headers or {}, close


class ScriptedServer(ThreadingHTTPServer):
    """Serves queued Replies (the last one repeats), recording each request."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), ScriptedHandler)
        self.replies: list[Reply] = []
        self.requests: list[dict] = []
        self.closed = threading.Semaphore(0)

    def shutdown_request(self, request):
        super().shutdown_request(request)
        self.closed.release()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class ScriptedHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _serve(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        server = self.server
        server.requests.append(
            {
                "method": self.command,
                "path": self.path,
                "headers": dict(self.headers.items()),
                "body": body,
                "peer": self.client_address,
            }
        )
        reply = server.replies.pop(0) if len(server.replies) > 1 else server.replies[0]
        payload = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        # Close without a "Connection: close" header: a kept-alive connection gone stale.
        self.close_connection = reply.close

    do_GET = do_POST = _serve


@pytest.fixture
def scripted_server():
    srv = ScriptedServer()
    thread = threading.Thread(target=srv.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def client_for(server, **kw):
    return aws.JsonClient("dynamodb", "DynamoDB_20120810", endpoint=server.url, **kw)


def test_request_shape_and_signature_verify_with_botocore(env, scripted_server):
    env.setenv("AWS_SESSION_TOKEN", "session-token")
    scripted_server.replies = [Reply(body={"TableNames": ["t"]})]
    client = aws.JsonClient(
        "dynamodb", "DynamoDB_20120810", endpoint=scripted_server.url + "/prefix", json_version="1.1"
    )
    assert client.call("ListTables", {"Limit": 1, "Name": "é"}) == {"TableNames": ["t"]}
    (req,) = scripted_server.requests
    headers = req["headers"]
    assert (req["method"], req["path"]) == ("POST", "/prefix")
    assert headers["X-Amz-Target"] == "DynamoDB_20120810.ListTables"
    assert headers["Content-Type"] == "application/x-amz-json-1.1"
    assert headers["X-Amz-Security-Token"] == "session-token"
    assert json.loads(req["body"]) == {"Limit": 1, "Name": "é"}
    # Re-sign what arrived on the wire with botocore, using only the signed headers.
    auth = headers["Authorization"]
    signed_names = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
    assert signed_names == sorted(
        ["content-type", "host", "x-amz-date", "x-amz-security-token", "x-amz-target"]
    )
    wire = {k: v for k, v in headers.items() if k.lower() in signed_names}
    when = datetime.datetime.strptime(headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ")
    again = botocore_sign(
        "POST",
        scripted_server.url + req["path"],
        wire,
        req["body"],
        service="dynamodb",
        region="eu-west-1",
        ak="AKIDTEST",
        sk="secret/TEST+key",
        token="session-token",
        when=when,
    )
    assert again.headers["Authorization"] == auth
    assert auth.startswith(
        f"AWS4-HMAC-SHA256 Credential=AKIDTEST/{headers['X-Amz-Date'][:8]}/eu-west-1/dynamodb/"
    )


def test_works_with_orjson_codec(env, scripted_server, monkeypatch):
    """Long-lived processes switch kindling.core.codec to orjson; the client follows."""
    monkeypatch.setattr(codec, "loads", codec.loads)
    monkeypatch.setattr(codec, "dumps", codec.dumps)
    assert codec.use_orjson()
    scripted_server.replies = [Reply(body={"Item": {"pk": {"S": "é"}}})]
    assert client_for(scripted_server).call("GetItem", {"Key": {"pk": {"S": "é"}}}) == {"Item": {"pk": {"S": "é"}}}
    assert json.loads(scripted_server.requests[0]["body"]) == {"Key": {"pk": {"S": "é"}}}


@given(st.integers(-62135596800, 253402300799))  # years 1..9999
def test_parse_utc_matches_calendar(seconds):
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
    if not stamp[:4].isdigit():  # strftime does not zero-pad years < 1000 everywhere
        return
    assert temporary.parse_utc(stamp) == calendar.timegm(time.gmtime(seconds))


def test_keep_alive_reuses_one_connection(env, scripted_server):
    scripted_server.replies = [Reply()]
    client = client_for(scripted_server)
    for _ in range(3):
        client.call("ListTables", {})
    assert len({r["peer"] for r in scripted_server.requests}) == 1


def test_retry_500_then_200(env, scripted_server, sleeps):
    scripted_server.replies = [
        Reply(500, {"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError"}),
        Reply(200, {"ok": True}),
    ]
    assert client_for(scripted_server).call("GetItem", {}) == {"ok": True}
    assert len(scripted_server.requests) == 2
    assert len(sleeps) == 1 and 0 <= sleeps[0] <= aws.JsonClient.backoff_base


def test_retry_throttling_then_200(env, scripted_server, sleeps):
    throttled = {
        "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
        "message": "slow down",
    }
    scripted_server.replies = [Reply(400, throttled), Reply(400, throttled), Reply(200, {"ok": 1})]
    assert client_for(scripted_server).call("PutItem", {}) == {"ok": 1}
    assert len(scripted_server.requests) == 3
    assert len(sleeps) == 2 and sleeps[1] <= 2 * aws.JsonClient.backoff_base


def test_validation_error_raises_at_once(env, scripted_server, sleeps):
    scripted_server.replies = [
        Reply(
            400,
            {"__type": "com.amazon.coral.validate#ValidationException", "message": "bad key"},
            {"x-amzn-RequestId": "RID1"},
        )
    ]
    with pytest.raises(aws.AwsError) as info:
        client_for(scripted_server).call("GetItem", {})
    err = info.value
    assert (err.code, err.message, err.status, err.retryable) == (
        "ValidationException",
        "bad key",
        400,
        False,
    )
    assert err.request_id == "RID1" and "RID1" in str(err)
    assert len(scripted_server.requests) == 1 and sleeps == []


@pytest.mark.parametrize(
    ("status", "body", "headers", "code", "retryable"),
    [
        (
            400,
            {"__type": "com.amazonaws.dynamodb.v20120810#LimitExceededException"},
            {},
            "LimitExceededException",
            False,
        ),
        (400, {"code": "ThrottlingException", "Message": "m"}, {}, "ThrottlingException", True),
        (
            400,
            {"__type": "ValidationException:http://internal.amazon.com/coral/x/"},
            {},
            "ValidationException",
            False,
        ),
        (
            400,
            {"__type": "com.amazonaws.sqs#QueueDoesNotExist", "message": "gone"},
            {"x-amzn-query-error": "AWS.SimpleQueueService.NonExistentQueue;Sender"},
            "AWS.SimpleQueueService.NonExistentQueue",
            False,
        ),
        (
            400,
            {"__type": "com.amazonaws.sqs#RequestThrottled"},
            {"x-amzn-query-error": "RequestThrottled;Sender"},
            "RequestThrottled",
            True,
        ),
        (502, b"<html>bad gateway</html>", {}, "502", True),
        (429, b"", {"x-amzn-ErrorType": "TooManyRequestsException"}, "TooManyRequestsException", True),
    ],
)
def test_error_parsing(env, scripted_server, sleeps, status, body, headers, code, retryable):
    scripted_server.replies = [Reply(status, body, headers)]
    with pytest.raises(aws.AwsError) as info:
        client_for(scripted_server, max_attempts=2).call("Op", {})
    assert (info.value.code, info.value.status, info.value.retryable) == (code, status, retryable)
    assert len(scripted_server.requests) == (2 if retryable else 1)


def test_stale_keep_alive_connection_is_reopened_without_costing_an_attempt(env, scripted_server, sleeps):
    scripted_server.replies = [
        Reply(body={"n": 1}, close=True),
        Reply(body={"n": 2}, close=True),
        Reply(body={"n": 3}),
    ]
    client = client_for(scripted_server, max_attempts=1)
    assert client.call("GetItem", {}) == {"n": 1}
    assert scripted_server.closed.acquire(timeout=5)  # the server has closed the idle connection
    assert client.call("GetItem", {}) == {"n": 2}
    assert scripted_server.closed.acquire(timeout=5)
    assert client.call("GetItem", {}) == {"n": 3}
    assert len({r["peer"] for r in scripted_server.requests}) == 3
    assert sleeps == []


def test_connection_close_header_reconnects(env, scripted_server):
    scripted_server.replies = [Reply(headers={"Connection": "close"}), Reply()]
    client = client_for(scripted_server)
    client.call("A", {})
    client.call("B", {})
    assert len({r["peer"] for r in scripted_server.requests}) == 2


def test_max_attempts_exhausted(env, scripted_server, sleeps):
    scripted_server.replies = [Reply(503, {"__type": "ServiceUnavailable", "message": "busy"})]
    with pytest.raises(aws.AwsError) as info:
        client_for(scripted_server, max_attempts=4).call("GetItem", {})
    err = info.value
    assert (err.code, err.status, err.retryable, err.attempts) == ("ServiceUnavailable", 503, True, 4)
    assert len(scripted_server.requests) == 4 and len(sleeps) == 3
    caps = [min(2.0, 0.05 * 2**i) for i in range(3)]
    assert all(0 <= d <= cap for d, cap in zip(sleeps, caps, strict=True))


def test_retries_wait_kindlings_one_backoff(env, scripted_server, sleeps, monkeypatch):
    asked = []

    def compute_backoff(attempt, *, base, cap):
        asked.append((attempt, base, cap))
        return 0.125

    monkeypatch.setattr(policy, "compute_backoff", compute_backoff)
    scripted_server.replies = [Reply(503, {"__type": "ServiceUnavailable"})]
    with pytest.raises(aws.AwsError):
        client_for(scripted_server, max_attempts=3).call("GetItem", {})
    assert asked == [(1, 0.05, 2.0), (2, 0.05, 2.0)] and sleeps == [0.125, 0.125]


def test_transport_failure_exhausted(env, sleeps):
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = aws.JsonClient(
        "dynamodb", "DynamoDB_20120810", endpoint=f"http://127.0.0.1:{port}", max_attempts=3
    )
    with pytest.raises(aws.AwsError) as info:
        client.call("ListTables", {})
    err = info.value
    assert (err.code, err.status, err.retryable, err.attempts) == ("ConnectionError", 0, True, 3)
    assert "ConnectionRefusedError" in err.message and len(sleeps) == 2


class RawServer:
    """Answers each request with the next scripted raw response (bytes), then closes if told."""

    def __init__(self, script: list[tuple[bytes, bool]]):
        self.script = list(script)
        self.requests: list[bytes] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while self.script:
            conn, _ = self.sock.accept()
            with conn:
                buf = b""
                while self.script:
                    while b"\r\n\r\n" not in buf:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        buf += chunk
                    if b"\r\n\r\n" not in buf:
                        break
                    head, _, buf = buf.partition(b"\r\n\r\n")
                    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                    while len(buf) < length:
                        buf += conn.recv(65536)
                    self.requests.append(head + b"\r\n\r\n" + buf[:length])
                    buf = buf[length:]
                    response, close = self.script.pop(0)
                    conn.sendall(response)
                    if close:
                        break


@pytest.mark.parametrize(
    "response",
    [
        pytest.param(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"5;ext=1\r\n{\"a\":\r\n3\r\n[1]\r\n1\r\n}\r\n0\r\nX-Trailer: t\r\n\r\n", id="chunked"),
        pytest.param(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{\"a\":[1]}",
                     id="100-continue"),
        pytest.param(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\nX-Dup: 1\r\nX-Dup: 2\r\n\r\n{\"a\":[1]}",
                     id="lowercase-and-repeated-headers"),
    ],
)
def test_response_framings(env, sleeps, response):
    srv = RawServer([(response, False), (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", False)])
    client = aws.JsonClient("dynamodb", "DynamoDB_20120810", endpoint=srv.url)
    assert client.call("GetItem", {}) == {"a": [1]}
    assert client.call("GetItem", {}) == {}  # the same connection, framing intact
    assert sleeps == [] and len(srv.requests) == 2


def test_body_delimited_by_close_and_http10(env, sleeps):
    srv = RawServer([
        (b"HTTP/1.1 200 OK\r\n\r\n{\"n\":1}", True),  # no length: the body runs to the close
        (b"HTTP/1.0 200 OK\r\nContent-Length: 7\r\n\r\n{\"n\":2}", False),  # 1.0: closes after
        (b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"n\":3}", False),
    ])
    client = aws.JsonClient("dynamodb", "DynamoDB_20120810", endpoint=srv.url, max_attempts=1)
    assert [client.call("X", {}) for _ in range(3)] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert client._conn.sock is not None and sleeps == []


@pytest.mark.parametrize(
    "response, message",
    [
        (b"SMTP ready\r\n\r\n", "bad status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{}", "2 of 50 body bytes"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n{}", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "bad header line"),
    ],
)
def test_broken_responses_are_transport_errors(env, sleeps, response, message):
    srv = RawServer([(response, True)] * 2)
    client = aws.JsonClient("dynamodb", "DynamoDB_20120810", endpoint=srv.url, max_attempts=2)
    with pytest.raises(aws.AwsError) as info:
        client.call("GetItem", {})
    err = info.value
    assert (err.code, err.retryable, err.attempts) == ("ConnectionError", True, 2)
    assert message in err.message and client._conn is None


def test_request_bytes_on_the_wire(env):
    srv = RawServer([(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", False)])
    aws.JsonClient("dynamodb", "DynamoDB_20120810", endpoint=srv.url + "/prefix").call("ListTables", {"Limit": 1})
    head, _, body = srv.requests[0].partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert lines[0] == "POST /prefix HTTP/1.1" and body == b'{"Limit":1}'
    assert headers["Host"] == srv.url.removeprefix("http://") and headers["Content-Length"] == "11"
    assert headers["X-Amz-Target"] == "DynamoDB_20120810.ListTables"
    assert "SignedHeaders=content-type;host;x-amz-date;x-amz-target," in headers["Authorization"]


def test_crc32_mismatch_is_retried(env, scripted_server, sleeps):
    scripted_server.replies = [
        Reply(body=b'{"a":1}', headers={"x-amz-crc32": "1"}),
        Reply(body=b'{"a":2}', headers={"x-amz-crc32": str(zlib.crc32(b'{"a":2}'))}),
    ]
    assert client_for(scripted_server).call("GetItem", {}) == {"a": 2}
    assert len(sleeps) == 1


def test_credentials_reread_each_call(env, scripted_server):
    scripted_server.replies = [Reply()]
    client = client_for(scripted_server)
    client.call("A", {})
    env.setenv("AWS_ACCESS_KEY_ID", "AKIDROTATED")
    env.setenv("AWS_SESSION_TOKEN", "tok2")
    client.call("B", {})
    first, second = (r["headers"] for r in scripted_server.requests)
    assert "Credential=AKIDTEST/" in first["Authorization"]
    assert "X-Amz-Security-Token" not in first
    assert "Credential=AKIDROTATED/" in second["Authorization"]
    assert second["X-Amz-Security-Token"] == "tok2"


def test_container_credentials(env, scripted_server, tmp_path):
    """SnapStart functions get credentials from the container endpoint, not key variables."""
    env.delenv("AWS_ACCESS_KEY_ID")
    env.delenv("AWS_SECRET_ACCESS_KEY")
    env.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", scripted_server.url + "/2021-04-23/credentials")
    token_file = tmp_path / "token"
    token_file.write_text("auth-token\n")
    env.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", str(token_file))
    creds = {
        "AccessKeyId": "AKIDBOX",
        "SecretAccessKey": "s",
        "Token": "boxtok",
        "Expiration": "2999-01-01T00:00:00Z",
    }
    scripted_server.replies = [Reply(body=creds), Reply()]
    container._container_cache.clear()
    client = client_for(scripted_server)
    client.call("A", {})
    client.call("B", {})  # credentials cached: no second fetch
    fetch, first, second = scripted_server.requests
    assert (fetch["method"], fetch["path"]) == ("GET", "/2021-04-23/credentials")
    assert fetch["headers"]["Authorization"] == "auth-token"
    for req in (first, second):
        assert "Credential=AKIDBOX/" in req["headers"]["Authorization"]
        assert req["headers"]["X-Amz-Security-Token"] == "boxtok"
    container._container_cache.clear()


# ------------------------------------------------------------------- moto round trip


@pytest.fixture(scope="module")
def moto_url():
    from moto.server import ThreadedMotoServer

    srv = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    srv.start()
    host, port = srv.get_host_and_port()
    yield f"http://{host}:{port}"
    srv.stop()


def test_dynamodb_round_trip_against_moto(env, moto_url):
    ddb = aws.JsonClient("dynamodb", "DynamoDB_20120810", endpoint=moto_url)
    table = ddb.call(
        "CreateTable",
        {
            "TableName": "results",
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    assert table["TableDescription"]["TableName"] == "results"
    item = {"pk": {"S": "job-1"}, "n": {"N": "42"}, "blob": {"B": "AAE="}}
    assert ddb.call("PutItem", {"TableName": "results", "Item": item}) == {}
    got = ddb.call("GetItem", {"TableName": "results", "Key": {"pk": {"S": "job-1"}}})
    assert got["Item"] == {"pk": {"S": "job-1"}, "n": {"N": "42"}, "blob": {"B": "AAE="}}
    writes = [{"PutRequest": {"Item": {"pk": {"S": f"job-{i}"}}}} for i in range(2, 7)]
    out = ddb.call("BatchWriteItem", {"RequestItems": {"results": writes}})
    assert out["UnprocessedItems"] == {}
    keys = [{"pk": {"S": f"job-{i}"}} for i in range(1, 7)]
    out = ddb.call("BatchGetItem", {"RequestItems": {"results": {"Keys": keys}}})
    assert sorted(i["pk"]["S"] for i in out["Responses"]["results"]) == [f"job-{i}" for i in range(1, 7)]
    with pytest.raises(aws.AwsError) as info:
        ddb.call("GetItem", {"TableName": "missing", "Key": {"pk": {"S": "x"}}})
    assert (info.value.code, info.value.status) == ("ResourceNotFoundException", 400)


def test_sqs_json_round_trip_against_moto(env, moto_url):
    queue = aws.JsonClient("sqs", "AmazonSQS", endpoint=moto_url)
    url = queue.call("CreateQueue", {"QueueName": "jobs"})["QueueUrl"]
    sent = queue.call(
        "SendMessage",
        {
            "QueueUrl": url,
            "MessageBody": '{"job": 1}',
            "MessageAttributes": {"kind": {"DataType": "String", "StringValue": "test"}},
        },
    )
    assert sent["MessageId"]
    got = queue.call(
        "ReceiveMessage",
        {"QueueUrl": url, "MaxNumberOfMessages": 10, "MessageAttributeNames": ["All"]},
    )
    (message,) = got["Messages"]
    assert message["Body"] == '{"job": 1}' and message["MessageId"] == sent["MessageId"]
    assert message["MessageAttributes"]["kind"]["StringValue"] == "test"
    queue.call("DeleteMessage", {"QueueUrl": url, "ReceiptHandle": message["ReceiptHandle"]})
    with pytest.raises(aws.AwsError) as info:
        queue.call("GetQueueUrl", {"QueueName": "missing"})
    assert info.value.code == "AWS.SimpleQueueService.NonExistentQueue"
    assert info.value.retryable is False


# ----------------------------------------------------------------------- cold path


IMPORT_PROBE = r"""
import json, os, sys
events = []
sys.addaudithook(
    lambda event, args: events.append(event)
    if event.startswith(("socket.", "http.client.")) else None
)
env_reads = []
class Spy(type(os.environ)):
    def __getitem__(self, key):
        env_reads.append(key)
        return super().__getitem__(key)
    def __contains__(self, key):
        env_reads.append(key)
        return super().__contains__(key)
os.environ.__class__ = Spy
import kindling.drivers.aws
print(json.dumps({
    "heavy": sorted(m for m in sys.modules
                    if m.split(".")[0] in ("boto3", "botocore", "urllib3", "requests", "orjson", "http",
                                           "email", "socket", "ssl", "hashlib", "urllib")),
    "events": events,
    "aws_env": [k for k in env_reads if k.startswith("AWS_")],
}))
"""


def test_import_is_cheap_and_inert():
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE],
        capture_output=True,
        text=True,
        check=True,
        env={
            "PATH": "/usr/bin:/bin",
            "AWS_ACCESS_KEY_ID": "x",
            "AWS_SECRET_ACCESS_KEY": "y",
            "AWS_REGION": "us-east-1",
        },
    )
    result = json.loads(out.stdout)
    assert result == {"heavy": [], "events": [], "aws_env": []}


# ------------------------------------------------------------------------- error tree


def test_errors_belong_to_kindlings_tree():
    """errors.py: every error kindling raises on purpose derives from KindlingError."""
    from kindling.core.errors import KindlingError

    for cls in (aws.AwsError, aws.HttpProtocolError, aws.RemoteDisconnected, aws.DeadlineExceeded):
        assert issubclass(cls, KindlingError), cls
    # ... without losing what callers catch them as.
    assert issubclass(aws.RemoteDisconnected, ConnectionResetError)
    assert issubclass(aws.DeadlineExceeded, TimeoutError)
    err = aws.AwsError("Throttled", "slow down", 400, True, request_id="RID", attempts=3)
    assert (err.code, err.message, err.status, err.retryable, err.request_id, err.attempts) == (
        "Throttled", "slow down", 400, True, "RID", 3)
    assert err.args == ("Throttled", "slow down", 400, True)
    assert str(err) == "Throttled: slow down (HTTP 400, after 3 attempts, request id RID)"


# ------------------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def self_signed_cert(tmp_path_factory):
    """A certificate for 127.0.0.1 that no trust store knows."""
    pytest.importorskip("cryptography.x509")
    from support.tls import self_signed_cert

    return self_signed_cert(tmp_path_factory.mktemp("tls"))


class UntrustedTlsServer:
    """Offers a self-signed certificate on 127.0.0.1; counts the connections it accepts."""

    def __init__(self, cert_and_key):
        import ssl

        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(*cert_and_key)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"https://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            conn, _ = self.sock.accept()
            self.accepted += 1
            try:
                with self.context.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(1)
            except OSError:  # the client refuses the certificate
                pass


def test_a_certificate_that_fails_verification_is_not_retried(env, sleeps, self_signed_cert):
    srv = UntrustedTlsServer(self_signed_cert)
    client = aws.JsonClient("dynamodb", "DynamoDB_20120810", endpoint=srv.url, max_attempts=3)
    with pytest.raises(aws.AwsError) as info:
        client.call("GetItem", {})
    err = info.value
    assert (err.code, err.status, err.retryable, err.attempts) == ("TLSVerificationFailed", 0, False, 1)
    assert "certificate verify failed" in err.message
    assert sleeps == [] and srv.accepted == 1 and client._conn is None


def test_container_credentials_behind_a_bad_certificate_are_not_retried(env, sleeps, self_signed_cert):
    srv = UntrustedTlsServer(self_signed_cert)
    env.delenv("AWS_ACCESS_KEY_ID")
    env.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", srv.url + "/creds")
    container._container_cache.clear()
    with pytest.raises(aws.AwsError) as info:
        aws.JsonClient("dynamodb", "DynamoDB_20120810", endpoint="http://127.0.0.1:9", max_attempts=3).call("A", {})
    err = info.value
    assert (err.code, err.retryable, err.attempts) == ("TLSVerificationFailed", False, 1)
    assert srv.url in err.message and sleeps == [] and srv.accepted == 1


# ---------------------------------------------------- where the container token may go


def ip_is_loopback(host):
    """botocore's ContainerMetadataFetcher._is_loopback_address."""
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


ipv6_forms = st.ip_addresses(v=6).flatmap(
    lambda ip: st.sampled_from([str(ip), ip.exploded, ip.exploded.upper(), str(ip).replace("::", ":0::", 1)])
)
loopback_like = st.one_of(
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(network="127.0.0.0/8").map(str),
    st.ip_addresses(network="::ffff:127.0.0.0/104").map(str),
    st.ip_addresses(network="::ffff:127.0.0.0/104").map(lambda ip: f"::ffff:{ip.ipv4_mapped}"),
    st.ip_addresses(network="::/126").map(lambda ip: ip.exploded),
    ipv6_forms,
    st.builds(lambda ip, scope: f"{ip}%{scope}", st.sampled_from(["::1", "0::1", "fe80::1", "127.0.0.1"]),
              st.text(alphabet="lo0%/ 1", max_size=4)),
    st.sampled_from(["::1", "0:0:0:0:0:0:0:1", "::0.0.0.1", "::127.0.0.1", "127.1", "0127.0.0.1", "127.0.0.01",
                     "127.0.0.256", "localhost", "", "::1%", " 127.0.0.1", "127.0.0.1 ", "::1/128", "１２７.0.0.1"]),
    st.text(alphabet="0123456789abcdefABCDEF:.%", max_size=24),
)


@settings(max_examples=examples(500))
@given(loopback_like)
def test_loopback_check_matches_ipaddress(host):
    assert aws.url.is_loopback(host) == ip_is_loopback(host)


class NoConnection:
    def __init__(self, *args, **kwargs):
        raise AssertionError("a connection was opened")


class FakeCredentialsEndpoint:
    """Stands in for Connection: answers with credentials, records where it was sent."""

    opened: list = []

    def __init__(self, scheme, host, port, timeout):
        self.opened.append((scheme, host, port))

    def request(self, method, target, body, headers, deadline=None, max_body=None):
        return 200, {}, b'{"AccessKeyId": "AKIDBOX", "SecretAccessKey": "s", "Token": "t"}'

    def close(self):
        pass


@pytest.mark.parametrize(
    "uri",
    [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/role",  # IMDS, not the container
        "http://example.com/creds",
        "http://10.0.0.1:8080/creds",
        "http://[fd00:ec2::24]/creds",
        "http://localhost.example/creds",
        "http://127.1/creds",  # not an address ipaddress accepts
        "http://169.254.170.2.example/creds",
    ],
)
def test_the_token_is_not_sent_over_plain_http_off_the_allowed_hosts(env, sleeps, monkeypatch, uri):
    env.delenv("AWS_ACCESS_KEY_ID")
    env.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", uri)
    env.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "secret-token")
    monkeypatch.setattr(container, "Connection", NoConnection)
    container._container_cache.clear()
    with pytest.raises(aws.AwsError) as info:
        aws.client.get_credentials()
    err = info.value
    assert (err.code, err.retryable) == ("CredentialsError", False)
    assert "169.254.170.2" in err.message and "loopback" in err.message and sleeps == []


@pytest.mark.parametrize(
    "uri, where",
    [
        ("http://169.254.170.2/v2/credentials/x", ("http", "169.254.170.2", 80)),
        ("http://169.254.170.23/v1/credentials", ("http", "169.254.170.23", 80)),
        ("http://[fd00:ec2::23]/v1/credentials", ("http", "fd00:ec2::23", 80)),
        ("http://[FD00:EC2::23]:80/v1/credentials", ("http", "fd00:ec2::23", 80)),
        ("http://localhost:1338/creds", ("http", "localhost", 1338)),
        ("http://LOCALHOST/creds", ("http", "localhost", 80)),
        ("http://127.0.0.1:9001/2021-04-23/credentials", ("http", "127.0.0.1", 9001)),  # Lambda SnapStart
        ("http://127.3.2.1/creds", ("http", "127.3.2.1", 80)),
        ("http://[::1]:8080/creds", ("http", "::1", 8080)),
        ("http://[::ffff:127.0.0.1]/creds", ("http", "::ffff:127.0.0.1", 80)),
        ("https://credentials.example.com/creds", ("https", "credentials.example.com", 443)),
    ],
)
def test_the_token_goes_to_the_allowed_hosts(env, monkeypatch, uri, where):
    env.delenv("AWS_ACCESS_KEY_ID")
    env.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", uri)
    env.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "secret-token")
    FakeCredentialsEndpoint.opened = []
    monkeypatch.setattr(container, "Connection", FakeCredentialsEndpoint)
    container._container_cache.clear()
    assert aws.client.get_credentials() == ("AKIDBOX", "s", "t")
    assert FakeCredentialsEndpoint.opened == [where]
    container._container_cache.clear()


def test_the_relative_uri_goes_to_the_container_endpoint(env, monkeypatch):
    env.delenv("AWS_ACCESS_KEY_ID")
    env.setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/credentials/abc")
    FakeCredentialsEndpoint.opened = []
    monkeypatch.setattr(container, "Connection", FakeCredentialsEndpoint)
    container._container_cache.clear()
    assert aws.client.get_credentials() == ("AKIDBOX", "s", "t")
    assert FakeCredentialsEndpoint.opened == [("http", "169.254.170.2", 80)]
    container._container_cache.clear()


@pytest.mark.parametrize("token", ["abc\r\nX-Injected: 1", "abc\ndef"])
def test_a_token_with_a_line_break_is_refused_before_any_connection(env, sleeps, monkeypatch, token):
    env.delenv("AWS_ACCESS_KEY_ID")
    env.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:9/creds")
    env.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", token)
    monkeypatch.setattr(container, "Connection", NoConnection)
    container._container_cache.clear()
    with pytest.raises(aws.AwsError, match="line break") as info:
        aws.client.get_credentials()
    assert info.value.code == "CredentialsError"
