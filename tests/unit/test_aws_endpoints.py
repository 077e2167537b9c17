"""kindling's AWS endpoints are botocore's: every region of every partition (and a region of
each partition that none lists yet), every service kindling's own client calls, FIPS and
dual-stack on and off. botocore is the reference, resolved through its endpoint rulesets as
a client resolves them (infra/endpoints/generate.py's ``resolve``: the client's built-in
parameters and its endpoints.json bridge); tests/differential holds the same against
botocore's clients themselves."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from botocore.endpoint_provider import EndpointProvider
from kindling.drivers.aws import JsonClient
from kindling.drivers.aws.endpoints import aws_endpoint, partition_of

# The services kindling.drivers.aws calls: JSON clients (client.py), S3 (s3.py), Lambda (the
# Valkey kick), STS (web identity credentials).
JSON_SERVICES = ("dynamodb", "sqs", "secretsmanager", "ssm", "lambda", "sts")
FLAGS = ((False, False), (False, True), (True, False), (True, True))
UNLISTED = {"aws": "us-kindling-7", "aws-cn": "cn-kindling-7", "aws-us-gov": "us-gov-kindling-7",
            "aws-iso": "us-iso-kindling-7", "aws-iso-b": "us-isob-kindling-7", "aws-iso-e": "eu-isoe-kindling-7",
            "aws-iso-f": "us-isof-kindling-7", "aws-eusc": "eusc-de-kindling-7"}


def _generator():
    path = Path(__file__).resolve().parents[2] / "infra/endpoints/generate.py"
    spec = importlib.util.spec_from_file_location("endpoints_generate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATE = _generator()


@pytest.fixture(scope="module")
def botocore_data():
    partitions, rulesets = GENERATE.load()
    providers = {service: (service, EndpointProvider(rulesets[service], partitions))
                 for service in (*JSON_SERVICES, "s3")}
    regions = [(p["id"], r) for p in partitions["partitions"] for r in p["regions"]]
    regions += [(pid, region) for pid, region in UNLISTED.items()]
    return partitions, providers, regions


def botocore_endpoint(provider, region, fips, dualstack, Bucket=GENERATE.BUCKET):  # noqa: N803
    service, rules = provider
    return GENERATE.resolve(rules, service, region, fips, dualstack, bucket=Bucket)


def kindling_json_endpoint(monkeypatch, service, region, fips, dualstack):
    monkeypatch.setenv("AWS_USE_FIPS_ENDPOINT", "true" if fips else "false")
    monkeypatch.setenv("AWS_USE_DUALSTACK_ENDPOINT", "true" if dualstack else "false")
    try:
        client = JsonClient(service, "Target", region=region)
    except Exception as exc:  # refused, as botocore refuses
        if getattr(exc, "code", None) == "EndpointResolutionError":
            return None
        raise
    return client.endpoint, client.signing_region


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("AWS_ENDPOINT_URL", "AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT",
                 *(f"AWS_ENDPOINT_URL_{s.upper()}" for s in (*JSON_SERVICES, "s3", "secrets_manager"))):
        monkeypatch.delenv(name, raising=False)


def test_json_services_resolve_as_botocore_in_every_region_with_every_flag(botocore_data, monkeypatch, clean_env):
    _, providers, regions = botocore_data
    compared, mismatches = 0, []
    for service in JSON_SERVICES:
        for _, region in regions:
            for fips, dualstack in FLAGS:
                want = botocore_endpoint(providers[service], region, fips, dualstack)
                got = kindling_json_endpoint(monkeypatch, service, region, fips, dualstack)
                compared += 1
                if got != want:
                    mismatches.append((service, region, fips, dualstack, got, want))
    print(f"compared {len(regions)} regions x {len(JSON_SERVICES)} services x {len(FLAGS)} flag settings"
          f" = {compared}; mismatches: {len(mismatches)}")
    assert compared == len(regions) * len(JSON_SERVICES) * len(FLAGS)
    assert mismatches == [], f"{len(mismatches)} of {compared} differ from botocore, e.g. {mismatches[:5]}"


@pytest.mark.parametrize("bucket", ["kindling-payloads", "payloads.with.dots"])
def test_s3_resolves_as_botocore_in_every_region_with_every_flag(botocore_data, bucket):
    """Virtual-hosted for a bucket that can be a DNS label, path-style (the bucket-less host)
    for one with dots, as botocore does over https."""
    _, providers, regions = botocore_data
    compared, mismatches = 0, []
    for _, region in regions:
        for fips, dualstack in FLAGS:
            want = botocore_endpoint(providers["s3"], region, fips, dualstack, Bucket=bucket)
            if want is not None and "." in bucket:  # path-style: botocore's URL ends in /bucket
                want = (want[0].removesuffix(f"/{bucket}"), want[1])
            try:
                endpoint = aws_endpoint("s3", region, fips, dualstack, bucket=None if "." in bucket else bucket)
                got = (endpoint.url, endpoint.signing_region)
            except Exception as exc:
                assert getattr(exc, "code", None) == "EndpointResolutionError", exc
                got = None
            compared += 1
            if got != want:
                mismatches.append((region, fips, dualstack, got, want))
    print(f"s3 ({bucket}): compared {len(regions)} regions x {len(FLAGS)} flag settings = {compared};"
          f" mismatches: {len(mismatches)}")
    assert mismatches == [], f"{len(mismatches)} of {compared} differ from botocore, e.g. {mismatches[:5]}"


def test_every_partition_is_found_for_its_regions_and_its_pattern(botocore_data):
    import re

    partitions, _, regions = botocore_data
    for pid, region in regions:
        assert partition_of(region) == pid, region
    samples = ["us-east-1", "us-gov-x-1", "usgov-east-1", "us-east-01", "eu-isoe-west-12", "eusc-fr-east-1",
               "xx-east-1", "us-east", "us-iso-east-1-", "us-is_o-east-1", "me-central-1"]
    for sample in samples:
        want = next((p["id"] for p in partitions["partitions"] if sample in p["regions"]), None) or next(
            (p["id"] for p in partitions["partitions"] if re.match(p["regionRegex"], sample)), "aws")
        assert partition_of(sample) == want, sample


def test_the_issue_s_hosts(monkeypatch, clean_env):
    """What the issue saw kindling get wrong: FIPS, dual-stack, GovCloud, ISO and ISO-E hosts."""
    monkeypatch.setenv("AWS_USE_FIPS_ENDPOINT", "true")
    assert JsonClient("dynamodb", "T", region="us-east-1").endpoint == "https://dynamodb-fips.us-east-1.amazonaws.com"
    monkeypatch.delenv("AWS_USE_FIPS_ENDPOINT")
    monkeypatch.setenv("AWS_USE_DUALSTACK_ENDPOINT", "true")
    assert JsonClient("sqs", "T", region="eu-west-1").endpoint == "https://sqs.eu-west-1.api.aws"
    monkeypatch.delenv("AWS_USE_DUALSTACK_ENDPOINT")
    assert JsonClient("dynamodb", "T", region="us-iso-east-1").endpoint == "https://dynamodb.us-iso-east-1.c2s.ic.gov"
    assert JsonClient("sqs", "T", region="eu-isoe-west-1").endpoint == "https://sqs.eu-isoe-west-1.cloud.adc-e.uk"


def test_a_service_endpoint_variable_uses_the_sdks_service_id(monkeypatch, clean_env):
    """AWS_ENDPOINT_URL_SECRETS_MANAGER, as botocore spells Secrets Manager's id."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", "http://127.0.0.1:4566")
    assert JsonClient("secretsmanager", "secretsmanager", region="us-east-1").endpoint == "http://127.0.0.1:4566"
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8000")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9999")
    assert JsonClient("dynamodb", "T", region="us-east-1").endpoint == "http://127.0.0.1:8000"
    assert JsonClient("sqs", "T", region="us-east-1").endpoint == "http://127.0.0.1:9999"
    monkeypatch.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    assert JsonClient("sqs", "T", region="us-east-1").endpoint == "https://sqs.us-east-1.amazonaws.com"


def test_the_generated_table_is_botocore_s():
    """The table in kindling is what infra/endpoints/generate.py makes of the installed botocore."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, str(root / "infra/endpoints/generate.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def config(monkeypatch, tmp_path, clean_env):
    """A config file of the test's own, no credentials file, no region or profile variables."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
                 "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_STS_REGIONAL_ENDPOINTS",
                 "AWS_S3_US_EAST_1_REGIONAL_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "config"
    monkeypatch.setenv("AWS_CONFIG_FILE", str(path))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    return path


def test_the_region_is_botocore_s_then_aws_region(config, monkeypatch):
    """AWS_DEFAULT_REGION, the profile's region, then AWS_REGION (which botocore does not read)."""
    config.write_text("[default]\nregion = ap-south-1\n")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert JsonClient("sqs", "T").region == "ap-south-1"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    assert JsonClient("sqs", "T").region == "us-west-2"
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    config.write_text("[default]\n")
    assert JsonClient("sqs", "T").region == "eu-west-1"


def test_the_config_file_s_endpoint_settings(config, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    config.write_text("[default]\nuse_fips_endpoint = true\n")
    assert JsonClient("dynamodb", "T").endpoint == "https://dynamodb-fips.us-east-2.amazonaws.com"
    monkeypatch.setenv("AWS_USE_FIPS_ENDPOINT", "false")  # a variable that is set wins
    assert JsonClient("dynamodb", "T").endpoint == "https://dynamodb.us-east-2.amazonaws.com"
    config.write_text("[default]\nservices = local\nendpoint_url = http://127.0.0.1:4566\n"
                      "[services local]\nsecrets_manager =\n  endpoint_url = http://127.0.0.1:4501\n")
    assert JsonClient("secretsmanager", "T").endpoint == "http://127.0.0.1:4501"
    assert JsonClient("sqs", "T").endpoint == "http://127.0.0.1:4566"
    config.write_text("[default]\nservices = gone\n")
    with pytest.raises(Exception, match="services section 'gone'"):
        JsonClient("sqs", "T")


def test_the_global_endpoints_of_sts_and_s3(config, monkeypatch):
    from kindling.drivers.aws.s3 import S3Client

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    assert S3Client().url("kindling-bucket", "k") == "https://kindling-bucket.s3.amazonaws.com/k"
    monkeypatch.setenv("AWS_S3_US_EAST_1_REGIONAL_ENDPOINT", "regional")
    assert S3Client().url("kindling-bucket", "k") == "https://kindling-bucket.s3.us-east-1.amazonaws.com/k"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert (JsonClient("sts", "T").endpoint, JsonClient("sts", "T").signing_region) == (
        "https://sts.eu-west-1.amazonaws.com", "eu-west-1")
    config.write_text("[default]\nsts_regional_endpoints = legacy\n")
    assert (JsonClient("sts", "T").endpoint, JsonClient("sts", "T").signing_region) == (
        "https://sts.amazonaws.com", "us-east-1")


def test_dual_stack_is_refused_where_botocore_refuses_it(config, monkeypatch):
    monkeypatch.setenv("AWS_USE_DUALSTACK_ENDPOINT", "true")
    for region in ("eu-isoe-west-1", "us-isof-south-1"):
        with pytest.raises(Exception, match="dual-stack") as info:
            JsonClient("dynamodb", "T", region=region)
        assert info.value.code == "EndpointResolutionError"
