"""SigV4 request signing, as botocore's ``SigV4Auth`` signs (and ``S3SigV4Auth`` for S3)."""

import time

from kindling.core.digest import hmac_sha256, sha256
from kindling.drivers.aws.url import Url, canonical_path, canonical_query, host_header

# Headers botocore leaves out of the signature (botocore.auth.SIGNED_HEADERS_BLACKLIST):
# hop-by-hop headers and ones that proxies or tracing may rewrite.
_UNSIGNED_HEADERS = frozenset(
    {
        "baggage",
        "connection",
        "expect",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "traceparent",
        "tracestate",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "x-amzn-trace-id",
    }
)


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac_sha256(key, msg.encode("utf-8"))


def sign(
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes,
    *,
    service: str,
    region: str,
    access_key: str,
    secret_key: str,
    session_token: str | None = None,
    amz_date: str | None = None,
) -> dict[str, str]:
    """Return a new headers dict with SigV4 auth added.

    Adds ``Authorization``, ``X-Amz-Date``, ``X-Amz-Security-Token`` (when a token is
    given; replacing any present) and ``Host`` (computed from the url, without a default
    port, when absent); drops any ``Authorization``/``X-Amz-Date`` already present.
    ``amz_date`` like "20260101T000000Z" for tests; default now (UTC).

    ``url`` must be the wire form: path and query percent-encoded exactly as they will be
    sent. The canonical request is built the way botocore's ``SigV4Auth`` builds it for
    non-S3 services: path normalized and encoded again, query parameters sorted but not
    re-encoded, header values trimmed with inner whitespace runs collapsed, headers
    differing only in case joined with ",", hop-by-hop/tracing headers (and User-Agent)
    left unsigned, ``X-Amz-Content-SHA256`` used as the payload hash when present. A
    caller-supplied ``Date`` header is signed as given (botocore would rewrite it); prefer
    not to send one.

    For ``service="s3"`` the rules are S3's (botocore's ``S3SigV4Auth``): the path is
    signed as sent, neither normalized nor encoded again (an object key may hold ``//``
    or ``..``), and ``X-Amz-Content-SHA256`` (which S3 requires) is added with the body's
    hash when the caller did not set it.
    """
    if amz_date is None:
        amz_date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    drop = {"authorization", "x-amz-date"}
    if session_token:
        drop.add("x-amz-security-token")
    out = {name: value for name, value in headers.items() if name.lower() not in drop}
    out["X-Amz-Date"] = amz_date
    if session_token:
        out["X-Amz-Security-Token"] = session_token
    s3 = service == "s3"
    if s3 and not any(name.lower() == "x-amz-content-sha256" for name in out):
        out["X-Amz-Content-SHA256"] = sha256(body).hexdigest()

    parts = Url(url)
    signed: dict[str, list[str]] = {}
    payload_hash = None
    for name, value in out.items():
        lname = name.lower()
        if lname == "x-amz-content-sha256" and payload_hash is None:
            payload_hash = value
        if lname not in _UNSIGNED_HEADERS:
            signed.setdefault(lname, []).append(" ".join(value.split()))
    if "host" not in signed:
        host = host_header(parts.scheme, parts.hostname, parts.port)
        out["Host"] = host
        signed["host"] = [host]
    names = sorted(signed)
    signed_names = ";".join(names)
    if payload_hash is None:
        payload_hash = sha256(body).hexdigest()

    canonical_request = "\n".join(
        (
            method.upper(),
            (parts.path or "/") if s3 else canonical_path(parts.path),
            canonical_query(parts.query),
            "".join(f"{name}:{','.join(signed[name])}\n" for name in names),
            signed_names,
            payload_hash,
        )
    )
    date = amz_date[:8]
    scope = f"{date}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join(
        (
            "AWS4-HMAC-SHA256",
            amz_date,
            scope,
            sha256(canonical_request.encode("utf-8")).hexdigest(),
        )
    )
    key = _hmac(f"AWS4{secret_key}".encode(), date)
    key = _hmac(_hmac(_hmac(key, region), service), "aws4_request")
    signature = _hmac(key, string_to_sign).hex()
    out["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
        f"SignedHeaders={signed_names}, Signature={signature}"
    )
    return out
