"""A URL's credentials never reach a message: kindling.core.errors.masked_url, the one function
every error and log line that can hold a URL (proxies, Valkey URLs, endpoints) goes through,
and a proxy setting kindling does not support refused once, when the worker is built."""

from __future__ import annotations

import io

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from kindling.core import codec
from kindling.core.errors import ConfigurationError, masked_url
from kindling.shared import logs

SECRET = "PASSWORD"


@pytest.mark.parametrize(("text", "shown"), [
    ("http://user:PASSWORD@127.0.0.1:3128", "http://user:***@127.0.0.1:3128"),
    ("https://user:PASSWORD@proxy.internal:3128/", "https://user:***@proxy.internal:3128/"),
    ("redis://:PASSWORD@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
    ("rediss://default:PASS@WORD@127.0.0.1:6380", "rediss://default:***@127.0.0.1:6380"),  # an @ left unencoded
    ("valkeys://PASSWORD@[::1]:6380", "valkeys://***@[::1]:6380"),  # a user part alone may be a token
    ("user:PASSWORD@127.0.0.1:3128", "user:***@127.0.0.1:3128"),  # a proxy without its scheme
    ("user:PA(SS)WORD,@127.0.0.1:3128", "user:***@127.0.0.1:3128"),  # sub-delimiters are the password's own
    ("unsupported proxy 'https://u:PASSWORD@h:1': use http://", "unsupported proxy 'https://u:***@h:1': use http://"),
    ("two: http://a:PASSWORD@h1 and \"redis://:PASSWORD@h2\"", "two: http://a:***@h1 and \"redis://:***@h2\""),
    ("http://h/q?X-Amz-Signature=PASSWORD&Action=Send", "http://h/q?X-Amz-Signature=***&Action=Send"),
    ("redis://h:6379/0?password=PASSWORD", "redis://h:6379/0?password=***"),
    ("http://h/login?next=https://u:PASSWORD@h2/", "http://h/login?next=https://u:***@h2/"),  # a URL in a URL
    ("http://127.0.0.1:4566", "http://127.0.0.1:4566"),
    ("/path/with@sign", "/path/with@sign"),
    ("mail me at a@b.example", "mail me at a@b.example"),  # no URL: left as it is
    ("", ""),
])
def test_a_urls_credentials_are_masked_wherever_it_stands(text, shown):
    assert masked_url(text) == shown
    assert SECRET not in masked_url(text)


@pytest.mark.parametrize("url", ["https://user:PASSWORD@127.0.0.1:3128", "socks5://user:PASSWORD@127.0.0.1:1080",
                                 "http://user:PASSWORD@127.0.0.1:99999", "http://user:PASSWORD@:3128"])
def test_a_proxy_kindling_does_not_support_is_refused_with_its_credentials_masked(url):
    from kindling.drivers.aws.proxy import Proxy

    with pytest.raises(ConfigurationError) as caught:
        Proxy(url)
    assert SECRET not in str(caught.value) and "***" in str(caught.value)
    assert isinstance(caught.value, ValueError)  # as it was


@pytest.mark.parametrize("name", ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"])
def test_the_lambda_worker_refuses_an_unsupported_proxy_when_it_is_built(monkeypatch, name):
    """At the function's start (its init), once, naming the variable: never in a batch."""
    from kindling.triggers.sqs.handler import LambdaWorker

    for each in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(each, raising=False)
    monkeypatch.setenv(name, "https://user:PASSWORD@127.0.0.1:3128")
    with pytest.raises(ConfigurationError, match=name) as caught:
        LambdaWorker(store=object())
    assert SECRET not in str(caught.value) and "http://" in str(caught.value)
    monkeypatch.setenv(name, "http://user:PASSWORD@127.0.0.1:3128")
    LambdaWorker(store=object())  # a proxy it speaks to: built


def test_kindling_worker_refuses_an_unsupported_proxy_before_it_starts(monkeypatch, capsys):
    from kindling.tools import cli

    monkeypatch.setenv("HTTPS_PROXY", "https://user:PASSWORD@127.0.0.1:3128")
    code = cli.main(["worker", "--queue-url", "http://127.0.0.1:9/000000000000/q", "--table", "t", "--burst"])
    err = capsys.readouterr().err
    assert code == 1 and "HTTPS_PROXY" in err and SECRET not in err


@pytest.mark.parametrize("make", ["JsonClient", "S3Client", "LambdaInvoker"])
def test_an_endpoint_refused_is_shown_masked(make):
    from kindling.drivers.aws.client import JsonClient
    from kindling.drivers.aws.s3 import S3Client
    from kindling.shared.valkey.kick import LambdaInvoker

    endpoint = "ftp://user:PASSWORD@127.0.0.1:21"
    build = {"JsonClient": lambda: JsonClient("dynamodb", "DynamoDB_20120810", region="us-east-1", endpoint=endpoint),
             "S3Client": lambda: S3Client(region="us-east-1", endpoint=endpoint),
             "LambdaInvoker": lambda: LambdaInvoker("fn", region="us-east-1", endpoint=endpoint)}[make]
    with pytest.raises(ValueError) as caught:
        build()
    assert SECRET not in str(caught.value) and "***" in str(caught.value)


def test_a_log_line_never_carries_a_urls_password():
    buf = io.StringIO()
    logs.LogSink(buf)({"level": "ERROR", "message": "store unavailable",
                       "error": "cannot reach 'redis://:PASSWORD@127.0.0.1:6379/0'"})
    line = codec.loads(buf.getvalue())
    assert SECRET not in buf.getvalue() and line["error"] == "cannot reach 'redis://:***@127.0.0.1:6379/0'"


def test_the_command_line_shows_an_error_with_its_urls_masked():
    from kindling.tools.exits import describe

    class EndpointConnectionError(Exception):
        __module__ = "botocore.exceptions"

    text, _ = describe(EndpointConnectionError('Could not connect to the endpoint URL: "http://u:PASSWORD@h:1/"'))
    assert SECRET not in text and "u:***@h:1" in text


_PASSWORD_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&()*+,;=:%@"


@settings(max_examples=300, deadline=None)
@given(scheme=st.sampled_from(["http", "https", "redis", "rediss", "valkey", "valkeys", ""]),
       user=st.text("abcdefghij", max_size=6), password=st.text(_PASSWORD_CHARS, min_size=6, max_size=40),
       around=st.sampled_from(["{}", "'{}'", "\"{}\"", "cannot reach {}: refused", "<{}>", "x={} y"]))
def test_no_password_survives_masking_whatever_it_holds(scheme, user, password, around):
    url = f"{scheme}://{user}:{password}@127.0.0.1:6379/0" if scheme else f"{user}:{password}@127.0.0.1:6379"
    text = around.format(url) if scheme else url  # a bare authority is masked only as a value of its own
    assume(text.count(password) == 1)  # the password, not a piece of the host or the user that it repeats
    assert password not in masked_url(text)


def test_a_container_credentials_uri_refused_is_shown_masked():
    from kindling.drivers.aws.container import container_credentials
    from kindling.drivers.aws.errors import AwsError

    with pytest.raises(AwsError) as caught:
        container_credentials("http://user:PASSWORD@creds.invalid/creds")  # refused before any lookup or socket
    assert SECRET not in str(caught.value) and "user:***@" in str(caught.value)
