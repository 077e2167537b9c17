"""EC2 instance metadata credentials, IMDSv2 as botocore fetches them.

A session token first (``PUT /latest/api/token``), then the instance profile's role name
and its credentials with that token. botocore's settings: ``AWS_EC2_METADATA_SERVICE_ENDPOINT``
(else ``http://169.254.169.254``, or ``http://[fd00:ec2::254]`` with
``AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv6``), ``AWS_METADATA_SERVICE_TIMEOUT`` (1 s: off
EC2 nothing answers, and the chain must not hang there) and
``AWS_METADATA_SERVICE_NUM_ATTEMPTS`` (1). A token refused with 403, 404 or 405 falls
back to IMDSv1 unless ``AWS_EC2_METADATA_V1_DISABLED=true``.
"""

import os

from kindling.core.errors import masked_url
from kindling.drivers.aws.errors import AwsError

TOKEN_TTL_SECONDS = 21600
MAX_REPLY_BYTES = 65536
_ROLE_PATH = "/latest/meta-data/iam/security-credentials/"


def endpoint() -> str:
    env = os.environ
    configured = env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT")
    if configured:
        return configured.rstrip("/")
    if env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "").lower() == "ipv6":
        return "http://[fd00:ec2::254]"
    return "http://169.254.169.254"


def instance_credentials(deadline: float | None = None):
    """The instance profile's credentials; AwsError "MissingCredentials" where no metadata
    service answers (not on EC2) or the instance has no role."""
    from kindling.drivers.aws import errors
    from kindling.drivers.aws.connection import request_url
    from kindling.drivers.aws.temporary import Credentials, parse_utc

    env = os.environ
    base = endpoint()
    timeout = float(env.get("AWS_METADATA_SERVICE_TIMEOUT") or 1)
    attempts = max(1, int(env.get("AWS_METADATA_SERVICE_NUM_ATTEMPTS") or 1))
    headers = {"User-Agent": "kindling-aws/1"}

    def call(method: str, path: str, extra: dict[str, str]) -> tuple[int, bytes]:
        last: BaseException | None = None
        for _ in range(attempts):
            try:
                status, _, data = request_url(method, base + path, b"", {**headers, **extra}, timeout=timeout,
                                              deadline=deadline, max_body=MAX_REPLY_BYTES)
            except errors.TRANSPORT_ERRORS as exc:
                last = exc
                continue
            if status >= 500:
                last = AwsError("CredentialsError", f"HTTP {status}")
                continue
            return status, bytes(data)
        raise AwsError("MissingCredentials", f"EC2 instance metadata at {masked_url(base)} did not answer: {last}")

    status, token = call("PUT", "/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL_SECONDS)})
    auth: dict[str, str] = {}
    if status == 200:
        auth = {"X-aws-ec2-metadata-token": token.decode("ascii", "replace").strip()}
    elif status in (403, 404, 405) and env.get("AWS_EC2_METADATA_V1_DISABLED", "").lower() != "true":
        pass  # IMDSv1: no token
    else:
        raise AwsError("CredentialsError",
                       f"EC2 instance metadata at {masked_url(base)} refused a session token: HTTP {status}")
    status, roles = call("GET", _ROLE_PATH, auth)
    role = roles.decode("utf-8", "replace").strip().splitlines()[0].strip() if status == 200 and roles.strip() else ""
    if not role:
        raise AwsError("MissingCredentials", f"EC2 instance metadata at {masked_url(base)}: the instance has no role "
                       f"(HTTP {status})")
    status, data = call("GET", _ROLE_PATH + role, auth)
    from kindling.core import codec

    try:
        doc = codec.loads(data) if status == 200 else {}
        if doc.get("Code", "Success") != "Success":
            raise ValueError(f"Code {doc.get('Code')!r}")
        return Credentials(doc["AccessKeyId"], doc["SecretAccessKey"], doc.get("Token"),
                           expires_at=parse_utc(doc["Expiration"]) if doc.get("Expiration") else None,
                           source=f"EC2 instance metadata (role {role})")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise AwsError("CredentialsError", f"EC2 instance metadata at {masked_url(base)}: no credentials for the role "
                       f"{role!r} (HTTP {status}: {exc})") from exc
