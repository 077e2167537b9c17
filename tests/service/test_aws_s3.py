"""kindling.drivers.aws.s3: SigV4 for S3 (AWS's documented examples, botocore's S3SigV4Auth), addressing,
errors and retries, and a round trip through moto's S3."""

import datetime
import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from unittest import mock

import botocore.auth
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from hypothesis import given, settings
from hypothesis import strategies as st
from kindling.drivers import aws
from kindling.drivers.aws.s3 import S3Client, check_location, is_virtual_hostable
from support import examples

AWS_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
           "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")

# AWS's example credentials and request date, from "Authenticating Requests: Using the
# Authorization Header (AWS Signature Version 4)", examples of a payload in one chunk.
EXAMPLE = {"region": "us-east-1", "access_key": "AKIAIOSFODNN7EXAMPLE",
           "secret_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "amz_date": "20130524T000000Z"}
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


@pytest.fixture
def env(monkeypatch):
    for name in AWS_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret/TEST+key")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")  # botocore reads this one first
    return monkeypatch


# -- signing -----------------------------------------------------------------------------


def test_aws_example_get_object():
    """GET Object: the example's Range request and its documented signature."""
    out = aws.sign("GET", "https://examplebucket.s3.amazonaws.com/test.txt",
                   {"Range": "bytes=0-9", "x-amz-content-sha256": EMPTY_SHA256}, b"", service="s3", **EXAMPLE)
    assert out["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")


def test_aws_example_put_object():
    """PUT Object: the key's "$" is percent-encoded once, and x-amz-content-sha256 is the body's
    hash (added by sign, as S3 requires it)."""
    out = aws.sign("PUT", "https://examplebucket.s3.amazonaws.com/test%24file.text",
                   {"Date": "Fri, 24 May 2013 00:00:00 GMT", "x-amz-storage-class": "REDUCED_REDUNDANCY"},
                   b"Welcome to Amazon S3.", service="s3", **EXAMPLE)
    assert out["X-Amz-Content-SHA256"] == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"
    assert out["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class, "
        "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")


def test_other_services_still_normalize_the_path():
    """The S3 rules apply to S3 only: a path with "//" signs differently for another service."""
    args = ("GET", "https://h.example/a//b/../c", {}, b"")
    s3 = aws.sign(*args, service="s3", **EXAMPLE)["Authorization"]
    other = aws.sign(*args, service="s4", **EXAMPLE)["Authorization"].replace("/s4/", "/s3/")
    assert s3 != other
    assert "X-Amz-Content-SHA256" not in aws.sign(*args, service="sqs", **EXAMPLE)


KEY_CHARS = st.characters(codec="utf-8", exclude_categories=("Cs",))


@settings(max_examples=examples(150), deadline=None)
@given(key=st.text(KEY_CHARS, min_size=1, max_size=40), method=st.sampled_from(["GET", "PUT"]),
       body=st.binary(max_size=100), token=st.one_of(st.none(), st.just("tok/en+=")),
       path_style=st.booleans())
def test_s3_signature_matches_botocore(key, method, body, token, path_style):
    """Whatever the key ("//", "..", spaces, non-ASCII), botocore's S3SigV4Auth signs it the same."""
    client = S3Client(region="us-east-1", endpoint="http://127.0.0.1:9" if path_style else None,
                      credentials=lambda deadline: ("AK", "SK", token))
    _, _, _, url = client._address("my-bucket", key)
    when = datetime.datetime(2026, 11, 22, 23, 0, 0)
    headers = {"X-Amz-Content-SHA256": hashlib.sha256(body).hexdigest()}
    ours = aws.sign(method, url, headers, body, service="s3", region="us-east-1", access_key="AK", secret_key="SK",
                    session_token=token, amz_date=when.strftime("%Y%m%dT%H%M%SZ"))
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
    # botocore sends UNSIGNED-PAYLOAD over https unless told to sign it; kindling always signs it.
    with mock.patch.object(botocore.auth, "get_current_datetime", return_value=when), \
            mock.patch.object(S3SigV4Auth, "_should_sha256_sign_payload", return_value=True):
        S3SigV4Auth(Credentials("AK", "SK", token), "s3", "us-east-1").add_auth(request)
    assert ours["Authorization"] == request.headers["Authorization"]


# -- addressing ----------------------------------------------------------------------------


def test_path_style_whenever_an_endpoint_is_configured(env):
    env.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
    assert S3Client().url("bucket", "a b/c") == "http://127.0.0.1:4566/bucket/a%20b/c"
    env.setenv("AWS_ENDPOINT_URL_S3", "http://localhost:1234/prefix/")
    assert S3Client().url("bucket", "k") == "http://localhost:1234/prefix/bucket/k"
    assert S3Client(endpoint="https://s3.local").url("b", "x:y") == "https://s3.local/b/x%3Ay"


def test_virtual_hosted_on_aws(env):
    assert S3Client().url("my-bucket", "args/J1/ab") == "https://my-bucket.s3.eu-west-1.amazonaws.com/args/J1/ab"
    assert S3Client(region="cn-north-1").url("b-1", "k") == "https://b-1.s3.cn-north-1.amazonaws.com.cn/k"
    # A dotted name would not match the wildcard certificate: path-style, as botocore does.
    assert S3Client().url("my.bucket", "k") == "https://s3.eu-west-1.amazonaws.com/my.bucket/k"
    env.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
    env.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    assert S3Client().url("my-bucket", "k") == "https://my-bucket.s3.eu-west-1.amazonaws.com/k"


@pytest.mark.parametrize(("bucket", "ok"), [("abc", True), ("a-b-1", True), ("ab", False), ("-ab", False),
                                            ("Abc", False), ("a.b.c", False), ("a" * 64, False)])
def test_virtual_hostable(bucket, ok):
    assert is_virtual_hostable(bucket) is ok


@pytest.mark.parametrize(("bucket", "key"), [("", "k"), ("a/b", "k"), ("b", ""), ("b", "x" * 1025),
                                             ("b", "\ud800"), ("bücket", "k")])
def test_unaddressable_locations_are_refused_before_sending(bucket, key):
    with pytest.raises(ValueError):
        check_location(bucket, key)


# -- a scripted server: errors and retries ----------------------------------------------


class Script(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, replies):
        super().__init__(("127.0.0.1", 0), Handler)
        self.replies = list(replies)
        self.seen: list[tuple[str, str, dict, bytes]] = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _reply(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        self.server.seen.append((self.command, self.path, dict(self.headers), body))
        status, data = self.server.replies.pop(0)
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amz-request-id", "REQ1")
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = _reply

    def log_message(self, *args):
        pass


@pytest.fixture
def script():
    servers = []

    def start(*replies):
        server = Script(replies)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server, f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _error(code, message="m"):
    return f'<?xml version="1.0"?><Error><Code>{code}</Code><Message>{message} &amp; more</Message></Error>'.encode()


def test_slow_down_and_5xx_are_retried(env, script, sleeps):
    server, url = script((503, _error("SlowDown")), (500, b""), (200, b"data"))
    assert S3Client(endpoint=url).get_object("b", "k") == b"data"
    assert len(sleeps) == 2 and len(server.seen) == 3


def test_missing_object_fails_at_once_with_s3s_code(env, script, sleeps):
    _, url = script((404, _error("NoSuchKey", "The specified key does not exist.")))
    with pytest.raises(aws.AwsError) as info:
        S3Client(endpoint=url).get_object("b", "k")
    err = info.value
    assert (err.code, err.status, err.retryable, err.attempts) == ("NoSuchKey", 404, False, 1)
    assert err.message == "The specified key does not exist. & more" and err.request_id == "REQ1"
    assert sleeps == []


def test_attempts_run_out(env, script, sleeps):
    _, url = script(*[(503, _error("SlowDown"))] * 3)
    with pytest.raises(aws.AwsError) as info:
        S3Client(endpoint=url, max_attempts=3).put_object("b", "k", b"x")
    assert (info.value.code, info.value.attempts, info.value.retryable) == ("SlowDown", 3, True)


def test_put_sends_a_signed_body_with_its_hash(env, script):
    server, url = script((200, b""))
    S3Client(endpoint=url).put_object("bucket", "args/J:1/x y", b"hello", content_type="application/json")
    method, path, headers, body = server.seen[0]
    assert (method, path, body) == ("PUT", "/bucket/args/J%3A1/x%20y", b"hello")
    assert headers["X-Amz-Content-SHA256"] == hashlib.sha256(b"hello").hexdigest()
    assert headers["Content-Type"] == "application/json"
    assert "x-amz-content-sha256" in headers["Authorization"]


def test_head_errors_without_a_body_are_named_by_status(env, script, sleeps):
    _, url = script((403, b""))
    with pytest.raises(aws.AwsError) as info:
        S3Client(endpoint=url).get_object("b", "k")
    assert (info.value.code, info.value.retryable) == ("AccessDenied", False)


def test_the_deadline_bounds_the_retries(env, script, sleeps):
    import time

    _, url = script((503, _error("SlowDown")))
    with pytest.raises(aws.AwsError) as info:
        S3Client(endpoint=url).get_object("b", "k", deadline=time.monotonic() + 0.001)
    assert info.value.code == "DeadlineExceeded"


# -- moto ---------------------------------------------------------------------------------


@pytest.fixture
def moto_url():
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def test_round_trip_against_moto(env, moto_url):
    import boto3

    env.setenv("AWS_REGION", "us-east-1")
    s3 = boto3.client("s3", endpoint_url=moto_url, region_name="us-east-1", aws_access_key_id="a",
                      aws_secret_access_key="b")
    s3.create_bucket(Bucket="payloads")
    client = S3Client(endpoint=moto_url)
    body = bytes(range(256)) * 8192  # 2 MiB, every byte value
    key = "args/01JD/ü b+c//d"
    client.put_object("payloads", key, body)
    assert s3.get_object(Bucket="payloads", Key=key)["Body"].read() == body  # stored under that very key
    assert client.get_object("payloads", key) == body
    s3.put_object(Bucket="payloads", Key="from-boto3", Body=b"x")
    assert client.get_object("payloads", "from-boto3") == b"x"
    with pytest.raises(aws.AwsError) as info:
        client.get_object("payloads", "missing")
    assert (info.value.code, info.value.retryable) == ("NoSuchKey", False)
    with pytest.raises(aws.AwsError) as info:
        client.get_object("no-such-bucket", "k")
    assert info.value.code == "NoSuchBucket"
