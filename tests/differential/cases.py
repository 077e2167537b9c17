"""The fixture environments, part by part (see against_botocore.py)."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable

from differential.against_botocore import SERVICES, Case


def d(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


KEYS = {"AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "env-secret"}
DEFAULT_KEYS = d("""
    [default]
    aws_access_key_id = AKIDDEFAULT
    aws_secret_access_key = default-secret
""")
SOURCE_KEYS = d("""
    [source]
    aws_access_key_id = AKIDSOURCE
    aws_secret_access_key = source-secret
""")
ROLE = "arn:aws:iam::123456789012:role/kindling"
STS = {"AWS_ENDPOINT_URL_STS": "{stub}", "AWS_DEFAULT_REGION": "us-east-1"}
PROCESS = f"{sys.executable} {{dir}}/process.py"
PROCESS_SCRIPT = ('import json; print(json.dumps({"Version": 1, "AccessKeyId": "AKIDPROCESS", '
                  '"SecretAccessKey": "process-secret"}))\n')


def credentials() -> list[Case]:
    out: list[Case] = []

    def case(name: str, env: dict | None = None, twice: bool = False, **files: str) -> None:
        out.append(Case("credentials", name, env or {}, files, twice=twice))

    # the environment
    case("environment keys", KEYS)
    case("environment keys and session token", {**KEYS, "AWS_SESSION_TOKEN": "env-token"})
    case("environment keys and AWS_SECURITY_TOKEN", {**KEYS, "AWS_SECURITY_TOKEN": "security-token"})
    case("AWS_SECURITY_TOKEN beside AWS_SESSION_TOKEN",
         {**KEYS, "AWS_SESSION_TOKEN": "env-token", "AWS_SECURITY_TOKEN": "security-token"})
    case("access key id without a secret in the environment", {"AWS_ACCESS_KEY_ID": "AKIDENV"},
         credentials=DEFAULT_KEYS)
    case("secret without an access key id in the environment", {"AWS_SECRET_ACCESS_KEY": "s"},
         credentials=DEFAULT_KEYS)
    case("empty access key id in the environment", {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "s"},
         credentials=DEFAULT_KEYS)
    case("environment keys over the default profile", KEYS, credentials=DEFAULT_KEYS)
    case("environment keys over a named profile", {**KEYS, "AWS_PROFILE": "default"}, credentials=DEFAULT_KEYS)
    case("nothing anywhere")
    # the shared files
    case("credentials file, default profile", credentials=DEFAULT_KEYS)
    case("credentials file with a session token",
         credentials=DEFAULT_KEYS + "aws_session_token = file-token\n")
    case("credentials file: access key id without a secret",
         credentials="[default]\naws_access_key_id = AKIDDEFAULT\n", config=DEFAULT_KEYS)
    case("credentials file: secret without an access key id",
         credentials="[default]\naws_secret_access_key = s\n", config=DEFAULT_KEYS)
    case("credentials file: upper-case keys",
         credentials="[default]\nAWS_ACCESS_KEY_ID = AKIDUPPER\nAWS_SECRET_ACCESS_KEY = upper-secret\n")
    case("credentials file: [ default ] with spaces",
         credentials="[ default ]\naws_access_key_id = AKIDSPACED\naws_secret_access_key = s\n")
    case("credentials file: a duplicate section", credentials=DEFAULT_KEYS + DEFAULT_KEYS)
    case("credentials file: a duplicate key",
         credentials=DEFAULT_KEYS + "aws_access_key_id = AKIDAGAIN\n")
    case("config file, default profile", config=DEFAULT_KEYS)
    case("config file: access key id without a secret", config="[default]\naws_access_key_id = AKIDCONFIG\n")
    case("config file: [ default ] with spaces",
         config="[ default ]\naws_access_key_id = AKIDSPACED\naws_secret_access_key = s\n")
    case("config file: a duplicate section", config=DEFAULT_KEYS + DEFAULT_KEYS)
    case("config file: [profile default] after [default]", config=DEFAULT_KEYS + d("""
        [profile default]
        aws_access_key_id = AKIDPROFILEDEFAULT
        aws_secret_access_key = s
    """))
    case("config file: [profile default] before [default]", config=d("""
        [profile default]
        aws_access_key_id = AKIDPROFILEDEFAULT
        aws_secret_access_key = s
    """) + DEFAULT_KEYS)
    case("config file: a quoted profile name", {"AWS_PROFILE": "my profile"}, config=d("""
        [profile "my profile"]
        aws_access_key_id = AKIDQUOTED
        aws_secret_access_key = s
    """))
    case("config file: a section without the profile prefix", {"AWS_PROFILE": "work"}, config=d("""
        [work]
        aws_access_key_id = AKIDWORK
        aws_secret_access_key = s
    """))
    case("credentials file over config file", credentials=DEFAULT_KEYS, config=d("""
        [default]
        aws_access_key_id = AKIDCONFIG
        aws_secret_access_key = config-secret
    """))
    case("AWS_SHARED_CREDENTIALS_FILE naming $HOME", {"AWS_SHARED_CREDENTIALS_FILE": "$HOME/credentials"},
         credentials=DEFAULT_KEYS)
    case("AWS_CONFIG_FILE under ~", {"AWS_CONFIG_FILE": "~/config"}, config=DEFAULT_KEYS)
    # which profile
    two_profiles = DEFAULT_KEYS + d("""
        [a]
        aws_access_key_id = AKIDA
        aws_secret_access_key = a-secret
        [b]
        aws_access_key_id = AKIDB
        aws_secret_access_key = b-secret
    """)
    case("AWS_PROFILE", {"AWS_PROFILE": "a"}, credentials=two_profiles)
    case("AWS_DEFAULT_PROFILE", {"AWS_DEFAULT_PROFILE": "b"}, credentials=two_profiles)
    case("AWS_DEFAULT_PROFILE beside AWS_PROFILE", {"AWS_PROFILE": "a", "AWS_DEFAULT_PROFILE": "b"},
         credentials=two_profiles)
    case("AWS_PROFILE names a missing profile", {"AWS_PROFILE": "missing"}, credentials=two_profiles)
    case("AWS_DEFAULT_PROFILE names a missing profile beside a present AWS_PROFILE",
         {"AWS_PROFILE": "a", "AWS_DEFAULT_PROFILE": "missing"}, credentials=two_profiles)
    # credential_process
    case("credential_process", config=f"[default]\ncredential_process = {PROCESS}\n", **{"process.py": PROCESS_SCRIPT})
    case("static keys over credential_process", credentials=DEFAULT_KEYS,
         config=f"[default]\ncredential_process = {PROCESS}\n", **{"process.py": PROCESS_SCRIPT})
    case("credential_process in the credentials file", credentials=f"[default]\ncredential_process = {PROCESS}\n",
         **{"process.py": PROCESS_SCRIPT})
    case("credential_process that fails", config=f"[default]\ncredential_process = {PROCESS}\n",
         **{"process.py": "raise SystemExit(3)\n"})
    case("config file keys with a session token", config=DEFAULT_KEYS + "aws_session_token = config-token\n")
    case("an IAM Identity Center profile without a cached token", config=d("""
        [default]
        sso_start_url = https://kindling.awsapps.com/start
        sso_region = us-east-1
        sso_account_id = 123456789012
        sso_role_name = kindling
    """))
    # assume role
    case("role_arn and source_profile", STS, credentials=SOURCE_KEYS,
         config=f"[default]\nrole_arn = {ROLE}\nsource_profile = source\n")
    case("role_arn and source_profile beside static keys", STS, credentials=DEFAULT_KEYS + SOURCE_KEYS,
         config=f"[default]\nrole_arn = {ROLE}\nsource_profile = source\n")
    case("role_arn and source_profile in the credentials file", STS,
         credentials=DEFAULT_KEYS + SOURCE_KEYS + f"role_arn = {ROLE}\n",
         config="[profile source]\nregion = us-east-1\n", **{})
    case("role_arn without a source", STS, credentials=DEFAULT_KEYS, config=f"[default]\nrole_arn = {ROLE}\n")
    case("role_arn with a missing source_profile", STS, config=f"[default]\nrole_arn = {ROLE}\nsource_profile = gone\n")
    case("role_arn with source_profile and credential_source", STS, credentials=SOURCE_KEYS,
         config=f"[default]\nrole_arn = {ROLE}\nsource_profile = source\ncredential_source = Environment\n")
    case("a chain of two roles", STS, credentials=SOURCE_KEYS, config=d(f"""
        [default]
        role_arn = {ROLE}-outer
        source_profile = middle
        [profile middle]
        role_arn = {ROLE}-inner
        source_profile = source
    """))
    case("role_arn with credential_source = Environment and no keys there", STS,
         config=f"[default]\nrole_arn = {ROLE}\ncredential_source = Environment\n")
    # web identity
    web = {**STS, "AWS_WEB_IDENTITY_TOKEN_FILE": "{dir}/jwt", "AWS_ROLE_ARN": ROLE}
    case("web identity: a token file and no role", {**STS, "AWS_WEB_IDENTITY_TOKEN_FILE": "{dir}/jwt"},
         jwt="token-without-a-role", credentials=DEFAULT_KEYS)
    case("web identity: the environment's token file with the profile's role",
         {**STS, "AWS_WEB_IDENTITY_TOKEN_FILE": "{dir}/jwt"}, jwt="token-from-env-file",
         config=f"[default]\nrole_arn = {ROLE}-from-profile\n")
    case("web identity from the environment", web, jwt="token-from-env-file")
    case("web identity from the environment over static keys", web, jwt="token-beside-keys", credentials=DEFAULT_KEYS)
    case("web identity: a role and no token file", {**STS, "AWS_ROLE_ARN": ROLE}, credentials=DEFAULT_KEYS)
    case("web identity: the token file is missing", {**web, "AWS_WEB_IDENTITY_TOKEN_FILE": "{dir}/gone"})
    case("web identity from the profile", STS, jwt="token-from-profile",
         config=f"[default]\nweb_identity_token_file = {{dir}}/jwt\nrole_arn = {ROLE}\n")
    case("web identity profile with a source_profile too", STS, jwt="token-beside-keys", credentials=SOURCE_KEYS,
         config=f"[default]\nweb_identity_token_file = {{dir}}/jwt\nrole_arn = {ROLE}\nsource_profile = source\n")
    # the container endpoint
    full = {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "{stub}/container/full"}
    case("container endpoint", full)
    case("container endpoint with a token", {**full, "AWS_CONTAINER_AUTHORIZATION_TOKEN": "env-token"})
    case("container endpoint with a token file", {**full, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": "{dir}/tok"},
         tok="file-token")
    case("container endpoint: a token file beside a token",
         {**full, "AWS_CONTAINER_AUTHORIZATION_TOKEN": "env-token",
          "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": "{dir}/tok"}, tok="file-token")
    case("container endpoint: a token file ending in a newline",
         {**full, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": "{dir}/tok"}, tok="file-token\n")
    case("container endpoint: a token with a line break", {**full, "AWS_CONTAINER_AUTHORIZATION_TOKEN": "a\nb"})
    case("container endpoint: the token file is missing",
         {**full, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": "{dir}/gone"})
    case("container endpoint: a relative URI", {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/container/relative"})
    case("container endpoint: a relative URI beside a full one",
         {**full, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/container/relative"})
    case("container endpoint after the shared files", full, credentials=DEFAULT_KEYS)
    for minutes in (7, 12, 14, 16, 30):
        case(f"container credentials expiring in {minutes} minutes, asked twice",
             {"AWS_CONTAINER_CREDENTIALS_FULL_URI": f"{{stub}}/container/ttl?ttl={minutes * 60}"}, twice=True)
    # instance metadata
    imds = {"AWS_EC2_METADATA_DISABLED": None, "AWS_EC2_METADATA_SERVICE_ENDPOINT": "{stub}/"}
    case("instance metadata", imds)
    case("instance metadata after the container endpoint", {**imds, **full})
    case("instance metadata disabled", {**imds, "AWS_EC2_METADATA_DISABLED": "true"})
    return out


# -- endpoints ------------------------------------------------------------------------------------------

UNLISTED = {"aws": "us-kindling-7", "aws-cn": "cn-kindling-7", "aws-us-gov": "us-gov-kindling-7",
            "aws-iso": "us-iso-kindling-7", "aws-iso-b": "us-isob-kindling-7", "aws-iso-e": "eu-isoe-kindling-7",
            "aws-iso-f": "us-isof-kindling-7", "aws-eusc": "eusc-de-kindling-7"}
FLAGS = ((False, False), (False, True), (True, False), (True, True))


def regions() -> dict[str, list[str]]:
    """Every region botocore lists by partition (its global pseudo-regions too), and one per
    partition that none lists yet."""
    import botocore.loaders

    partitions = botocore.loaders.create_loader().load_data("partitions")["partitions"]
    return {p["id"]: [*p["regions"], UNLISTED[p["id"]]] for p in partitions}


# Every service, FIPS and dual-stack on and off, in each partition's first region, its global
# pseudo-region and one it does not list yet; STS and S3 also in the aws regions their rules
# name (us-east-1, a legacy STS region, a later one). tests/unit/test_aws_endpoints.py takes
# every listed region through the same rules botocore's clients apply.
SPECIAL = {"us-east-1", "eu-west-1", "ap-east-1"}


def endpoints() -> list[Case]:
    out = []
    for listed in regions().values():
        sample = {listed[0], listed[-1], *(r for r in listed if r.endswith("global"))}
        for region in listed:
            for fips, dualstack in FLAGS:
                env = {**KEYS, "AWS_DEFAULT_REGION": region, "AWS_USE_FIPS_ENDPOINT": str(fips).lower(),
                       "AWS_USE_DUALSTACK_ENDPOINT": str(dualstack).lower()}
                flags = "+".join(n for n, on in (("FIPS", fips), ("dual-stack", dualstack)) if on) or "plain"
                for service in SERVICES:
                    if region in sample or region in SPECIAL and service in ("sts", "s3"):
                        out.append(Case("endpoints", f"{service} in {region}, {flags}", env, service=service))
    return out


def endpoint_settings() -> list[Case]:
    out = []

    def case(name: str, env: dict | None = None, **files: str) -> None:
        for service in SERVICES:
            out.append(Case("endpoint settings", f"{name}: {service}", {**KEYS, **(env or {})}, files,
                            service=service))

    # region precedence
    case("AWS_REGION only", {"AWS_REGION": "eu-west-1"})
    case("AWS_DEFAULT_REGION only", {"AWS_DEFAULT_REGION": "us-west-2"})
    case("AWS_REGION beside AWS_DEFAULT_REGION", {"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "us-west-2"})
    case("the profile's region", config="[default]\nregion = ap-south-1\n")
    case("AWS_REGION beside the profile's region", {"AWS_REGION": "eu-west-1"},
         config="[default]\nregion = ap-south-1\n")
    case("AWS_DEFAULT_REGION over the profile's region", {"AWS_DEFAULT_REGION": "us-west-2"},
         config="[default]\nregion = ap-south-1\n")
    profiles = "[default]\nregion = ap-south-1\n[profile a]\nregion = eu-west-3\n[profile b]\nregion = sa-east-1\n"
    case("AWS_PROFILE's region", {"AWS_PROFILE": "a"}, config=profiles)
    case("AWS_DEFAULT_PROFILE's region beside AWS_PROFILE", {"AWS_PROFILE": "a", "AWS_DEFAULT_PROFILE": "b"},
         config=profiles)
    case("no region anywhere")
    case("AWS_PROFILE names a profile only the credentials file has", {"AWS_PROFILE": "a"},
         credentials="[a]\naws_access_key_id = A\naws_secret_access_key = s\nregion = eu-north-1\n",
         config="[default]\nregion = ap-south-1\n")
    # FIPS and dual-stack in the config file
    region = {"AWS_DEFAULT_REGION": "us-east-2"}
    case("use_fips_endpoint in the config file", region, config="[default]\nuse_fips_endpoint = true\n")
    case("use_dualstack_endpoint in the config file", region, config="[default]\nuse_dualstack_endpoint = true\n")
    case("both in the config file", region,
         config="[default]\nuse_fips_endpoint = true\nuse_dualstack_endpoint = true\n")
    case("AWS_USE_FIPS_ENDPOINT=false over the config file", {**region, "AWS_USE_FIPS_ENDPOINT": "false"},
         config="[default]\nuse_fips_endpoint = true\n")
    case("AWS_USE_FIPS_ENDPOINT=TRUE", {**region, "AWS_USE_FIPS_ENDPOINT": "TRUE"})
    case("use_fips_endpoint in AWS_PROFILE's profile", {**region, "AWS_PROFILE": "a"},
         config="[default]\n[profile a]\nuse_fips_endpoint = true\n")
    # endpoint URLs
    local = "http://127.0.0.1:4566"
    case("AWS_ENDPOINT_URL", {**region, "AWS_ENDPOINT_URL": local})
    case("AWS_ENDPOINT_URL_<SERVICE>", {**region, "AWS_ENDPOINT_URL": local, **{
        f"AWS_ENDPOINT_URL_{s}": "http://127.0.0.1:4567"
        for s in ("DYNAMODB", "SQS", "SECRETS_MANAGER", "SSM", "LAMBDA", "STS", "S3")}})
    case("endpoint_url in the profile", region, config=f"[default]\nendpoint_url = {local}\n")
    case("AWS_ENDPOINT_URL with a path and a trailing slash", {**region, "AWS_ENDPOINT_URL": f"{local}/prefix/"})
    services = d(f"""
        [default]
        services = local
        endpoint_url = {local}
        [services local]
        dynamodb =
          endpoint_url = http://127.0.0.1:4501
        sqs =
          endpoint_url = http://127.0.0.1:4502
        secrets_manager =
          endpoint_url = http://127.0.0.1:4503
        ssm =
          endpoint_url = http://127.0.0.1:4504
        lambda =
          endpoint_url = http://127.0.0.1:4505
        sts =
          endpoint_url = http://127.0.0.1:4506
        s3 =
          endpoint_url = http://127.0.0.1:4507
    """)
    case("a [services] section", region, config=services)
    case("AWS_ENDPOINT_URL over a [services] section", {**region, "AWS_ENDPOINT_URL": "http://127.0.0.1:4599"},
         config=services)
    case("a [services] section naming only some services", region, config=d("""
        [default]
        services = some
        [services some]
        dynamodb =
          endpoint_url = http://127.0.0.1:4501
    """))
    case("a profile naming a missing [services] section", region, config="[default]\nservices = gone\n")
    case("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS over the config file",
         {**region, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"}, config=services)
    case("ignore_configured_endpoint_urls in the config file", {**region, "AWS_ENDPOINT_URL": local},
         config="[default]\nignore_configured_endpoint_urls = true\n")
    # STS and S3's global endpoints
    for where in ("us-east-1", "eu-west-1", "ap-east-1", "aws-global"):
        legacy = {"AWS_DEFAULT_REGION": where}
        case(f"AWS_STS_REGIONAL_ENDPOINTS=legacy in {where}", {**legacy, "AWS_STS_REGIONAL_ENDPOINTS": "legacy"})
        case(f"sts_regional_endpoints = legacy in the config file, {where}", legacy,
             config="[default]\nsts_regional_endpoints = legacy\n")
    case("AWS_S3_US_EAST_1_REGIONAL_ENDPOINT=regional",
         {"AWS_DEFAULT_REGION": "us-east-1", "AWS_S3_US_EAST_1_REGIONAL_ENDPOINT": "regional"})
    return out


# -- proxies ----------------------------------------------------------------------------------------------

PROXIES = ("http://127.0.0.1:3128", "127.0.0.1:3128", "http://user:pass@127.0.0.1:3128",
           "http://user%40corp:s%3Acret@127.0.0.1:8080", "http://user:@127.0.0.1:3128", "http://user@127.0.0.1:3128",
           "http://[::1]:3128", "http://localhost", "https://127.0.0.1:3129")
NO_PROXY = ("", "*", " *", ".amazonaws.com", "amazonaws.com", "AMAZONAWS.COM", "com", "zonaws.com", "..amazonaws.com",
            "sqs.us-east-1.amazonaws.com", "sqs.us-east-1.amazonaws.com:443", "amazonaws.com:443",
            "127.0.0.1", "127.0.0.1:4566", "127.0.0.1:9999", "localhost", "::1", "[::1]", "[::1]:4566",
            "169.254.169.254", "eu-west-1.amazonaws.com,,", "localhost,127.0.0.1,::1", " 127.0.0.1:4566 ",
            "*.amazonaws.com")
ENDPOINTS = ("https://sqs.us-east-1.amazonaws.com", "https://dynamodb.us-east-1.amazonaws.com:443",
             "https://kindling-bucket.s3.eu-west-1.amazonaws.com", "http://127.0.0.1:4566", "http://localhost:4566",
             "http://[::1]:4566", "http://169.254.169.254")


def _spellings(proxy: str, no_proxy: str) -> dict[str, dict[str, str]]:
    upper = {"HTTPS_PROXY": proxy, "HTTP_PROXY": proxy, "NO_PROXY": no_proxy}
    return {
        "upper case": upper,
        "lower case": {k.lower(): v for k, v in upper.items()},
        "upper case beside empty lower case": {**upper, "https_proxy": "", "http_proxy": "", "no_proxy": ""},
        "lower-case proxy, upper-case NO_PROXY": {"https_proxy": proxy, "http_proxy": proxy, "NO_PROXY": no_proxy},
    }


def proxies() -> list[Case]:
    out = []
    for proxy in PROXIES:
        for no_proxy in NO_PROXY:
            for spelling, env in _spellings(proxy, no_proxy).items():
                for url in ENDPOINTS:
                    name = f"{url} via {proxy!r}, NO_PROXY={no_proxy!r} ({spelling})"
                    out.append(Case("proxies", name, env, url=url))
    return out


CASES: dict[str, Callable[[], list[Case]]] = {
    "credentials": credentials, "endpoints": endpoints, "endpoint settings": endpoint_settings, "proxies": proxies}
