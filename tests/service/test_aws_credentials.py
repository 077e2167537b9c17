"""The credential chain against loopback fakes of its endpoints: IMDSv2, STS
AssumeRoleWithWebIdentity and the container endpoint (EKS Pod Identity's form), each
reached through the real chain (kindling.drivers.aws.client.get_credentials) and then used to
sign a call."""

from __future__ import annotations

import datetime
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kindling.drivers import aws
from kindling.drivers.aws import chain, container
from kindling.drivers.aws.client import get_credentials

CHAIN_ENV = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_EC2_METADATA_V1_DISABLED", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
    "https_proxy",
)


def stamp(seconds_from_now: float) -> str:
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds_from_now)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


class Fake:
    """A loopback HTTP server whose replies come from ``answer(method, path, headers, body)``;
    every request is kept in ``requests``."""

    def __init__(self, answer):
        fake = self
        self.requests: list[tuple[str, str, dict, bytes]] = []

        class Handler(BaseHTTPRequestHandler):
            def _any(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                fake.requests.append((self.command, self.path, headers, body))
                status, reply = answer(self.command, self.path, headers, body)
                data = reply.encode() if isinstance(reply, str) else reply
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = _any

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fakes():
    made: list[Fake] = []

    def make(answer):
        made.append(Fake(answer))
        return made[-1]

    yield make
    for fake in made:
        fake.close()


@pytest.fixture
def no_keys(monkeypatch, tmp_path):
    for name in CHAIN_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")  # botocore reads this one first
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    chain.reset()
    container._container_cache.clear()
    yield monkeypatch
    chain.reset()
    container._container_cache.clear()


def signed_key(fakes, monkeypatch) -> str:
    """Make one DynamoDB call against a loopback fake; the access key its signature names."""
    service = fakes(lambda *a: (200, "{}"))
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", service.url)
    with aws.JsonClient("dynamodb", "DynamoDB_20120810") as client:
        client.call("ListTables", {})
    authorization = service.requests[0][2]["authorization"]
    return authorization.split("Credential=")[1].split("/")[0]


# ------------------------------------------------------------------ IMDSv2


def imds(expiration: str, role: str = "worker-role", token: str = "imds-token-1"):
    def answer(method, path, headers, body):
        if method == "PUT" and path == "/latest/api/token":
            assert headers.get("x-aws-ec2-metadata-token-ttl-seconds") == "21600"
            return 200, token
        if headers.get("x-aws-ec2-metadata-token") != token:
            return 401, ""
        if path == "/latest/meta-data/iam/security-credentials/":
            return 200, role
        if path == f"/latest/meta-data/iam/security-credentials/{role}":
            return 200, ('{"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": "AKIDIMDS", '
                         f'"SecretAccessKey": "secret-imds", "Token": "tok-imds", "Expiration": "{expiration}"}}')
        return 404, ""

    return answer


def test_imdsv2_token_then_role_then_credentials(no_keys, fakes):
    metadata = fakes(imds(stamp(6 * 3600)))
    no_keys.setenv("AWS_EC2_METADATA_DISABLED", "false")
    no_keys.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", metadata.url)
    assert get_credentials() == ("AKIDIMDS", "secret-imds", "tok-imds")
    assert [(m, p) for m, p, _, _ in metadata.requests] == [
        ("PUT", "/latest/api/token"),
        ("GET", "/latest/meta-data/iam/security-credentials/"),
        ("GET", "/latest/meta-data/iam/security-credentials/worker-role"),
    ]
    assert signed_key(fakes, no_keys) == "AKIDIMDS"
    assert len(metadata.requests) == 3  # cached: hours left before they expire


def test_imds_credentials_are_fetched_again_inside_the_refresh_window(no_keys, fakes):
    metadata = fakes(imds(stamp(12 * 60)))  # in the advisory window from the start
    no_keys.setenv("AWS_EC2_METADATA_DISABLED", "false")
    no_keys.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", metadata.url)
    get_credentials()
    get_credentials()
    assert [p for _, p, _, _ in metadata.requests].count("/latest/api/token") == 2


def test_imds_is_not_asked_when_disabled(no_keys, fakes):
    metadata = fakes(imds(stamp(3600)))
    no_keys.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", metadata.url)  # AWS_EC2_METADATA_DISABLED=true
    with pytest.raises(aws.AwsError) as info:
        get_credentials()
    assert info.value.code == "MissingCredentials" and metadata.requests == []


def test_no_metadata_service_is_missing_credentials_naming_every_source(no_keys, fakes):
    gone = fakes(lambda *a: (200, ""))
    url = gone.url
    gone.close()  # nothing listens there now: refused at once
    no_keys.setenv("AWS_EC2_METADATA_DISABLED", "false")
    no_keys.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", url)
    with pytest.raises(aws.AwsError) as info:
        get_credentials()
    err = info.value
    assert err.code == "MissingCredentials"
    for source in ("AWS_ACCESS_KEY_ID", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                   "EC2 instance metadata", url):
        assert source in err.message, source


# ------------------------------------------------------------------ web identity


def sts(expiration: str, role_arn: str = "arn:aws:iam::111122223333:role/worker"):
    def answer(method, path, headers, body):
        form = dict(urllib.parse.parse_qsl(body.decode()))
        if form.get("Action") != "AssumeRoleWithWebIdentity" or form.get("RoleArn") != role_arn:
            return 400, "<ErrorResponse><Error><Code>ValidationError</Code></Error></ErrorResponse>"
        if form.get("WebIdentityToken") == "expired-jwt":
            return 400, ("<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error>"
                         "<Code>ExpiredTokenException</Code><Message>Token expired</Message></Error></ErrorResponse>")
        key = "AKIDWEB" + form["WebIdentityToken"][-1]
        return 200, (
            '<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
            "<AssumeRoleWithWebIdentityResult><Credentials>"
            f"<AccessKeyId>{key}</AccessKeyId><SecretAccessKey>secret-web</SecretAccessKey>"
            f"<SessionToken>tok-web</SessionToken><Expiration>{expiration}</Expiration>"
            "</Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>")

    return answer


def test_web_identity_assumes_the_role_with_the_token_file_unsigned(no_keys, fakes, tmp_path):
    service = fakes(sts(stamp(3600)))
    token = tmp_path / "token"
    token.write_text("jwt-1\n")
    no_keys.setenv("AWS_ENDPOINT_URL_STS", service.url)
    no_keys.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
    no_keys.setenv("AWS_ROLE_ARN", "arn:aws:iam::111122223333:role/worker")
    no_keys.setenv("AWS_ROLE_SESSION_NAME", "pod-a")
    assert get_credentials() == ("AKIDWEB1", "secret-web", "tok-web")
    method, _, headers, body = service.requests[0]
    form = dict(urllib.parse.parse_qsl(body.decode()))
    assert method == "POST" and "authorization" not in headers
    assert (form["WebIdentityToken"], form["RoleSessionName"], form["Version"]) == ("jwt-1", "pod-a", "2011-06-15")
    assert signed_key(fakes, no_keys) == "AKIDWEB1"


def test_web_identity_refresh_reads_the_rotated_token(no_keys, fakes, tmp_path):
    service = fakes(sts(stamp(5 * 60)))  # inside the mandatory window: every call refreshes
    token = tmp_path / "token"
    token.write_text("jwt-1")
    no_keys.setenv("AWS_ENDPOINT_URL_STS", service.url)
    no_keys.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
    no_keys.setenv("AWS_ROLE_ARN", "arn:aws:iam::111122223333:role/worker")
    assert get_credentials()[0] == "AKIDWEB1"
    token.write_text("jwt-2")  # the kubelet rotated it
    assert get_credentials()[0] == "AKIDWEB2"
    assert len(service.requests) == 2


def test_web_identity_refused_says_why(no_keys, fakes, tmp_path, sleeps):
    service = fakes(sts(stamp(3600)))
    token = tmp_path / "token"
    token.write_text("expired-jwt")
    no_keys.setenv("AWS_ENDPOINT_URL_STS", service.url)
    no_keys.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
    no_keys.setenv("AWS_ROLE_ARN", "arn:aws:iam::111122223333:role/worker")
    with pytest.raises(aws.AwsError, match="ExpiredTokenException: Token expired") as info:
        get_credentials()
    assert info.value.code == "CredentialsError" and len(service.requests) == 1  # not retried


def test_web_identity_from_a_profile(no_keys, fakes, tmp_path):
    service = fakes(sts(stamp(3600), role_arn="arn:aws:iam::111122223333:role/from-profile"))
    token = tmp_path / "token"
    token.write_text("jwt-7")
    (tmp_path / "no-config").write_text("[profile eks]\nrole_arn = arn:aws:iam::111122223333:role/from-profile\n"
                                        f"web_identity_token_file = {token}\n")
    no_keys.setenv("AWS_PROFILE", "eks")
    no_keys.setenv("AWS_ENDPOINT_URL_STS", service.url)
    assert get_credentials()[0] == "AKIDWEB7"


# ------------------------------------------------------------------ container endpoint (EKS Pod Identity)


def test_eks_pod_identity_full_uri_with_a_token_file(no_keys, fakes, tmp_path):
    def answer(method, path, headers, body):
        if headers.get("authorization") != "pod-identity-token":
            return 401, ""
        return 200, ('{"AccessKeyId": "AKIDPOD", "SecretAccessKey": "secret-pod", "Token": "tok-pod", '
                     f'"AccountId": "111122223333", "Expiration": "{stamp(6 * 3600)}"}}')

    endpoint = fakes(answer)
    token = tmp_path / "eks-pod-identity-token"
    token.write_text("pod-identity-token\n")
    no_keys.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"{endpoint.url}/v1/credentials")
    no_keys.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", str(token))
    assert get_credentials() == ("AKIDPOD", "secret-pod", "tok-pod")
    assert endpoint.requests[0][:2] == ("GET", "/v1/credentials")
    assert signed_key(fakes, no_keys) == "AKIDPOD"
    assert len(endpoint.requests) == 1  # cached until shortly before they expire


def test_a_profile_s_keys_come_before_the_container_endpoint(no_keys, fakes, tmp_path):
    endpoint = fakes(lambda *a: (200, '{"AccessKeyId": "AKIDPOD", "SecretAccessKey": "s"}'))
    (tmp_path / "no-credentials").write_text("[default]\naws_access_key_id = AKIDFILE\naws_secret_access_key = s\n")
    no_keys.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"{endpoint.url}/v1/credentials")
    assert get_credentials()[0] == "AKIDFILE" and endpoint.requests == []


def test_the_container_endpoint_is_never_proxied_but_instance_metadata_is_as_botocore(no_keys, fakes):
    """botocore's ContainerMetadataFetcher ignores HTTP_PROXY; its IMDS fetcher honours it."""
    endpoint = fakes(lambda *a: (200, f'{{"AccessKeyId": "AKIDPOD", "SecretAccessKey": "s", '
                                      f'"Expiration": "{stamp(3600)}"}}'))
    proxied = []
    proxy = fakes(lambda method, path, headers, body: (proxied.append(path), (502, ""))[1])
    no_keys.setenv("HTTP_PROXY", proxy.url)
    no_keys.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"{endpoint.url}/v1/credentials")
    assert get_credentials()[0] == "AKIDPOD" and proxied == []
    no_keys.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI")
    metadata = fakes(imds(stamp(3600)))
    no_keys.setenv("AWS_EC2_METADATA_DISABLED", "false")
    no_keys.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", metadata.url)
    with pytest.raises(aws.AwsError):
        get_credentials()  # the proxy answers 502 for the metadata service
    assert proxied == [f"{metadata.url}/latest/api/token"] and metadata.requests == []
