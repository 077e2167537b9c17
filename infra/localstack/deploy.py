"""Deploy template.yaml into LocalStack: the same template as AWS, other parameters.

    eval "$(infra/localstack/ctl env)"
    .venv/bin/python infra/localstack/deploy.py [--stack kindling] [Key=Value ...]

It runs ``sam build`` and ``sam deploy`` with the AWS_* environment pointing at LocalStack
(artifacts go to a LocalStack S3 bucket; CloudFormation applies the SAM transform) and
prints the stack's outputs as JSON. Parameters given on the command line override the
local defaults below, which keep the stack quick to exercise: a 10 s function timeout
and 1 s retry delay, so retries and the dead-letter queue are seen within seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCAL_PARAMETERS = {"FunctionTimeout": "10", "RetryDelay": "1", "MaxAttempts": "3", "MaxReceiveCount": "20",
                    "MemorySize": "256"}
BUCKET = "kindling-sam-artifacts"


def deploy(stack: str = "kindling", parameters: dict[str, str] | None = None, *, build: bool = True,
           build_dir: Path | None = None, template: Path | None = None,
           prepare: Callable[[Path], None] | None = None) -> dict:
    """Build and deploy; return the stack outputs (QueueUrl, ResultsTableName, ...).

    ``build_dir``: build there (and deploy what is built there) instead of the repository's
    .aws-sam, so that the build does not race another of the same template. ``template``:
    build this template instead of template.yaml (a rendering of infra/queues/render.py).
    ``prepare``: called with the built artifacts' directory (``build_dir/build``) before they
    are deployed, to change what the function ships (a test's own tasks, say)."""
    import boto3

    if "AWS_ENDPOINT_URL" not in os.environ:
        raise SystemExit("AWS_ENDPOINT_URL is not set: eval \"$(infra/localstack/ctl env)\" first")
    params = {**LOCAL_PARAMETERS, **(parameters or {})}
    env = dict(os.environ, SAM_CLI_TELEMETRY="0", PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    where = ["--build-dir", str(build_dir / "build"), "--cache-dir", str(build_dir / "cache")] if build_dir else []
    if build:
        source = ["--template-file", str(template)] if template else []
        _run(["sam", "build", *source, *where, "--cached"], env)
    if prepare is not None:
        if build_dir is None:
            raise ValueError("prepare needs a build_dir of its own: it changes the built artifacts")
        prepare(build_dir / "build")
    s3 = boto3.client("s3")
    if BUCKET not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
        s3.create_bucket(Bucket=BUCKET)
    t0 = time.perf_counter()
    template = ["--template-file", str(build_dir / "build/template.yaml")] if build_dir else []
    _run(["sam", "deploy", *template, "--stack-name", stack, "--s3-bucket", BUCKET,
          "--region", os.environ["AWS_DEFAULT_REGION"], "--capabilities", "CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND",
          "--no-confirm-changeset", "--no-fail-on-empty-changeset", "--no-progressbar",
          "--parameter-overrides", *(f"{k}={v}" for k, v in params.items())], env)
    stack_info = boto3.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack_info.get("Outputs", [])}
    outputs["DeploySeconds"] = round(time.perf_counter() - t0, 2)
    return outputs


def _run(cmd: list[str], env: dict) -> None:
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        output = done.stdout[-3000:] + done.stderr[-3000:]
        raise RuntimeError(f"{' '.join(cmd[:2])} failed ({done.returncode}):\n{output}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stack", default="kindling")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("overrides", nargs="*", metavar="Key=Value")
    ns = ap.parse_args()
    print(json.dumps(deploy(ns.stack, dict(o.split("=", 1) for o in ns.overrides), build=not ns.no_build), indent=1))


if __name__ == "__main__":
    main()
