"""Credentials from the container endpoint: ECS, EKS Pod Identity, Lambda SnapStart.

``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`` (else ``_FULL_URI``) with
``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`` (else ``_TOKEN``; the file is re-read at every
fetch: EKS rotates it), botocore's order. As botocore does, the token is sent over plain HTTP only to a loopback
address, localhost or the container metadata addresses (169.254.170.2, 169.254.170.23,
fd00:ec2::23); over https, to any host.
"""

import os
import time
from _thread import allocate_lock  # threading.Lock without importing threading

from kindling.core import codec  # codec.loads is rebound by codec.use_orjson()
from kindling.core.errors import masked_url
from kindling.core.policy import Retry
from kindling.drivers.aws import errors
from kindling.drivers.aws.connection import Connection
from kindling.drivers.aws.errors import AwsError, DeadlineExceeded, ResponseTooLarge
from kindling.drivers.aws.temporary import ADVISORY_REFRESH, parse_utc, refresh_due
from kindling.drivers.aws.url import DEFAULT_PORTS, Url, host_header, is_loopback

# botocore's ContainerMetadataFetcher: over plain HTTP the authorization token goes only to
# a loopback address or one of these hosts; over https, anywhere.
_CONTAINER_HOSTS = ("169.254.170.2", "169.254.170.23", "fd00:ec2::23", "localhost")
# where AWS_CONTAINER_CREDENTIALS_RELATIVE_URI's path is fetched from (ECS)
RELATIVE_URI_BASE = "http://169.254.170.2"
# (uri, token) -> (credentials, when they expire): fetched again on botocore's windows (kindling.drivers.aws.temporary)
_container_cache: dict[tuple[str, str], tuple[tuple[str, str, str | None], float]] = {}
_container_lock = allocate_lock()
RETRY = Retry(3, base=0.05, jitter=False)
"""Three tries at the endpoint, 50 ms and 100 ms apart, none started past the deadline."""
MAX_CREDENTIALS_BYTES = 65536  # the endpoint's JSON is ~1.5 KB: four short fields


def container_credentials(uri: str, deadline: float | None = None) -> tuple[str, str, str | None]:
    """Credentials from the container endpoint, cached and fetched again as botocore does: from
    15 minutes before they expire on every call, keeping them if that fails; from 10 minutes
    before, the fetch must succeed."""
    parts = Url(uri)
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise AwsError("CredentialsError", f"unsupported container credentials URI {masked_url(uri)!r}")
    if parts.scheme == "http" and not (parts.hostname in _CONTAINER_HOSTS or is_loopback(parts.hostname)):
        raise AwsError(
            "CredentialsError",
            f"unsupported host {parts.hostname!r} in container credentials URI {masked_url(uri)!r}: over plain HTTP, "
            f"credentials are fetched only from a loopback address or one of {', '.join(_CONTAINER_HOSTS)}",
        )
    env = os.environ
    token_file = env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
    if token_file is not None:  # the file over the variable, as botocore
        try:
            with open(token_file) as f:
                # a trailing line break (an editor's, echo's) is no part of the token: stripped
                # (botocore refuses such a file)
                token: str | None = f.read().strip()
        except OSError as exc:
            raise AwsError("CredentialsError", f"cannot read {token_file}: {exc}") from exc
    else:
        token = env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN")
    if token and ("\r" in token or "\n" in token):  # as botocore: no header injection through the token
        raise AwsError("CredentialsError", "the container authorization token holds a line break")
    key = (uri, token or "")
    if not errors.acquire(_container_lock, deadline):  # another thread is fetching them
        raise AwsError("DeadlineExceeded", f"container credentials from {masked_url(uri)}: the deadline passed", 0,
                       True)
    try:
        return _fetch_container_credentials(uri, parts, token, key, deadline)
    finally:
        _container_lock.release()


def _fetch_container_credentials(
    uri: str, parts: Url, token: str | None, key: tuple[str, str], deadline: float | None
) -> tuple[str, str, str | None]:
    cached = _container_cache.get(key)
    due = refresh_due(cached[1], time.time()) if cached is not None else "mandatory"
    if cached is not None and due == "fresh":
        return cached[0]
    try:
        return _fetch(uri, parts, token, key, deadline)
    except AwsError:
        if cached is not None and due == "advisory":
            return cached[0]  # still valid for 10 minutes or more: try again next call, as botocore
        raise


def _fetch(uri: str, parts: Url, token: str | None, key: tuple[str, str],
           deadline: float | None) -> tuple[str, str, str | None]:
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = {"Authorization": token} if token else {}
    last = ""
    for attempt in RETRY.tries():
        if attempt > 1 and not RETRY.wait(attempt - 1, deadline, errors.sleep):
            raise AwsError("DeadlineExceeded", f"container credentials from {masked_url(uri)}: {last}", 0, True)
        conn = Connection(parts.scheme, parts.hostname, parts.port or DEFAULT_PORTS[parts.scheme], 2.0)
        conn.use_proxy = False  # a link-local or loopback endpoint, never proxied (as botocore)
        host = host_header(parts.scheme, parts.hostname, parts.port)
        try:
            status, _, data = conn.request(
                "GET", target, b"", {"Host": host, **headers}, deadline, MAX_CREDENTIALS_BYTES)
        except ResponseTooLarge as exc:  # not credentials, and would not be on another try
            raise AwsError("CredentialsError", f"container credentials from {masked_url(uri)}: {exc}") from exc
        except DeadlineExceeded as exc:
            raise AwsError("DeadlineExceeded", f"container credentials from {masked_url(uri)}: {exc}", 0, True) from exc
        except errors.TRANSPORT_ERRORS as exc:
            if errors.is_tls_verification_failure(exc):
                raise AwsError("TLSVerificationFailed", f"container credentials from {masked_url(uri)}: {exc}") from exc
            last = f"{type(exc).__name__}: {exc}"
            continue
        finally:
            conn.close()
        if status != 200:
            last = f"HTTP {status}: {data[:200]!r}"
            if status < 500:
                break
            continue
        try:
            doc = codec.loads(data)
            creds = (doc["AccessKeyId"], doc["SecretAccessKey"], doc.get("Token") or None)
            # no Expiration given: due for a refresh after 10 minutes
            expires = parse_utc(doc["Expiration"]) if doc.get("Expiration") else time.time() + 600.0 + ADVISORY_REFRESH
        except (ValueError, KeyError, TypeError) as exc:
            raise AwsError("CredentialsError", f"bad response from {masked_url(uri)}: {exc}") from exc
        _container_cache[key] = (creds, expires)
        return creds
    raise AwsError("CredentialsError", f"container credentials from {masked_url(uri)}: {last}", 0, True)
