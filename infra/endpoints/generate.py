#!/usr/bin/env python3
"""Regenerate layers/kindling/kindling/aws/endpoint_table.py from botocore's data.

kindling resolves AWS endpoints without botocore (the Lambda cold path never imports it),
from a small table this script derives from botocore's partitions.json and the endpoint
rulesets of the services kindling calls itself. For each service and partition: the URL
template botocore's ruleset gives a region of that partition it does not list (a made-up
name matching the partition's pattern), for each of the four FIPS / dual-stack settings
(None where the ruleset refuses the combination); then every listed region whose URL or
signing region differs from that template. tests/tooling/test_endpoint_table.py holds the
file to this script's output, and tests/unit/test_aws_endpoints.py holds kindling's
resolution to botocore's over every region of every partition.

Run: .venv/bin/python infra/endpoints/generate.py [--check]
"""

import pathlib
import pprint
import sys

from botocore.endpoint_provider import EndpointProvider
from botocore.exceptions import EndpointResolutionError
from botocore.loaders import create_loader

# The services kindling's own client calls (kindling/aws), and STS for web identity.
SERVICES = ("dynamodb", "sqs", "s3", "secretsmanager", "ssm", "lambda", "sts")
FLAGS = ((False, False), (False, True), (True, False), (True, True))  # (fips, dualstack)
BUCKET = "kindling-bucket"  # S3's templates hold "{bucket}." where a virtual-hosted bucket goes
TARGET = pathlib.Path(__file__).resolve().parents[2] / "layers/kindling/kindling/aws/endpoint_table.py"


def load() -> tuple[dict, dict[str, dict]]:
    loader = create_loader()
    partitions = loader.load_data("partitions")
    rulesets = {}
    for service in SERVICES:
        version = loader.determine_latest_version(service, "endpoint-rule-set-1")
        rulesets[service] = loader.load_service_model(service, "endpoint-rule-set-1", version)
    return partitions, rulesets


def shape(regex: str) -> tuple[tuple[str, ...] | None, ...]:
    """A partition's region pattern ("^(us|eu)\\-\\w+\\-\\d+$") as one entry per hyphen-separated
    part: a tuple of the literal choices, "w" for \\w+ or "d" for \\d+ (as a 1-tuple marker)."""
    body = regex.removeprefix("^").removesuffix("$")
    out: list = []
    for part in body.split("\\-"):
        if part == "\\w+":
            out.append("w")
        elif part == "\\d+":
            out.append("d")
        else:
            out.append(tuple(part.strip("()").split("|")))
    return tuple(out)


def probe_region(pattern: tuple) -> str:
    """A region name matching ``pattern`` that no partition lists."""
    words = {"w": "kindlingprobe", "d": "9"}
    return "-".join(words[p] if isinstance(p, str) else p[0] for p in pattern)


def resolve(provider: EndpointProvider, service: str, region: str, fips: bool, dualstack: bool,
            bucket: str = BUCKET) -> tuple[str, str] | None:
    """(URL, signing region) as botocore's ruleset resolves them, None where it refuses."""
    params = {"Region": region, "UseFIPS": fips, "UseDualStack": dualstack}
    if service == "s3":
        params["Bucket"] = bucket
    try:
        endpoint = provider.resolve_endpoint(**params)
    except EndpointResolutionError:
        return None
    signing = region
    for scheme in endpoint.properties.get("authSchemes", ()):
        if scheme.get("name") in ("sigv4", "sigv4a") and scheme.get("signingRegion"):
            signing = scheme["signingRegion"]
            break
    return endpoint.url, signing


def template(url_signing: tuple[str, str] | None, region: str) -> str | tuple[str, str] | None:
    if url_signing is None:
        return None
    url, signing = url_signing
    url = url.replace(f"{BUCKET}.", "{bucket}.").replace(region, "{region}")
    signing = signing.replace(region, "{region}")
    return url if signing == "{region}" else (url, signing)  # most sign for the region they name


def build() -> dict:
    partitions, rulesets = load()
    parts = []
    for partition in partitions["partitions"]:
        parts.append((partition["id"], shape(partition["regionRegex"]), tuple(sorted(partition["regions"]))))
    services: dict = {}
    overrides: dict = {}
    for service in SERVICES:
        provider = EndpointProvider(rulesets[service], partitions)
        services[service] = {}
        for pid, pattern, regions in parts:
            probe = probe_region(pattern)
            row = tuple(template(resolve(provider, service, probe, f, d), probe) for f, d in FLAGS)
            services[service][pid] = row
            for region in regions:
                for (f, d), default in zip(FLAGS, row, strict=True):
                    actual = template(resolve(provider, service, region, f, d), region)
                    if actual != default:
                        overrides[(service, region, f, d)] = actual
    return {"partitions": tuple(parts), "services": services, "overrides": overrides}


def render(table: dict) -> str:
    import botocore

    width = 110
    return (
        '"""AWS endpoints as botocore resolves them, for the services kindling calls: generated, do not edit.\n\n'
        f"Made by infra/endpoints/generate.py from botocore {botocore.__version__}'s partitions.json and\n"
        "endpoint rulesets; read by :mod:`kindling.aws.endpoints`.\n"
        '"""\n\n'
        "# (partition, its region pattern: one entry per hyphen-separated part, the literal choices\n"
        '# or "w" (\\w+) or "d" (\\d+), the regions it lists)\n'
        f"PARTITIONS = {pprint.pformat(table['partitions'], width=width, compact=True)}\n\n"
        "# service -> partition -> the URL template for each of (fips, dualstack) = (off, off), (off, on),\n"
        "# (on, off), (on, on); (URL template, signing region) where the signing region is not the\n"
        "# region itself; None where botocore refuses the combination.\n"
        f"SERVICES = {pprint.pformat(table['services'], width=width)}\n\n"
        "# (service, region, fips, dualstack) -> what a listed region gets instead of its partition's template\n"
        f"OVERRIDES = {pprint.pformat(table['overrides'], width=width)}\n"
    )


def main(argv: list[str]) -> int:
    text = render(build())
    if "--check" in argv:
        if TARGET.read_text() != text:
            print(f"{TARGET} is out of date: run infra/endpoints/generate.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    print(f"wrote {TARGET} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
