"""Region and endpoint of a service, as botocore resolves them.

The order, as in the AWS SDKs: an explicit endpoint; else ``AWS_ENDPOINT_URL_<SERVICE>``
(the service's id as the SDKs spell it: ``DYNAMODB``, ``SQS``, ``S3``, ``SECRETS_MANAGER``,
``SSM``, ``LAMBDA``, ``STS``), then ``AWS_ENDPOINT_URL``, both skipped when
``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true``; else AWS's own endpoint for the region, from
the table :mod:`kindling.aws.endpoint_table` generated from botocore's data: every
partition's DNS suffix (aws, aws-cn, aws-us-gov, aws-iso, aws-iso-b, aws-iso-e, aws-iso-f,
aws-eusc), FIPS (``AWS_USE_FIPS_ENDPOINT=true``) and dual-stack
(``AWS_USE_DUALSTACK_ENDPOINT=true``) endpoints, and the signing region where it is not
the region (``aws-global``). A region no partition lists goes to the partition whose
pattern it matches, else to ``aws``, as botocore does.

Pure but for reading ``os.environ`` (and, outside Lambda, the shared config file for a
region: :mod:`kindling.aws.profiles`, imported only then). No ``re``: the table's region
patterns are matched part by part.
"""

import os

from kindling.aws.errors import AwsError

# The SDKs' service ids, upper-cased with spaces as underscores (botocore's
# AWS_ENDPOINT_URL_<SERVICE_ID>): "Secrets Manager" is SECRETS_MANAGER.
_ENV_NAMES = {"secretsmanager": "SECRETS_MANAGER"}
_TRUE = "true"


class Endpoint:
    """Where a service is called: ``url`` (an S3 URL has no bucket: see :func:`resolve`) and
    the region requests are signed for."""

    __slots__ = ("url", "signing_region", "configured")

    def __init__(self, url: str, signing_region: str, configured: bool = False) -> None:
        self.url, self.signing_region, self.configured = url, signing_region, configured

    def __repr__(self) -> str:
        return f"Endpoint({self.url!r}, signing_region={self.signing_region!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Endpoint) and (self.url, self.signing_region) == (other.url, other.signing_region)

    def __hash__(self) -> int:
        return hash((self.url, self.signing_region))


def resolve_region(region: str | None = None) -> str:
    """``region``, else AWS_REGION, else AWS_DEFAULT_REGION, else the profile's ``region`` in the
    shared config file (read only when the environment names none: never inside Lambda)."""
    env = os.environ
    region = region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if not region:
        from kindling.aws import profiles

        region = profiles.profile_setting("region")
    if not region:
        raise AwsError("MissingRegion", "no region: set AWS_REGION or AWS_DEFAULT_REGION, or a region in "
                       "your AWS profile (~/.aws/config)")
    return region


def env_name(service: str) -> str:
    """The suffix of ``AWS_ENDPOINT_URL_<SERVICE>`` for a service's signing name."""
    return _ENV_NAMES.get(service) or service.upper().replace("-", "_").replace(" ", "_")


def configured_endpoint(service: str, endpoint: str | None = None) -> str | None:
    """Explicit endpoint, else AWS_ENDPOINT_URL_<SERVICE>, else AWS_ENDPOINT_URL, else None."""
    if endpoint:
        return endpoint
    env = os.environ
    if env.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() != _TRUE:
        return env.get(f"AWS_ENDPOINT_URL_{env_name(service)}") or env.get("AWS_ENDPOINT_URL") or None
    return None


def flags() -> tuple[bool, bool]:
    """(fips, dualstack) from AWS_USE_FIPS_ENDPOINT and AWS_USE_DUALSTACK_ENDPOINT."""
    env = os.environ
    return (env.get("AWS_USE_FIPS_ENDPOINT", "").lower() == _TRUE,
            env.get("AWS_USE_DUALSTACK_ENDPOINT", "").lower() == _TRUE)


def _matches(region: str, pattern: tuple) -> bool:
    parts = region.split("-")
    if len(parts) != len(pattern):
        return False
    for part, want in zip(parts, pattern, strict=True):
        if want == "w":
            ok = bool(part) and all(c.isalnum() or c == "_" for c in part)
        elif want == "d":
            ok = part.isdigit() and part.isascii()
        else:
            ok = part in want
        if not ok:
            return False
    return True


def partition_of(region: str) -> str:
    """The partition botocore puts ``region`` in: the one listing it, else the one whose
    pattern it matches, else ``aws``."""
    from kindling.aws.endpoint_table import PARTITIONS

    for name, _, regions in PARTITIONS:
        if region in regions:
            return name
    for name, pattern, _ in PARTITIONS:
        if _matches(region, pattern):
            return name
    return "aws"


def aws_endpoint(service: str, region: str, fips: bool = False, dualstack: bool = False,
                 bucket: str | None = None) -> Endpoint:
    """AWS's own endpoint for ``service`` in ``region``. For S3, ``bucket`` (a name that can
    be a DNS label) goes in front of the host, as virtual-hosted addressing does; without
    one the URL is the bucket-less host that path-style addressing uses. Raises AwsError
    "EndpointResolutionError" where botocore refuses (FIPS for S3 in aws-cn, say)."""
    from kindling.aws.endpoint_table import OVERRIDES, SERVICES

    partition = partition_of(region)
    by_partition = SERVICES.get(service)
    if by_partition is None:
        raise ValueError(f"kindling's endpoint table has no service {service!r}")
    key = (service, region, fips, dualstack)
    entry = OVERRIDES[key] if key in OVERRIDES else by_partition[partition][fips * 2 + dualstack]
    if entry is None:
        wanted = " and ".join(name for name, on in (("FIPS", fips), ("dual-stack", dualstack)) if on)
        raise AwsError("EndpointResolutionError",
                       f"{service} has no {wanted} endpoint in {region} (partition {partition}): "
                       "unset AWS_USE_FIPS_ENDPOINT / AWS_USE_DUALSTACK_ENDPOINT, or set AWS_ENDPOINT_URL_"
                       f"{env_name(service)}")
    url, signing = (entry, "{region}") if isinstance(entry, str) else entry
    url = url.replace("{bucket}.", f"{bucket}." if bucket else "").replace("{region}", region)
    return Endpoint(url, signing.replace("{region}", region))


def resolve(service: str, region: str, endpoint: str | None = None) -> Endpoint:
    """The configured endpoint (see :func:`configured_endpoint`), signed for ``region``, else
    AWS's own for the region under the environment's FIPS and dual-stack settings."""
    configured = configured_endpoint(service, endpoint)
    if configured:
        return Endpoint(configured, region, configured=True)
    return aws_endpoint(service, region, *flags())
