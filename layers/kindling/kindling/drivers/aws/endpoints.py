"""Region and endpoint of a service, as a botocore client resolves them.

The region: ``AWS_DEFAULT_REGION``, else the profile's ``region`` (the shared config file,
or the credentials file), else ``AWS_REGION`` (botocore's own order; ``AWS_REGION``, which
botocore does not read, only where botocore would find no region at all).

The endpoint, as in the AWS SDKs: an explicit endpoint; else, unless
``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`` (or the profile's ``ignore_configured_endpoint_urls``)
is true: ``AWS_ENDPOINT_URL_<SERVICE>`` (the service's id as the SDKs spell it: ``DYNAMODB``,
``SQS``, ``S3``, ``SECRETS_MANAGER``, ``SSM``, ``LAMBDA``, ``STS``), ``AWS_ENDPOINT_URL``, the
service's ``endpoint_url`` in the ``[services name]`` section the profile names with
``services = name``, the profile's ``endpoint_url``; else AWS's own endpoint for the region,
from the table at the end of this module, generated from botocore's data by
infra/endpoints/generate.py: every partition's DNS suffix (aws, aws-cn, aws-us-gov, aws-iso,
aws-iso-b, aws-iso-e, aws-iso-f, aws-eusc), FIPS (``AWS_USE_FIPS_ENDPOINT`` or the profile's
``use_fips_endpoint``) and dual-stack (``AWS_USE_DUALSTACK_ENDPOINT`` or
``use_dualstack_endpoint``) endpoints, refused where botocore refuses them, the signing
region where it is not the region (``aws-global``), S3's global endpoint for us-east-1
(unless ``AWS_S3_US_EAST_1_REGIONAL_ENDPOINT=regional``) and STS's for the legacy regions
with ``AWS_STS_REGIONAL_ENDPOINTS=legacy`` (or the profile's ``sts_regional_endpoints``). A
region no partition lists goes to the partition whose pattern it matches, else to ``aws``,
as botocore does.

Pure but for reading ``os.environ`` and, where a profile is named or a shared file is there
(never inside Lambda), the profile (:mod:`kindling.drivers.aws.profiles`, imported only then). No
``re``: the table's region patterns are matched part by part.
"""

import os

from kindling.drivers.aws.errors import AwsError

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
        from kindling.core.errors import masked_url

        return f"Endpoint({masked_url(self.url)!r}, signing_region={self.signing_region!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Endpoint) and (self.url, self.signing_region) == (other.url, other.signing_region)

    def __hash__(self) -> int:
        return hash((self.url, self.signing_region))


def _profile() -> dict[str, str]:
    """The settings of the profile the environment picks, {} where there can be none: no
    profile named and neither shared file there (inside Lambda: two ``stat`` calls, nothing
    imported). AwsError where a named profile is missing or a file cannot be parsed."""
    env = os.environ
    if not (env.get("AWS_DEFAULT_PROFILE") or env.get("AWS_PROFILE")):
        files = (env.get("AWS_CONFIG_FILE") or "~/.aws/config", env.get("AWS_SHARED_CREDENTIALS_FILE")
                 or "~/.aws/credentials")
        if not any(os.path.isfile(os.path.expanduser(os.path.expandvars(path))) for path in files):
            return {}
    from kindling.drivers.aws import profiles

    return profiles.scoped()


def setting(variable: str, key: str, default: str = "") -> str:
    """A setting as botocore reads it: the variable when it is set (even empty), else the
    profile's ``key``, else ``default``."""
    value = os.environ.get(variable)
    if value is None:
        value = _profile().get(key)
    return default if value is None else value


def resolve_region(region: str | None = None) -> str:
    """``region``, else AWS_DEFAULT_REGION, else the profile's ``region``, else AWS_REGION."""
    env = os.environ
    region = region or env.get("AWS_DEFAULT_REGION") or _profile().get("region") or env.get("AWS_REGION")
    if not region:
        raise AwsError("MissingRegion", "no region: set AWS_DEFAULT_REGION (or AWS_REGION), or a region in "
                       "your AWS profile (~/.aws/config)")
    return region


def env_name(service: str) -> str:
    """The suffix of ``AWS_ENDPOINT_URL_<SERVICE>`` for a service's signing name."""
    return _ENV_NAMES.get(service) or service.upper().replace("-", "_").replace(" ", "_")


def configured_endpoint(service: str, endpoint: str | None = None) -> str | None:
    """Explicit endpoint, else (unless configured endpoints are ignored) AWS_ENDPOINT_URL_<SERVICE>,
    AWS_ENDPOINT_URL, the profile's [services] section, the profile's endpoint_url; else None."""
    if endpoint:
        return endpoint
    if setting("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "ignore_configured_endpoint_urls").lower() == _TRUE:
        return None
    env = os.environ
    found = env.get(f"AWS_ENDPOINT_URL_{env_name(service)}") or env.get("AWS_ENDPOINT_URL")
    if found:
        return found
    profile = _profile()
    if "services" in profile:
        from kindling.drivers.aws import profiles

        section = profiles.services_section(profile["services"])
        if not section:
            raise AwsError("CredentialsError", f"the profile names the services section {profile['services']!r}, "
                           f"which {profiles.config_path()} does not have")
        found = section.get(env_name(service).lower(), {}).get("endpoint_url")
    return found or profile.get("endpoint_url") or None


def flags() -> tuple[bool, bool]:
    """(fips, dualstack): AWS_USE_FIPS_ENDPOINT and AWS_USE_DUALSTACK_ENDPOINT, else the
    profile's use_fips_endpoint and use_dualstack_endpoint."""
    return (setting("AWS_USE_FIPS_ENDPOINT", "use_fips_endpoint").lower() == _TRUE,
            setting("AWS_USE_DUALSTACK_ENDPOINT", "use_dualstack_endpoint").lower() == _TRUE)


def service_setting(service: str) -> str | None:
    """The setting that moves a service to or from its global endpoint: S3's
    us_east_1_regional_endpoint ("legacy" by default), STS's sts_regional_endpoints
    ("regional" by default); None for the other services."""
    if service == "s3":
        value = os.environ.get("AWS_S3_US_EAST_1_REGIONAL_ENDPOINT")
        block = _profile().get("s3") if value is None else None
        if block:  # the profile's nested "s3 =" settings
            from kindling.drivers.aws import profiles

            value = profiles.nested(block).get("us_east_1_regional_endpoint")
        return value or "legacy"
    if service == "sts":
        return setting("AWS_STS_REGIONAL_ENDPOINTS", "sts_regional_endpoints") or "regional"
    return None


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
    for name, _, regions in PARTITIONS:
        if region in regions:
            return name
    for name, pattern, _ in PARTITIONS:
        if _matches(region, pattern):
            return name
    return "aws"


def aws_endpoint(service: str, region: str, fips: bool = False, dualstack: bool = False,
                 bucket: str | None = None, service_setting: str | None = None) -> Endpoint:
    """AWS's own endpoint for ``service`` in ``region``. For S3, ``bucket`` (a name that can
    be a DNS label) goes in front of the host, as virtual-hosted addressing does; without
    one the URL is the bucket-less host that path-style addressing uses. ``service_setting``:
    S3's us_east_1_regional_endpoint or STS's sts_regional_endpoints (botocore's default when
    None). Raises AwsError "EndpointResolutionError" where botocore refuses (FIPS for S3 in
    aws-cn, dual-stack in aws-iso-e, say)."""
    partition = partition_of(region)
    by_partition = SERVICES.get(service)
    if by_partition is None:
        raise ValueError(f"kindling's endpoint table has no service {service!r}")
    key = (service, region, fips, dualstack)
    if (service, service_setting, *key[1:]) in SETTING_OVERRIDES:
        entry = SETTING_OVERRIDES[(service, service_setting, *key[1:])]
    else:
        entry = OVERRIDES[key] if key in OVERRIDES else by_partition[partition][fips * 2 + dualstack]
    if entry is None:
        wanted = " and ".join(name for name, on in (("FIPS", fips), ("dual-stack", dualstack)) if on)
        raise AwsError("EndpointResolutionError",
                       f"{service} has no {wanted} endpoint in {region} (partition {partition}): "
                       "unset AWS_USE_FIPS_ENDPOINT / AWS_USE_DUALSTACK_ENDPOINT (or use_fips_endpoint / "
                       f"use_dualstack_endpoint in the profile), or set AWS_ENDPOINT_URL_{env_name(service)}")
    url, signing = (entry, "{region}") if isinstance(entry, str) else entry
    url = url.replace("{bucket}.", f"{bucket}." if bucket else "").replace("{region}", region)
    return Endpoint(url, signing.replace("{region}", region))


def resolve(service: str, region: str, endpoint: str | None = None) -> Endpoint:
    """The configured endpoint (see :func:`configured_endpoint`), signed for ``region``, else
    AWS's own for the region under the environment's and the profile's settings."""
    configured = configured_endpoint(service, endpoint)
    if configured:
        return Endpoint(configured, region, configured=True)
    return aws_endpoint(service, region, *flags(), service_setting=service_setting(service))


# -- The table: generated by infra/endpoints/generate.py from botocore 1.43.127's partitions.json and endpoint
# rulesets, for the services kindling calls. Do not edit below this line: run the script.

# (partition, its region pattern: one entry per hyphen-separated part, the literal choices
# or "w" (\w+) or "d" (\d+), the regions it lists)
PARTITIONS = (('aws', (('us', 'eu', 'ap', 'sa', 'ca', 'me', 'af', 'il', 'mx'), 'w', 'd'),
  ('af-south-1', 'ap-east-1', 'ap-east-2', 'ap-northeast-1', 'ap-northeast-2', 'ap-northeast-3', 'ap-south-1',
   'ap-south-2', 'ap-southeast-1', 'ap-southeast-2', 'ap-southeast-3', 'ap-southeast-4', 'ap-southeast-5',
   'ap-southeast-6', 'ap-southeast-7', 'aws-global', 'ca-central-1', 'ca-west-1', 'eu-central-1',
   'eu-central-2', 'eu-north-1', 'eu-south-1', 'eu-south-2', 'eu-west-1', 'eu-west-2', 'eu-west-3',
   'il-central-1', 'me-central-1', 'me-south-1', 'me-west-1', 'mx-central-1', 'sa-east-1', 'sa-west-1',
   'us-east-1', 'us-east-2', 'us-west-1', 'us-west-2')),
 ('aws-cn', (('cn',), 'w', 'd'), ('aws-cn-global', 'cn-north-1', 'cn-northwest-1')),
 ('aws-eusc', (('eusc',), ('de',), 'w', 'd'), ('eusc-de-east-1',)),
 ('aws-iso', (('us',), ('iso',), 'w', 'd'), ('aws-iso-global', 'us-iso-east-1', 'us-iso-west-1')),
 ('aws-iso-b', (('us',), ('isob',), 'w', 'd'), ('aws-iso-b-global', 'us-isob-east-1', 'us-isob-west-1')),
 ('aws-iso-e', (('eu',), ('isoe',), 'w', 'd'), ('aws-iso-e-global', 'eu-isoe-west-1')),
 ('aws-iso-f', (('us',), ('isof',), 'w', 'd'), ('aws-iso-f-global', 'us-isof-east-1', 'us-isof-south-1')),
 ('aws-us-gov', (('us',), ('gov',), 'w', 'd'), ('aws-us-gov-global', 'us-gov-east-1', 'us-gov-west-1')))

# service -> partition -> the URL template for each of (fips, dualstack) = (off, off), (off, on),
# (on, off), (on, on); (URL template, signing region) where the signing region is not the
# region itself; None where botocore refuses the combination.
SERVICES = {'dynamodb': {'aws': ('https://dynamodb.{region}.amazonaws.com',
                      'https://dynamodb.{region}.api.aws',
                      'https://dynamodb-fips.{region}.amazonaws.com',
                      'https://dynamodb-fips.{region}.api.aws'),
              'aws-cn': ('https://dynamodb.{region}.amazonaws.com.cn',
                         'https://dynamodb.{region}.api.amazonwebservices.com.cn',
                         'https://dynamodb-fips.{region}.amazonaws.com.cn',
                         'https://dynamodb-fips.{region}.api.amazonwebservices.com.cn'),
              'aws-eusc': ('https://dynamodb.{region}.amazonaws.eu',
                           'https://dynamodb.{region}.api.amazonwebservices.eu',
                           'https://dynamodb-fips.{region}.amazonaws.eu',
                           'https://dynamodb-fips.{region}.api.amazonwebservices.eu'),
              'aws-iso': ('https://dynamodb.{region}.c2s.ic.gov',
                          'https://dynamodb.{region}.api.aws.ic.gov',
                          'https://dynamodb-fips.{region}.c2s.ic.gov',
                          'https://dynamodb-fips.{region}.api.aws.ic.gov'),
              'aws-iso-b': ('https://dynamodb.{region}.sc2s.sgov.gov',
                            'https://dynamodb.{region}.api.aws.scloud',
                            'https://dynamodb-fips.{region}.sc2s.sgov.gov',
                            'https://dynamodb-fips.{region}.api.aws.scloud'),
              'aws-iso-e': ('https://dynamodb.{region}.cloud.adc-e.uk',
                            None,
                            'https://dynamodb-fips.{region}.cloud.adc-e.uk',
                            None),
              'aws-iso-f': ('https://dynamodb.{region}.csp.hci.ic.gov',
                            None,
                            'https://dynamodb-fips.{region}.csp.hci.ic.gov',
                            None),
              'aws-us-gov': ('https://dynamodb.{region}.amazonaws.com',
                             'https://dynamodb.{region}.api.aws',
                             'https://dynamodb.{region}.amazonaws.com',
                             'https://dynamodb-fips.{region}.api.aws')},
 'lambda': {'aws': ('https://lambda.{region}.amazonaws.com',
                    'https://lambda.{region}.api.aws',
                    'https://lambda-fips.{region}.amazonaws.com',
                    'https://lambda-fips.{region}.api.aws'),
            'aws-cn': ('https://lambda.{region}.amazonaws.com.cn',
                       'https://lambda.{region}.api.amazonwebservices.com.cn',
                       'https://lambda-fips.{region}.amazonaws.com.cn',
                       'https://lambda-fips.{region}.api.amazonwebservices.com.cn'),
            'aws-eusc': ('https://lambda.{region}.amazonaws.eu',
                         'https://lambda.{region}.api.amazonwebservices.eu',
                         'https://lambda-fips.{region}.amazonaws.eu',
                         'https://lambda-fips.{region}.api.amazonwebservices.eu'),
            'aws-iso': ('https://lambda.{region}.c2s.ic.gov',
                        'https://lambda.{region}.api.aws.ic.gov',
                        'https://lambda-fips.{region}.c2s.ic.gov',
                        'https://lambda-fips.{region}.api.aws.ic.gov'),
            'aws-iso-b': ('https://lambda.{region}.sc2s.sgov.gov',
                          'https://lambda.{region}.api.aws.scloud',
                          'https://lambda-fips.{region}.sc2s.sgov.gov',
                          'https://lambda-fips.{region}.api.aws.scloud'),
            'aws-iso-e': ('https://lambda.{region}.cloud.adc-e.uk',
                          None,
                          'https://lambda-fips.{region}.cloud.adc-e.uk',
                          None),
            'aws-iso-f': ('https://lambda.{region}.csp.hci.ic.gov',
                          None,
                          'https://lambda-fips.{region}.csp.hci.ic.gov',
                          None),
            'aws-us-gov': ('https://lambda.{region}.amazonaws.com',
                           'https://lambda.{region}.api.aws',
                           'https://lambda-fips.{region}.amazonaws.com',
                           'https://lambda-fips.{region}.api.aws')},
 's3': {'aws': ('https://{bucket}.s3.{region}.amazonaws.com',
                'https://{bucket}.s3.dualstack.{region}.amazonaws.com',
                'https://{bucket}.s3-fips.{region}.amazonaws.com',
                'https://{bucket}.s3-fips.dualstack.{region}.amazonaws.com'),
        'aws-cn': ('https://{bucket}.s3.{region}.amazonaws.com.cn',
                   'https://{bucket}.s3.dualstack.{region}.amazonaws.com.cn',
                   None,
                   None),
        'aws-eusc': ('https://{bucket}.s3.{region}.amazonaws.eu',
                     'https://{bucket}.s3.dualstack.{region}.amazonaws.eu',
                     'https://{bucket}.s3-fips.{region}.amazonaws.eu',
                     'https://{bucket}.s3-fips.dualstack.{region}.amazonaws.eu'),
        'aws-iso': ('https://{bucket}.s3.{region}.c2s.ic.gov',
                    'https://{bucket}.s3.dualstack.{region}.c2s.ic.gov',
                    'https://{bucket}.s3-fips.{region}.c2s.ic.gov',
                    'https://{bucket}.s3-fips.dualstack.{region}.c2s.ic.gov'),
        'aws-iso-b': ('https://{bucket}.s3.{region}.sc2s.sgov.gov',
                      'https://{bucket}.s3.dualstack.{region}.sc2s.sgov.gov',
                      'https://{bucket}.s3-fips.{region}.sc2s.sgov.gov',
                      'https://{bucket}.s3-fips.dualstack.{region}.sc2s.sgov.gov'),
        'aws-iso-e': ('https://{bucket}.s3.{region}.cloud.adc-e.uk',
                      None,
                      'https://{bucket}.s3-fips.{region}.cloud.adc-e.uk',
                      None),
        'aws-iso-f': ('https://{bucket}.s3.{region}.csp.hci.ic.gov',
                      None,
                      'https://{bucket}.s3-fips.{region}.csp.hci.ic.gov',
                      None),
        'aws-us-gov': ('https://{bucket}.s3.{region}.amazonaws.com',
                       'https://{bucket}.s3.dualstack.{region}.amazonaws.com',
                       'https://{bucket}.s3-fips.{region}.amazonaws.com',
                       'https://{bucket}.s3-fips.dualstack.{region}.amazonaws.com')},
 'secretsmanager': {'aws': ('https://secretsmanager.{region}.amazonaws.com',
                            'https://secretsmanager.{region}.amazonaws.com',
                            'https://secretsmanager-fips.{region}.amazonaws.com',
                            'https://secretsmanager-fips.{region}.amazonaws.com'),
                    'aws-cn': ('https://secretsmanager.{region}.amazonaws.com.cn',
                               'https://secretsmanager.{region}.amazonaws.com.cn',
                               'https://secretsmanager-fips.{region}.amazonaws.com.cn',
                               'https://secretsmanager-fips.{region}.api.amazonwebservices.com.cn'),
                    'aws-eusc': ('https://secretsmanager.{region}.amazonaws.eu',
                                 'https://secretsmanager.{region}.api.amazonwebservices.eu',
                                 'https://secretsmanager-fips.{region}.amazonaws.eu',
                                 'https://secretsmanager-fips.{region}.api.amazonwebservices.eu'),
                    'aws-iso': ('https://secretsmanager.{region}.c2s.ic.gov',
                                'https://secretsmanager.{region}.api.aws.ic.gov',
                                'https://secretsmanager-fips.{region}.c2s.ic.gov',
                                'https://secretsmanager-fips.{region}.api.aws.ic.gov'),
                    'aws-iso-b': ('https://secretsmanager.{region}.sc2s.sgov.gov',
                                  'https://secretsmanager.{region}.api.aws.scloud',
                                  'https://secretsmanager-fips.{region}.sc2s.sgov.gov',
                                  'https://secretsmanager-fips.{region}.api.aws.scloud'),
                    'aws-iso-e': ('https://secretsmanager.{region}.cloud.adc-e.uk',
                                  None,
                                  'https://secretsmanager-fips.{region}.cloud.adc-e.uk',
                                  None),
                    'aws-iso-f': ('https://secretsmanager.{region}.csp.hci.ic.gov',
                                  None,
                                  'https://secretsmanager-fips.{region}.csp.hci.ic.gov',
                                  None),
                    'aws-us-gov': ('https://secretsmanager.{region}.amazonaws.com',
                                   'https://secretsmanager.{region}.amazonaws.com',
                                   'https://secretsmanager-fips.{region}.amazonaws.com',
                                   'https://secretsmanager-fips.{region}.amazonaws.com')},
 'sqs': {'aws': ('https://sqs.{region}.amazonaws.com',
                 'https://sqs.{region}.api.aws',
                 'https://sqs-fips.{region}.amazonaws.com',
                 'https://sqs-fips.{region}.api.aws'),
         'aws-cn': ('https://sqs.{region}.amazonaws.com.cn',
                    'https://sqs.{region}.api.amazonwebservices.com.cn',
                    'https://sqs-fips.{region}.amazonaws.com.cn',
                    'https://sqs-fips.{region}.api.amazonwebservices.com.cn'),
         'aws-eusc': ('https://sqs.{region}.amazonaws.eu',
                      'https://sqs.{region}.api.amazonwebservices.eu',
                      'https://sqs-fips.{region}.amazonaws.eu',
                      'https://sqs-fips.{region}.api.amazonwebservices.eu'),
         'aws-iso': ('https://sqs.{region}.c2s.ic.gov',
                     'https://sqs.{region}.api.aws.ic.gov',
                     'https://sqs-fips.{region}.c2s.ic.gov',
                     'https://sqs-fips.{region}.api.aws.ic.gov'),
         'aws-iso-b': ('https://sqs.{region}.sc2s.sgov.gov',
                       'https://sqs.{region}.api.aws.scloud',
                       'https://sqs-fips.{region}.sc2s.sgov.gov',
                       'https://sqs-fips.{region}.api.aws.scloud'),
         'aws-iso-e': ('https://sqs.{region}.cloud.adc-e.uk',
                       None,
                       'https://sqs-fips.{region}.cloud.adc-e.uk',
                       None),
         'aws-iso-f': ('https://sqs.{region}.csp.hci.ic.gov',
                       None,
                       'https://sqs-fips.{region}.csp.hci.ic.gov',
                       None),
         'aws-us-gov': ('https://sqs.{region}.amazonaws.com',
                        'https://sqs.{region}.api.aws',
                        'https://sqs.{region}.amazonaws.com',
                        'https://sqs-fips.{region}.api.aws')},
 'ssm': {'aws': ('https://ssm.{region}.amazonaws.com',
                 'https://ssm.{region}.api.aws',
                 'https://ssm-fips.{region}.amazonaws.com',
                 'https://ssm-fips.{region}.api.aws'),
         'aws-cn': ('https://ssm.{region}.amazonaws.com.cn',
                    'https://ssm.{region}.api.amazonwebservices.com.cn',
                    'https://ssm-fips.{region}.amazonaws.com.cn',
                    'https://ssm-fips.{region}.api.amazonwebservices.com.cn'),
         'aws-eusc': ('https://ssm.{region}.amazonaws.eu',
                      'https://ssm.{region}.api.amazonwebservices.eu',
                      'https://ssm-fips.{region}.amazonaws.eu',
                      'https://ssm-fips.{region}.api.amazonwebservices.eu'),
         'aws-iso': ('https://ssm.{region}.c2s.ic.gov',
                     'https://ssm.{region}.api.aws.ic.gov',
                     'https://ssm-fips.{region}.c2s.ic.gov',
                     'https://ssm-fips.{region}.api.aws.ic.gov'),
         'aws-iso-b': ('https://ssm.{region}.sc2s.sgov.gov',
                       'https://ssm.{region}.api.aws.scloud',
                       'https://ssm-fips.{region}.sc2s.sgov.gov',
                       'https://ssm-fips.{region}.api.aws.scloud'),
         'aws-iso-e': ('https://ssm.{region}.cloud.adc-e.uk',
                       None,
                       'https://ssm-fips.{region}.cloud.adc-e.uk',
                       None),
         'aws-iso-f': ('https://ssm.{region}.csp.hci.ic.gov',
                       None,
                       'https://ssm-fips.{region}.csp.hci.ic.gov',
                       None),
         'aws-us-gov': ('https://ssm.{region}.amazonaws.com',
                        'https://ssm.{region}.api.aws',
                        'https://ssm.{region}.amazonaws.com',
                        'https://ssm-fips.{region}.api.aws')},
 'sts': {'aws': ('https://sts.{region}.amazonaws.com',
                 'https://sts.{region}.api.aws',
                 'https://sts-fips.{region}.amazonaws.com',
                 'https://sts-fips.{region}.api.aws'),
         'aws-cn': ('https://sts.{region}.amazonaws.com.cn',
                    'https://sts.{region}.api.amazonwebservices.com.cn',
                    'https://sts-fips.{region}.amazonaws.com.cn',
                    'https://sts-fips.{region}.api.amazonwebservices.com.cn'),
         'aws-eusc': ('https://sts.{region}.amazonaws.eu',
                      'https://sts.{region}.api.amazonwebservices.eu',
                      'https://sts-fips.{region}.amazonaws.eu',
                      'https://sts-fips.{region}.api.amazonwebservices.eu'),
         'aws-iso': ('https://sts.{region}.c2s.ic.gov',
                     'https://sts.{region}.api.aws.ic.gov',
                     'https://sts-fips.{region}.c2s.ic.gov',
                     'https://sts-fips.{region}.api.aws.ic.gov'),
         'aws-iso-b': ('https://sts.{region}.sc2s.sgov.gov',
                       'https://sts.{region}.api.aws.scloud',
                       'https://sts-fips.{region}.sc2s.sgov.gov',
                       'https://sts-fips.{region}.api.aws.scloud'),
         'aws-iso-e': ('https://sts.{region}.cloud.adc-e.uk',
                       None,
                       'https://sts-fips.{region}.cloud.adc-e.uk',
                       None),
         'aws-iso-f': ('https://sts.{region}.csp.hci.ic.gov',
                       None,
                       'https://sts-fips.{region}.csp.hci.ic.gov',
                       None),
         'aws-us-gov': ('https://sts.{region}.amazonaws.com',
                        'https://sts.{region}.api.aws',
                        'https://sts.{region}.amazonaws.com',
                        'https://sts-fips.{region}.api.aws')}}

# (service, region, fips, dualstack) -> what a listed region gets instead of its partition's template
OVERRIDES = {('dynamodb', 'aws-iso-e-global', False, True): 'https://dynamodb.{region}.api.cloud-aws.adc-e.uk',
 ('dynamodb', 'aws-iso-e-global', True, True): 'https://dynamodb-fips.{region}.api.cloud-aws.adc-e.uk',
 ('dynamodb', 'aws-iso-f-global', False, True): 'https://dynamodb.{region}.api.aws.hci.ic.gov',
 ('dynamodb', 'aws-iso-f-global', True, True): 'https://dynamodb-fips.{region}.api.aws.hci.ic.gov',
 ('lambda', 'aws-iso-e-global', False, True): 'https://lambda.{region}.api.cloud-aws.adc-e.uk',
 ('lambda', 'aws-iso-e-global', True, True): 'https://lambda-fips.{region}.api.cloud-aws.adc-e.uk',
 ('lambda', 'aws-iso-f-global', False, True): 'https://lambda.{region}.api.aws.hci.ic.gov',
 ('lambda', 'aws-iso-f-global', True, True): 'https://lambda-fips.{region}.api.aws.hci.ic.gov',
 ('lambda', 'eu-isoe-west-1', False, True): 'https://lambda.{region}.api.cloud-aws.adc-e.uk',
 ('lambda', 'us-isof-east-1', False, True): 'https://lambda.{region}.api.aws.hci.ic.gov',
 ('lambda', 'us-isof-south-1', False, True): 'https://lambda.{region}.api.aws.hci.ic.gov',
 ('s3', 'aws-global', False, False): ('https://{bucket}.s3.amazonaws.com', 'us-east-1'),
 ('s3', 'aws-global', False, True): ('https://{bucket}.s3.dualstack.us-east-1.amazonaws.com', 'us-east-1'),
 ('s3', 'aws-global', True, False): ('https://{bucket}.s3-fips.us-east-1.amazonaws.com', 'us-east-1'),
 ('s3', 'aws-global', True, True): ('https://{bucket}.s3-fips.dualstack.us-east-1.amazonaws.com',
                                    'us-east-1'),
 ('s3', 'aws-iso-e-global', False, True): 'https://{bucket}.s3.dualstack.{region}.cloud.adc-e.uk',
 ('s3', 'aws-iso-e-global', True, True): 'https://{bucket}.s3-fips.dualstack.{region}.cloud.adc-e.uk',
 ('s3', 'aws-iso-f-global', False, True): 'https://{bucket}.s3.dualstack.{region}.csp.hci.ic.gov',
 ('s3', 'aws-iso-f-global', True, True): 'https://{bucket}.s3-fips.dualstack.{region}.csp.hci.ic.gov',
 ('s3', 'us-east-1', False, False): 'https://{bucket}.s3.amazonaws.com',
 ('secretsmanager', 'aws-iso-e-global', False, True): 'https://secretsmanager.{region}.api.cloud-aws.adc-e.uk',
 ('secretsmanager', 'aws-iso-e-global', True, True): 'https://secretsmanager-fips.{region}.api.cloud-aws.adc-e.uk',
 ('secretsmanager', 'aws-iso-f-global', False, True): 'https://secretsmanager.{region}.api.aws.hci.ic.gov',
 ('secretsmanager', 'aws-iso-f-global', True, True): 'https://secretsmanager-fips.{region}.api.aws.hci.ic.gov',
 ('sqs', 'aws-iso-e-global', False, True): 'https://sqs.{region}.api.cloud-aws.adc-e.uk',
 ('sqs', 'aws-iso-e-global', True, True): 'https://sqs-fips.{region}.api.cloud-aws.adc-e.uk',
 ('sqs', 'aws-iso-f-global', False, True): 'https://sqs.{region}.api.aws.hci.ic.gov',
 ('sqs', 'aws-iso-f-global', True, True): 'https://sqs-fips.{region}.api.aws.hci.ic.gov',
 ('ssm', 'aws-iso-e-global', False, True): 'https://ssm.{region}.api.cloud-aws.adc-e.uk',
 ('ssm', 'aws-iso-e-global', True, True): 'https://ssm-fips.{region}.api.cloud-aws.adc-e.uk',
 ('ssm', 'aws-iso-f-global', False, True): 'https://ssm.{region}.api.aws.hci.ic.gov',
 ('ssm', 'aws-iso-f-global', True, True): 'https://ssm-fips.{region}.api.aws.hci.ic.gov',
 ('sts', 'aws-global', False, False): ('https://sts.amazonaws.com', 'us-east-1'),
 ('sts', 'aws-global', False, True): ('https://sts.{region}.api.aws', 'us-east-1'),
 ('sts', 'aws-global', True, False): ('https://sts-fips.{region}.amazonaws.com', 'us-east-1'),
 ('sts', 'aws-global', True, True): ('https://sts-fips.{region}.api.aws', 'us-east-1'),
 ('sts', 'aws-iso-e-global', False, True): 'https://sts.{region}.api.cloud-aws.adc-e.uk',
 ('sts', 'aws-iso-e-global', True, True): 'https://sts-fips.{region}.api.cloud-aws.adc-e.uk',
 ('sts', 'aws-iso-f-global', False, True): 'https://sts.{region}.api.aws.hci.ic.gov',
 ('sts', 'aws-iso-f-global', True, True): 'https://sts-fips.{region}.api.aws.hci.ic.gov'}

# (service, setting, region, fips, dualstack) -> what a listed region gets instead under the setting that is
# not botocore's default: s3_us_east_1_regional_endpoint = regional, sts_regional_endpoints = legacy
SETTING_OVERRIDES = {('s3', 'regional', 'us-east-1', False, False): 'https://{bucket}.s3.{region}.amazonaws.com',
 ('sts', 'legacy', 'ap-northeast-1', False, False): ('https://sts.amazonaws.com', 'us-east-1'),
 ('sts', 'legacy', 'ap-south-1', False, False): ('https://sts.amazonaws.com', 'us-east-1'),
 ('sts', 'legacy', 'ap-southeast-1', False, False): ('https://sts.amazonaws.com', 'us-east-1'),
 ('sts', 'legacy', 'ap-southeast-2', False, False): ('https://sts.amazonaws.com', 'us-east-1'),
 ('sts', 'legacy', 'ca-central-1', False, False): ('https://sts.amazonaws.com', 'us-east-1'),
 ('sts', 'legacy', 'eu-central-1', False, False): ('https://sts.amazonaws.com', 'us-east-1'),
 ('sts', 'legacy', 'eu-north-1', False, False): ('https://sts.amazonaws.com', 'us-east-1'),
 ('sts', 'legacy', 'eu-west-1', False, False): ('https://sts.amazonaws.com', 'us-east-1'),
 ('sts', 'legacy', 'eu-west-2', False, False): ('https://sts.amazonaws.com', 'us-east-1'),
 ('sts', 'legacy', 'eu-west-3', False, False): ('https://sts.amazonaws.com', 'us-east-1'),
 ('sts', 'legacy', 'sa-east-1', False, False): ('https://sts.amazonaws.com', 'us-east-1'),
 ('sts', 'legacy', 'us-east-1', False, False): 'https://sts.amazonaws.com',
 ('sts', 'legacy', 'us-east-2', False, False): ('https://sts.amazonaws.com', 'us-east-1'),
 ('sts', 'legacy', 'us-west-1', False, False): ('https://sts.amazonaws.com', 'us-east-1'),
 ('sts', 'legacy', 'us-west-2', False, False): ('https://sts.amazonaws.com', 'us-east-1')}
