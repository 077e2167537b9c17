"""kindling's AWS client against botocore, the same question asked of both in one fixture
environment at a time.

A case is an environment (variables, the shared credentials and config files, a token file)
and a question: which credentials (or none, or a refusal), which URL and signing region for
each service kindling calls, which proxy and Proxy-Authorization header for an endpoint.
:func:`run` answers every case of a part twice, through botocore and through kindling, and
returns the cases whose answers differ. Every difference is either a defect or one of
``known.DELIBERATE``: tests/differential/test_against_botocore.py holds that, and
``python tests/differential/report.py`` prints the counts.

Only loopback traffic: the credential endpoints are :class:`stub.Stub` on 127.0.0.1, and
botocore's requests to AWS are stopped before they are sent (``before-send``)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from differential import stub

PARTS = ("credentials", "endpoints", "endpoint settings", "proxies")
TITLES = {
    "credentials": "credential chain (fixture environments)",
    "endpoints": "endpoints: 7 services x FIPS/dual-stack (env) in every partition",
    "endpoint settings": "endpoints, other settings (region and profile precedence, config file, endpoint URLs)",
    "proxies": "proxy decision and Proxy-Authorization (proxies x NO_PROXY x spellings x endpoints)",
}
# The services kindling calls, with one operation each for botocore to address.
SERVICES = {"dynamodb": ("list_tables", {}), "sqs": ("list_queues", {}), "secretsmanager": ("list_secrets", {}),
            "ssm": ("describe_parameters", {}), "lambda": ("list_functions", {}),
            "sts": ("get_caller_identity", {}), "s3": ("put_object", {"Bucket": "kindling-bucket", "Key": "k"})}
# A refusal, as compared: that there was one (the two word their errors differently).
REFUSED = ("refused",)
_JSON_TARGETS = {"dynamodb": "DynamoDB_20120810", "sqs": "AmazonSQS", "secretsmanager": "secretsmanager",
                 "ssm": "AmazonSSM", "sts": "AWSSecurityTokenServiceV20110615"}


@dataclass
class Case:
    part: str
    name: str
    env: dict[str, str | None] = field(default_factory=dict)  # None: unset (over the base)
    files: dict[str, str] = field(default_factory=dict)  # file name in the case's directory -> text
    service: str = ""  # endpoint questions: which service
    url: str = ""  # proxy questions: the endpoint URL
    twice: bool = False  # credential questions: also ask whether a second call fetched them again


@dataclass
class Outcome:
    case: Case
    botocore: tuple
    kindling: tuple

    @property
    def agree(self) -> bool:
        return self.botocore == self.kindling


# -- the environment ---------------------------------------------------------------------------------

_CLEARED_PREFIXES = ("AWS_", "BOTO_")
_PROXY_NAMES = ("http_proxy", "https_proxy", "no_proxy", "all_proxy")


@contextmanager
def environment(case: Case, stub_url: str) -> Iterator[str]:
    """os.environ is the case's environment (nothing of the machine's AWS settings) until exit;
    yields the directory holding its files."""
    from kindling.drivers.aws import chain, container

    saved = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="kindling-diff-") as home:
        for name in list(os.environ):
            if name.startswith(_CLEARED_PREFIXES) or name.lower() in _PROXY_NAMES or name == "REQUEST_METHOD":
                del os.environ[name]
        base = {"HOME": home, "AWS_CONFIG_FILE": f"{home}/config", "AWS_SHARED_CREDENTIALS_FILE": f"{home}/credentials",
                "BOTO_CONFIG": f"{home}/boto", "AWS_EC2_METADATA_DISABLED": "true"}
        for name, value in {**base, **case.env}.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value.replace("{dir}", home).replace("{stub}", stub_url)
        for name, text in case.files.items():
            with open(os.path.join(home, name), "w") as f:
                f.write(text.replace("{dir}", home).replace("{stub}", stub_url))
        chain.reset()
        container._container_cache.clear()
        try:
            yield home
        finally:
            os.environ.clear()
            os.environ.update(saved)
            chain.reset()
            container._container_cache.clear()


# -- botocore's answers ------------------------------------------------------------------------------

_loader = None


def _session():
    global _loader
    import botocore.loaders
    import botocore.session

    session = botocore.session.Session()
    _loader = _loader or botocore.loaders.create_loader()
    session.register_component("data_loader", _loader)
    return session


class _Captured(Exception):
    pass


def _capture(request, **_):
    raise _Captured(request.url, request.headers.get("Authorization"))


def botocore_endpoint(service: str, session=None) -> tuple:
    """("url", URL, signing region) for the service's request, or ("refused",)."""
    operation, args = SERVICES[service]
    try:
        client = (session or _session()).create_client(service)
        client.meta.events.register("before-send", _capture)
        getattr(client, operation)(**args)
    except _Captured as sent:
        url, authorization = sent.args
        signing = authorization.decode().partition("Credential=")[2].split("/")[2]
        return "url", _normal_url(service, url), signing
    except Exception:  # NoRegionError, EndpointVariantError, InvalidConfigError ...
        return REFUSED
    raise AssertionError("botocore sent nothing")


def _normal_url(service: str, url: str) -> str:
    """The URL as compared: S3's whole (bucket and key), else the scheme and host."""
    if service == "s3":
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"


def botocore_credentials(twice: bool = False) -> tuple:
    try:
        creds = _session().get_credentials()
        if creds is None:
            return ("none",)
        frozen = creds.get_frozen_credentials()
        answer = ("credentials", frozen.access_key, frozen.secret_key, frozen.token)
        if twice:
            before = len(stub.running().requests)
            creds.get_frozen_credentials()
            answer += ("fetched again" if len(stub.running().requests) > before else "kept",)
        return answer
    except Exception:
        return REFUSED


def botocore_proxy(url: str) -> tuple:
    from urllib.parse import urlsplit

    from botocore.httpsession import ProxyConfiguration
    from botocore.utils import get_environ_proxies

    config = ProxyConfiguration(proxies=get_environ_proxies(url))
    proxy = config.proxy_url_for(url)
    if not proxy:
        return ("direct",)
    parts = urlsplit(proxy)
    default = 443 if parts.scheme == "https" else 80
    return (parts.scheme + " proxy", parts.hostname, parts.port or default,
            config.proxy_headers_for(proxy).get("Proxy-Authorization"))


# -- kindling's answers ------------------------------------------------------------------------------

def kindling_endpoint(service: str) -> tuple:
    from kindling.drivers.aws import endpoints
    from kindling.drivers.aws.client import JsonClient
    from kindling.drivers.aws.errors import AwsError
    from kindling.drivers.aws.s3 import S3Client

    try:
        if service == "s3":
            client = S3Client()
            return "url", client.url("kindling-bucket", "k"), client.signing_region
        if service == "lambda":  # the Valkey kick's client resolves as JsonClient does
            found = endpoints.resolve("lambda", endpoints.resolve_region(None))
            return "url", _normal_url(service, found.url), found.signing_region
        client = JsonClient(service, _JSON_TARGETS[service])
        return "url", _normal_url(service, client.endpoint), client.signing_region
    except (AwsError, ValueError):
        return REFUSED
    except Exception as exc:  # not kindling's error: a caller catching AwsError misses it
        return "raised", type(exc).__name__


def kindling_credentials(twice: bool = False) -> tuple:
    from kindling.drivers.aws.client import get_credentials
    from kindling.drivers.aws.errors import AwsError

    try:
        answer = ("credentials", *get_credentials())
        if twice:
            before = len(stub.running().requests)
            get_credentials()
            answer += ("fetched again" if len(stub.running().requests) > before else "kept",)
        return answer
    except AwsError as exc:
        return ("none",) if exc.code == "MissingCredentials" else REFUSED
    except Exception as exc:  # not kindling's error: a caller catching AwsError misses it
        return "raised", type(exc).__name__


def kindling_proxy(url: str) -> tuple:
    """What kindling.drivers.aws.connection.Connection decides for a connection to ``url``."""
    from kindling.drivers.aws.proxy import proxy_for
    from kindling.drivers.aws.url import DEFAULT_PORTS, Url

    parts = Url(url)
    try:
        proxy = proxy_for(parts.scheme, parts.hostname, parts.port or DEFAULT_PORTS[parts.scheme])
    except ValueError:
        return REFUSED
    if proxy is None:
        return ("direct",)
    return "http proxy", proxy.host, proxy.port, proxy.authorization


# -- running -----------------------------------------------------------------------------------------

def _answer(case: Case, session) -> Outcome:
    if case.part == "credentials":
        return Outcome(case, botocore_credentials(case.twice), kindling_credentials(case.twice))
    if case.part == "proxies":
        return Outcome(case, botocore_proxy(case.url), kindling_proxy(case.url))
    return Outcome(case, botocore_endpoint(case.service, session), kindling_endpoint(case.service))


def run(part: str) -> list[Outcome]:
    """Every case of ``part``, answered by both; the cases of one environment in it at once."""
    import itertools

    from differential.cases import CASES

    server = stub.running()
    outcomes = []
    with stub.relative_uri_host(server.url):
        for _, group in itertools.groupby(CASES[part](), key=lambda c: (repr(c.env), repr(c.files), c.twice)):
            group = list(group)
            with environment(group[0], server.url):
                # one botocore session per environment (it reads variables at each client, files once);
                # the grid changes variables only: one session for all of it
                session = _grid_session() if part == "endpoints" else _session() if part == "endpoint settings" \
                    else None
                for case in group:
                    if case.part == "credentials":  # each question from a cold start
                        from kindling.drivers.aws import chain, container

                        chain.reset()
                        container._container_cache.clear()
                    outcomes.append(_answer(case, session))
    return outcomes


_grid: list = []


def _grid_session():
    if not _grid:
        _grid.append(_session())
    return _grid[0]

