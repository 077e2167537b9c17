"""The worker's cold path: what importing the handler loads, as Lambda would import it.

Each check runs a fresh interpreter without site-packages (``-S``), with the built layer's
python/ on sys.path as Lambda's /opt/python and the function's code directory first.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ["boto3", "botocore", "aws_lambda_powertools", "asyncio", "valkey", "redis", "pydantic",
             "urllib3", "requests", "orjson", "json", "typing", "inspect", "logging", "socket", "ssl",
             "opentelemetry", "kindling.shared.otel"]

PROBE = """
import sys
before = set(sys.modules)
events = []
sys.addaudithook(lambda event, args: events.append(event) if event.startswith("socket.") else None)
sys.path[:0] = [{code!r}, {layer!r}]
import app
print(" ".join(sorted(set(sys.modules) - before)))
print(" ".join(events))
print(sys.modules["kindling"].__file__)
print(" ".join(sorted(m for m in set(sys.modules) - before if getattr(sys.modules[m], "__file__", 1) is None)))
"""


def run_probe(layer: Path) -> dict:
    code = PROBE.format(code=str(ROOT / "functions/worker"), layer=str(layer))
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True)
    loaded, events, origin, folders = out.stdout.split("\n")[:4]
    return {"loaded": sorted(set(loaded.split()) - set(folders.split())), "socket_events": events.split(),
            "kindling_from": origin, "folders": folders.split()}


# The layer folders a first batch goes through: namespace packages (no __init__.py), so
# entering one reads no file and runs no code. They are counted apart from the modules.
LAYER_FOLDERS = ["kindling.core", "kindling.drivers", "kindling.engine", "kindling.shared", "kindling.stores.memory",
                 "kindling.triggers", "kindling.triggers.sqs"]


def test_importing_the_handler_loads_no_sdk_and_opens_no_socket(layer_python):
    report = run_probe(layer_python)
    assert report["kindling_from"].startswith(str(layer_python))  # the layer's copy, not the venv's
    loaded = set(report["loaded"])
    assert not loaded & set(FORBIDDEN), sorted(loaded & set(FORBIDDEN))
    assert report["socket_events"] == []


def test_the_handler_import_stays_within_its_module_budget(layer_python):
    """kindling's modules, the tasks and small stdlib ones (os and friends load at startup
    without -S): nothing else."""
    loaded = set(run_probe(layer_python)["loaded"])
    ours = {m for m in loaded if m == "kindling" or m.startswith("kindling.")} | {"app", "tasks"}
    stdlib = loaded - ours
    assert stdlib <= {"__future__", "_contextvars", "contextvars", "_json", "os", "os.path", "stat",
                      "_stat", "posixpath", "genericpath", "_collections_abc"}, sorted(stdlib)
    assert len(loaded) <= 24, sorted(loaded)
    assert set(run_probe(layer_python)["folders"]) <= set(LAYER_FOLDERS)  # no code: not in the budget


def test_the_layer_ships_compiled_bytecode_and_no_sdk(layer_python, valkey_layer_python):
    """Each module the worker can reach is in the layer (the Valkey stream support in the
    Valkey layer) as bytecode compiled for the runtime (python3.13); which ones, and that the
    tools are not, is tests/tooling/test_layer_contents.py's."""
    import importlib.util

    for layer, name in ((layer_python, "__init__"), (layer_python, "triggers/sqs/handler"),
                        (layer_python, "engine/runner"), (valkey_layer_python, "triggers/valkey/lambda_drain"),
                        (layer_python, "drivers/aws/chain")):
        pyc = layer / "kindling" / f"{name}.pyc"
        assert pyc.read_bytes()[:4] == importlib.util.MAGIC_NUMBER, name
    top = {p.name for p in layer_python.iterdir()}
    assert not {"boto3", "botocore", "tests", "opentelemetry"} & top
    assert "orjson" in top


COMPILE_PROBE = """
import sys
compiled = []
sys.addaudithook(lambda event, args: compiled.append(str(args[1])) if event == "compile" else None)
sys.path[:0] = [{code!r}, {layer!r}]
import app
print("\\n".join(compiled))
"""


def compiled_by_import(code: Path, layer: Path) -> list[str]:
    """The files compiled from source while ``import app`` runs (the ``compile`` audit event)."""
    probe = COMPILE_PROBE.format(code=str(code), layer=str(layer))
    out = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if line]


def test_the_built_function_ships_bytecode_so_a_cold_start_compiles_nothing(layer_python, function_dir, tmp_path):
    """/var/task is read-only in Lambda: a module without shipped bytecode is compiled at every
    cold start. The function's build ships it for each module (checked-hash, so an edited
    source is compiled, never shadowed), and with the layer's, importing the handler
    compiles nothing."""
    import importlib.util
    import shutil

    modules = sorted(p.name for p in (ROOT / "functions/worker").glob("*.py"))
    assert "app.py" in modules and sorted(p.name for p in function_dir.glob("*.py")) == modules
    for name in modules:
        pyc = Path(importlib.util.cache_from_source(str(function_dir / name)))
        flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
        assert flags == 0b11, (name, flags)  # hash-based, checked against the source
    assert compiled_by_import(function_dir, layer_python) == []
    bare = tmp_path / "no-bytecode"  # the probe sees a compile when there is one to see
    shutil.copytree(function_dir, bare, ignore=shutil.ignore_patterns("__pycache__"))
    assert str(bare / "app.py") in compiled_by_import(bare, layer_python)


def test_the_function_build_ships_the_user_s_own_packages_with_bytecode_and_not_the_makefile(tmp_path):
    import shutil

    source = tmp_path / "worker"
    shutil.copytree(ROOT / "functions/worker", source, ignore=shutil.ignore_patterns("__pycache__", "build"))
    (source / "billing").mkdir()
    (source / "billing" / "__init__.py").write_text("from billing.invoices import total  # noqa\n")
    (source / "billing" / "invoices.py").write_text("def total(xs):\n    return sum(xs)\n")
    out = tmp_path / "built"
    subprocess.run(["make", "-s", "-C", str(source), "build-WorkerFunction", f"ARTIFACTS_DIR={out}",
                    f"PYTHON={sys.executable}", "PY_VERSION={}.{}".format(*sys.version_info[:2])], check=True,
                   capture_output=True, timeout=300)
    assert not (out / "Makefile").exists()
    assert (out / "billing" / "invoices.py").is_file()
    assert (out / "billing" / "__pycache__" / f"invoices.{sys.implementation.cache_tag}.pyc").is_file()


# What a first batch of plain jobs loads of kindling, as of the envelope's version 2: a
# feature (payloads, chains, signing, tracing...) that adds to it must load lazily instead.
# 22 modules; the layer folders it goes through (LAYER_FOLDERS) hold no code of their own.
FIRST_BATCH_MODULES = sorted([
    "kindling",
    "kindling.core.batch", "kindling.core.codec", "kindling.core.digest", "kindling.core.envelope",
    "kindling.core.errors", "kindling.core.policy", "kindling.core.records", "kindling.core.registry",
    "kindling.core.status",
    "kindling.drivers.aws", "kindling.drivers.aws.client", "kindling.drivers.aws.connection",
    "kindling.drivers.aws.endpoints", "kindling.drivers.aws.errors", "kindling.drivers.aws.signing",
    "kindling.drivers.aws.url",
    "kindling.shared.logs", "kindling.stores.dynamo", "kindling.engine.runner",
    "kindling.triggers.sqs.events", "kindling.triggers.sqs.handler",
])


@pytest.mark.service  # a moto server: to move to tests/service
def test_a_first_batch_loads_no_sdk_either(layer_python, table):
    """A whole invocation (DynamoDB read and write included) through kindling's own client.

    Over plain HTTP (LocalStack, moto) it needs neither http.client (whose email package
    import costs more than the whole handler), socket.py nor ssl: only C modules."""
    import boto3

    script = f"""
import sys
sys.path[:0] = [{str(ROOT / 'functions/worker')!r}, {str(layer_python)!r}]
import app
from kindling.core.envelope import encode_job, new_job
body = encode_job(new_job("noop")).decode()
event = {{"Records": [{{"messageId": "m1", "body": body, "attributes": {{"ApproximateReceiveCount": "1"}},
           "eventSource": "aws:sqs"}}]}}
response = app.handler(event, None)
assert response == {{"batchItemFailures": []}}, response
print(" ".join(sorted(m for m in sys.modules if getattr(sys.modules[m], "__file__", 1) is not None)))
"""
    import os

    env = dict(os.environ, KINDLING_TABLE=table)
    env.pop("KINDLING_OTEL", None)  # spans are off by default: this is the default path
    out = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True, env=env, check=True)
    loaded = set(out.stdout.split())
    assert not loaded & {"boto3", "botocore", "urllib3", "requests", "asyncio", "orjson", "valkey", "opentelemetry",
                         "kindling.shared.otel"}
    stdlib_heavy = {"http", "http.client", "email", "socket", "ssl", "hashlib", "hmac", "urllib", "urllib.parse",
                    "json", "re", "enum", "random", "threading"}
    assert not loaded & stdlib_heavy, sorted(loaded & stdlib_heavy)
    # Features load when a job uses them: a first batch of plain jobs loads exactly these.
    ours = sorted(m for m in loaded if m == "kindling" or m.startswith("kindling."))
    assert ours == FIRST_BATCH_MODULES, (sorted(set(ours) - set(FIRST_BATCH_MODULES)),
                                         sorted(set(FIRST_BATCH_MODULES) - set(ours)))
    assert not loaded & SIGNING_MODULES, sorted(loaded & SIGNING_MODULES)  # signing is off: none of it loads
    item = boto3.client("dynamodb").scan(TableName=table)["Items"]
    assert [i["status"]["S"] for i in item] == ["succeeded"]


SIGNING_MODULES = {"kindling.core.jobsig", "kindling.shared.signed", "kindling.drivers.secrets"}


@pytest.mark.service  # a moto server: to move to tests/service
def test_with_signing_on_a_first_batch_loads_only_the_signing_modules(layer_python, table):
    """Signing on: the worker reads the keys at its first batch with kindling's own client,
    and checks the MAC with the C SHA-256 (no hashlib, no hmac, no json module)."""
    import base64
    import json
    import os

    import boto3

    keys = {"current": "k1", "keys": {"k1": base64.b64encode(b"s" * 32).decode()}}
    arn = boto3.client("secretsmanager").create_secret(Name=f"sig-{table}", SecretString=json.dumps(keys))["ARN"]
    script = f"""
import sys
sys.path[:0] = [{str(ROOT / 'functions/worker')!r}, {str(layer_python)!r}]
import app
before = set(sys.modules)
from kindling.core import jobsig
from kindling.core.envelope import encode_job, new_job
body = encode_job(new_job("noop")).decode()
signature = jobsig.sign("k1", b"s" * 32, "sqs:000000000000:jobs", body)
forged = encode_job(new_job("noop")).decode()
record = lambda m, b, s: {{"messageId": m, "body": b, "attributes": {{"ApproximateReceiveCount": "1"}},
    "messageAttributes": {{"kindling_signature": {{"stringValue": s, "dataType": "String"}}}},
    "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:jobs"}}
event = {{"Records": [record("m1", body, signature), record("m2", forged, signature)]}}
response = app.handler(event, None)
assert response == {{"batchItemFailures": []}}, response
print(" ".join(sorted(sys.modules)))
"""
    env = dict(os.environ, KINDLING_TABLE=table, KINDLING_SIGNING_SECRET=arn)
    out = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True, env=env, check=True)
    loaded = set(out.stdout.split())
    assert loaded >= SIGNING_MODULES
    heavy = {"boto3", "botocore", "urllib3", "hashlib", "hmac", "json", "base64", "http.client", "ssl"}
    assert not loaded & heavy, sorted(loaded & heavy)
    items = boto3.client("dynamodb").scan(TableName=table)["Items"]
    assert sorted(i["status"]["S"] for i in items) == ["rejected", "succeeded"]
