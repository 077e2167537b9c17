"""Web identity credentials: STS AssumeRoleWithWebIdentity, as botocore calls it (EKS IRSA).

The request is unsigned (the token file's JWT is the proof), a query-protocol POST to the
STS endpoint :mod:`kindling.drivers.aws.endpoints` resolves for the region (``AWS_ENDPOINT_URL_STS``
or ``AWS_ENDPOINT_URL`` if set; the global endpoint when no region is configured, as
botocore). The token file is read again at every refresh: the kubelet rotates it.
"""

from kindling.core.errors import masked_url
from kindling.drivers.aws.errors import AwsError

MAX_REPLY_BYTES = 65536  # four short fields and the assumed role's ids
# botocore retries these for web identity: the identity provider was briefly unreachable.
_RETRIED_CODES = frozenset({"IDPCommunicationError", "InvalidIdentityToken", "Throttling"})


def assume_role_with_web_identity(role_arn: str, token_file: str, session_name: str | None = None,
                                  deadline: float | None = None, *, attempts: int = 3, timeout: float = 10.0):
    """Credentials for ``role_arn`` in exchange for the token in ``token_file``."""
    import time

    from kindling.core.policy import Retry
    from kindling.drivers.aws import endpoints, errors
    from kindling.drivers.aws.connection import request_url
    from kindling.drivers.aws.temporary import Credentials, parse_utc
    from kindling.drivers.aws.url import quote

    try:
        with open(token_file) as f:
            token = f.read().strip()
    except OSError as exc:
        raise AwsError("CredentialsError", f"web identity: cannot read {token_file}: {exc}") from exc
    try:
        region = endpoints.resolve_region(None)
    except AwsError:
        region = "aws-global"  # sts.amazonaws.com, as botocore without a region
    url = endpoints.resolve("sts", region).url
    session_name = session_name or f"kindling-{int(time.time() * 1000)}"
    form = {"Action": "AssumeRoleWithWebIdentity", "Version": "2011-06-15", "RoleArn": role_arn,
            "RoleSessionName": session_name, "WebIdentityToken": token}
    body = "&".join(f"{k}={quote(v, safe='')}" for k, v in form.items()).encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8", "User-Agent": "kindling-aws/1"}
    last = ""
    retry = Retry(attempts, base=0.1, jitter=False)  # botocore's web identity waits: 0.1 s, doubling
    for attempt in retry.tries():
        if attempt > 1:
            retry.wait(attempt - 1, None, errors.sleep)
        try:
            status, _, data = request_url("POST", url, body, headers, timeout=timeout, deadline=deadline,
                                          max_body=MAX_REPLY_BYTES)
        except errors.TRANSPORT_ERRORS as exc:
            if errors.is_tls_verification_failure(exc):
                raise AwsError("TLSVerificationFailed", f"web identity at {masked_url(url)}: {exc}") from exc
            last = f"{type(exc).__name__}: {exc}"
            continue
        values = _fields(bytes(data))
        if status == 200:
            try:
                return Credentials(values["AccessKeyId"], values["SecretAccessKey"], values.get("SessionToken"),
                                   expires_at=parse_utc(values["Expiration"]),
                                   source=f"web identity ({role_arn})")
            except (KeyError, ValueError) as exc:
                raise AwsError("CredentialsError",
                               f"web identity: no credentials in the reply from {masked_url(url)}") from exc
        code = values.get("Code", f"HTTP {status}")
        last = f"{code}: {values.get('Message', '')}"
        if status < 500 and code not in _RETRIED_CODES:
            break
    raise AwsError("CredentialsError", f"web identity: AssumeRoleWithWebIdentity for {role_arn} at {masked_url(url)} "
                   f"failed: {last}")


def _fields(xml: bytes) -> dict[str, str]:
    """The leaf elements of an STS reply by local name (Credentials' fields, or Error's Code
    and Message); {} for what is not XML."""
    import xml.etree.ElementTree as ElementTree

    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError:
        return {}
    return {el.tag.rpartition("}")[2]: (el.text or "").strip() for el in root.iter() if len(el) == 0}
