"""How long does kindling's own S3 client take to GET a large object, next to boto3's?

    AWS_ENDPOINT_URL=http://127.0.0.1:4566 python infra/bench/s3_read.py [--mib 64] [--reps 3]

Puts one object of ``--mib`` MiB in a bucket of its own on a loopback endpoint (LocalStack),
then reads it ``--reps`` times each way, interleaved: kindling's ``S3Client.get_object``
(bounded to the object's size, as a payload pointer bounds it) and boto3's
``get_object()["Body"].read()``. Prints every sample and the best of each, and their ratio.
Both reads are checked against the object's SHA-256. The bucket is deleted at the end.
A measurement, not a test: nothing here asserts a duration.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "layers/kindling"))

from kindling.drivers.aws.s3 import S3Client  # noqa: E402
from kindling.drivers.aws.url import Url, is_loopback  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ns = ap.parse_args()
    os.environ.setdefault("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
    for name, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"),
                        ("AWS_REGION", "us-east-1"), ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(name, value)
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    if not is_loopback(Url(endpoint).hostname or ""):
        sys.exit(f"refusing {endpoint}: this benchmark talks to a loopback endpoint only")

    import boto3

    boto = boto3.client("s3", endpoint_url=endpoint)
    ours = S3Client(endpoint=endpoint)
    bucket, key = f"bench-s3-read-{uuid.uuid4().hex[:10]}", "object"
    body = os.urandom(ns.mib * 1024 * 1024)
    digest = hashlib.sha256(body).hexdigest()
    boto.create_bucket(Bucket=bucket)
    try:
        boto.put_object(Bucket=bucket, Key=key, Body=body)
        del body
        ways = {
            "kindling": lambda: ours.get_object(bucket, key, max_bytes=ns.mib * 1024 * 1024),
            "boto3": lambda: boto.get_object(Bucket=bucket, Key=key)["Body"].read(),
        }
        samples: dict[str, list[float]] = {name: [] for name in ways}
        for rep in range(ns.reps):
            for name, read in ways.items():
                began = time.perf_counter()
                data = read()
                elapsed = time.perf_counter() - began
                if hashlib.sha256(data).hexdigest() != digest:
                    sys.exit(f"{name} read other bytes than were put")
                del data
                samples[name].append(elapsed)
                print(f"rep {rep + 1} {name:9} {elapsed:7.3f} s")
        best = {name: min(times) for name, times in samples.items()}
        print(f"\n{ns.mib} MiB GET, best of {ns.reps}: kindling {best['kindling']:.3f} s, boto3 {best['boto3']:.3f} s, "
              f"kindling/boto3 = {best['kindling'] / best['boto3']:.2f}")
    finally:
        boto.delete_object(Bucket=bucket, Key=key)
        boto.delete_bucket(Bucket=bucket)
        ours.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
