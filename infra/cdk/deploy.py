"""Deploy infra/cdk/app.py's KindlingWorker into LocalStack: what ``cdk deploy`` does against
a bootstrapped account, done with boto3 so that no bootstrap stack is needed.

    eval "$(infra/localstack/ctl env)"
    .venv/bin/python infra/cdk/deploy.py --stack kindling-cdk --layer /tmp/layer [key=value ...]

It installs the CDK CLI (infra/cdk/install), runs ``cdk synth``, uploads the file assets of
the cloud assembly (the layer and the function code, zipped) to the bucket the template names,
creates or updates the stack with CloudFormation, and prints its outputs as JSON. The local
defaults keep retries quick, as infra/localstack/deploy.py's do.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "infra/cdk"
CDK = HERE / "node_modules/.bin/cdk"
LOCAL_PARAMETERS = {"function_timeout": 10, "retry_delay": 1, "max_attempts": 3, "max_receive_count": 20,
                    "memory_size": 256, "deletion_protection": False}


def synth(stack: str, parameters: dict, function_code: Path, layer_code: Path, outdir: Path,
          valkey_layer_code: Path | None = None) -> dict:
    """``cdk synth`` of infra/cdk/app.py into ``outdir``: the stack's template."""
    _run([str(HERE / "install")], timeout=330)
    context = {"stack": stack, "function_code": str(function_code), "layer_code": str(layer_code),
               **({"valkey_layer_code": str(valkey_layer_code)} if valkey_layer_code else {}),
               "parameters": json.dumps(parameters)}
    _run([str(CDK), "synth", "--app", f"{sys.executable} {HERE / 'app.py'}", "--output", str(outdir), "--quiet",
          "--no-notices", "--no-version-reporting", "--no-path-metadata",
          *(arg for key, value in context.items() for arg in ("-c", f"{key}={value}"))], timeout=300)
    return json.loads((outdir / f"{stack}.template.json").read_text())


def publish(stack: str, outdir: Path) -> None:
    """Upload the cloud assembly's zip assets to the buckets and keys its template names."""
    import boto3

    account = boto3.client("sts").get_caller_identity()["Account"]
    region = os.environ["AWS_DEFAULT_REGION"]
    s3 = boto3.client("s3")
    manifest = json.loads((outdir / f"{stack}.assets.json").read_text())
    for asset in manifest["files"].values():
        if asset["source"].get("packaging") != "zip":
            continue  # the template itself: given to CloudFormation directly
        source = outdir / asset["source"]["path"]
        data = io.BytesIO()
        with zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(source.rglob("*")):
                if path.is_file():
                    zf.write(path, path.relative_to(source).as_posix())
        for dest in asset["destinations"].values():
            bucket = dest["bucketName"].replace("${AWS::AccountId}", account).replace("${AWS::Region}", region)
            if bucket not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
                s3.create_bucket(Bucket=bucket)
            s3.put_object(Bucket=bucket, Key=dest["objectKey"], Body=data.getvalue())


def deploy(stack: str = "kindling-cdk", parameters: dict | None = None, *, layer_code: Path,
           function_code: Path = ROOT / "functions/worker", outdir: Path | None = None, fresh: bool = False,
           valkey_layer_code: Path | None = None) -> dict:
    """Synthesize, publish and deploy; the stack's outputs (QueueUrl, ResultsTableName ...),
    with DeploySeconds. ``fresh``: delete a stack of that name first and create it anew
    (LocalStack may fail to update an event source mapping whose alias got a new version).
    ``valkey_layer_code``: the Valkey layer, which a stack with a Valkey URL needs."""
    import boto3

    if "AWS_ENDPOINT_URL" not in os.environ:
        raise SystemExit("AWS_ENDPOINT_URL is not set: eval \"$(infra/localstack/ctl env)\" first")
    outdir = outdir or ROOT / ".state/cdk" / stack
    template = synth(stack, {**LOCAL_PARAMETERS, **(parameters or {})}, function_code, layer_code, outdir,
                     valkey_layer_code)
    t0 = time.perf_counter()
    publish(stack, outdir)
    cfn = boto3.client("cloudformation")
    request = {"StackName": stack, "TemplateBody": json.dumps(template),
               "Capabilities": ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"]}
    try:
        cfn.describe_stacks(StackName=stack)
        exists = True
    except cfn.exceptions.ClientError:
        exists = False
    waiter_config = {"Delay": 2, "MaxAttempts": 150}
    if exists and fresh:
        cfn.delete_stack(StackName=stack)
        cfn.get_waiter("stack_delete_complete").wait(StackName=stack, WaiterConfig=waiter_config)
        exists = False
    if not exists:
        cfn.create_stack(**request)
        cfn.get_waiter("stack_create_complete").wait(StackName=stack, WaiterConfig=waiter_config)
    else:
        try:
            cfn.update_stack(**request)
            cfn.get_waiter("stack_update_complete").wait(StackName=stack, WaiterConfig=waiter_config)
        except cfn.exceptions.ClientError as exc:
            if "No updates" not in str(exc):
                raise
    info = cfn.describe_stacks(StackName=stack)["Stacks"][0]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in info.get("Outputs") or []}
    if "QueueUrl" not in outputs:
        events = cfn.describe_stack_events(StackName=stack)["StackEvents"][:15]
        raise RuntimeError(f"stack {stack} is {info['StackStatus']} without its outputs: " + "; ".join(
            f"{e['LogicalResourceId']} {e['ResourceStatus']} {e.get('ResourceStatusReason', '')}" for e in events))
    outputs["DeploySeconds"] = round(time.perf_counter() - t0, 2)
    return outputs


def build_layer(target: Path, name: str = "KindlingLayer") -> Path:
    """The kindling layer (or ``name``: KindlingValkeyLayer) built into ``target``
    (layers/kindling/Makefile), as sam build does."""
    _run(["make", "-C", str(ROOT / "layers/kindling"), f"build-{name}", f"ARTIFACTS_DIR={target}",
          f"PYTHON={sys.executable}"], timeout=300)
    return target


def _run(cmd: list[str], timeout: float) -> None:
    env = {**os.environ, "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1", "CDK_DISABLE_VERSION_CHECK": "1",
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        output = done.stdout[-3000:] + done.stderr[-3000:]
        raise RuntimeError(f"{' '.join(cmd[:2])} failed ({done.returncode}):\n{output}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stack", default="kindling-cdk")
    ap.add_argument("--layer", type=Path, help="a built layer directory (default: built into .state/cdk/layer)")
    ap.add_argument("--function", type=Path, default=ROOT / "functions/worker")
    ap.add_argument("--fresh", action="store_true", help="delete the stack first and create it anew")
    ap.add_argument("overrides", nargs="*", metavar="key=value", help="KindlingWorker arguments (JSON values)")
    ns = ap.parse_args()
    layer = ns.layer or build_layer(ROOT / ".state/cdk/layer")
    valkey_layer = build_layer(ROOT / ".state/cdk/layer-valkey", "KindlingValkeyLayer")
    parameters = {k: json.loads(v) for k, v in (o.split("=", 1) for o in ns.overrides)}
    print(json.dumps(deploy(ns.stack, parameters, layer_code=layer, function_code=ns.function, fresh=ns.fresh,
                            valkey_layer_code=valkey_layer), indent=1))


if __name__ == "__main__":
    main()
