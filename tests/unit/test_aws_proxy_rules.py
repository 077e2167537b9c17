"""Which connections go through a proxy: the environment read as urllib (and so botocore)
reads it, NO_PROXY matched as urllib.request.proxy_bypass_environment matches it."""

from __future__ import annotations

import urllib.request

import pytest
from kindling.drivers.aws.proxy import Proxy, bypass, proxy_for

HOSTS = [("dynamodb.eu-west-1.amazonaws.com", None), ("dynamodb.eu-west-1.amazonaws.com", 443),
         ("sqs.us-east-1.amazonaws.com", None), ("127.0.0.1", 4566), ("localhost", None), ("169.254.169.254", None),
         ("amazonaws.com", None), ("notamazonaws.com", None), ("LOCALHOST", 80), ("::1", 4566), ("::1", None)]
NO_PROXY = ["", "*", "amazonaws.com", ".amazonaws.com", "AMAZONAWS.COM", "localhost,127.0.0.1", " 127.0.0.1:4566 ",
            "127.0.0.1:9999", "eu-west-1.amazonaws.com,,", "169.254.169.254,169.254.170.2", "com", "zonaws.com",
            "sqs.us-east-1.amazonaws.com:443", "..amazonaws.com", "::1", "[::1]", "[::1]:4566", " *"]


@pytest.mark.parametrize("no_proxy", NO_PROXY)
def test_no_proxy_matches_as_urllib_does(no_proxy):
    for host, port in HOSTS:
        written = f"[{host}]" if ":" in host else host  # an IPv6 address, as a URL writes it
        netloc = f"{written}:{port}" if port is not None else written
        assert bypass(host, port, no_proxy) == bool(
            urllib.request.proxy_bypass_environment(netloc, {"no": no_proxy})), (host, port, no_proxy)


def test_the_scheme_picks_the_variable_and_lowercase_wins(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert proxy_for("https", "sqs.us-east-1.amazonaws.com") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    assert proxy_for("http", "127.0.0.1", 4566) is None
    assert (proxy_for("https", "sqs.us-east-1.amazonaws.com").port) == 3128
    monkeypatch.setenv("https_proxy", "127.0.0.1:8888")  # no scheme: http://, as urllib3 reads it
    assert proxy_for("https", "sqs.us-east-1.amazonaws.com").port == 8888
    monkeypatch.setenv("NO_PROXY", ".amazonaws.com")
    assert proxy_for("https", "sqs.us-east-1.amazonaws.com") is None


def test_an_empty_lowercase_variable_turns_the_uppercase_one_off(monkeypatch):
    """urllib's getproxies_environment: the lowercase spelling wins even when it is empty."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    monkeypatch.setenv("https_proxy", "")
    assert proxy_for("https", "sqs.us-east-1.amazonaws.com") is None
    monkeypatch.delenv("https_proxy")
    monkeypatch.setenv("NO_PROXY", ".amazonaws.com")
    monkeypatch.setenv("no_proxy", "")
    assert proxy_for("https", "sqs.us-east-1.amazonaws.com").port == 3128


def test_proxy_credentials_become_basic_authorization_and_stay_out_of_repr():
    proxy = Proxy("http://user%40corp:s%3Acret@127.0.0.1:3128")
    assert proxy.authorization == "Basic dXNlckBjb3JwOnM6Y3JldA=="  # user@corp:s:cret
    assert "cret" not in repr(proxy) and (proxy.host, proxy.port) == ("127.0.0.1", 3128)
    assert Proxy("http://127.0.0.1:3128").authorization is None
    # as botocore: a user without a password sends no header
    assert Proxy("http://user:@127.0.0.1:3128").authorization is None
    assert Proxy("http://user@127.0.0.1:3128").authorization is None


def test_an_https_proxy_url_is_refused_with_a_reason():
    with pytest.raises(ValueError, match="http:// proxies"):
        Proxy("https://127.0.0.1:3128")
