import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import localstack as _localstack
from support.fixtures import mypy, own_valkey, pytest_generate_tests, reg, store  # noqa: F401  (shared by every drawer)
from support.valkey import ValkeyServer

ROOT = Path(__file__).resolve().parent.parent

# No test reaches EC2 instance metadata's link-local address: the credential chain's last
# source (kindling.drivers.aws.imds, and botocore's) stays off unless a test points it at a loopback fake.
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")


def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):  # the run itself, not one of its workers
        _localstack.stop_if_a_worker_started_it()


def sam_build(source: str, target: str, out: Path, *variables: str) -> Path:
    """Run ``make <target>`` in ``source`` into ``out``, as `sam build` runs a makefile build,
    for the runtime of this interpreter's version (python3.11 when the suite runs on 3.11)."""
    version = "{}.{}".format(*sys.version_info[:2])
    subprocess.run(["make", "-s", "-C", str(ROOT / source), target, f"ARTIFACTS_DIR={out}", f"PYTHON={sys.executable}",
                    f"PY_VERSION={version}", *variables], check=True, timeout=300)
    return out


@pytest.fixture(scope="session")
def layer_python(tmp_path_factory) -> Path:
    """The layer's python/ directory, built by its own Makefile as `sam build` would."""
    return sam_build("layers/kindling", "build-KindlingLayer", tmp_path_factory.mktemp("layer")) / "python"


@pytest.fixture(scope="session")
def layer_python_arm64(tmp_path_factory) -> Path:
    """The same layer built for Graviton (ARCH=arm64: orjson's aarch64 wheel)."""
    return sam_build("layers/kindling", "build-KindlingLayer", tmp_path_factory.mktemp("layer-arm64"),
                     "ARCH=arm64") / "python"


@pytest.fixture(scope="session")
def valkey_layer_python(tmp_path_factory) -> Path:
    """The Valkey stream support's layer (KindlingValkeyLayer): its python/ directory."""
    return sam_build("layers/kindling", "build-KindlingValkeyLayer", tmp_path_factory.mktemp("layer-valkey")) / "python"


@pytest.fixture(scope="session")
def valkey_layers_python(layer_python, valkey_layer_python, tmp_path_factory) -> Path:
    """/opt/python of a function with a Valkey URL: the kindling layer and the Valkey layer
    extracted into one directory, as Lambda extracts a function's layers into /opt."""
    import shutil

    merged = tmp_path_factory.mktemp("layers-valkey") / "python"
    shutil.copytree(layer_python, merged)
    shutil.copytree(valkey_layer_python, merged, dirs_exist_ok=True)
    return merged


@pytest.fixture(scope="session")
def function_dir(tmp_path_factory) -> Path:
    """The worker function's code directory, built by its own Makefile as `sam build` would."""
    return sam_build("functions/worker", "build-WorkerFunction", tmp_path_factory.mktemp("function"))


@pytest.fixture(scope="session")
def moto_endpoint():
    """An in-process moto server; AWS_* variables point boto3 and kindling.drivers.aws at it."""
    import socket

    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "test",
           "AWS_SECRET_ACCESS_KEY": "test", "AWS_SESSION_TOKEN": "token", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_REGION": "us-east-1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield env["AWS_ENDPOINT_URL"]
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    server.stop()


@pytest.fixture
def bucket(moto_endpoint):
    """A fresh S3 bucket on moto (large payloads and results)."""
    import uuid

    import boto3

    name = f"kindling-{uuid.uuid4().hex[:8]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name


@pytest.fixture
def table(moto_endpoint) -> str:
    """A fresh results table on the moto server, as template.yaml deploys it (its keys and
    by_task, by_status indexes)."""
    import boto3
    from support import create_results_table

    return create_results_table(boto3.client("dynamodb"), f"results-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="session")
def otel_exporter():
    """OpenTelemetry's global tracer provider, set once per process, exporting to memory."""
    trace = pytest.importorskip("opentelemetry.trace")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


@pytest.fixture
def spans(otel_exporter):
    """The spans finished during the test (the in-memory exporter, emptied around it)."""
    otel_exporter.clear()
    yield otel_exporter
    otel_exporter.clear()


@pytest.fixture(scope="session")
def valkey_server() -> Iterator[ValkeyServer]:
    """One plain valkey-server for the whole run, shared by the modules that use unique keys."""
    with ValkeyServer() as server:
        yield server


@pytest.fixture(scope="session")
def valkey_url(valkey_server) -> str:
    return valkey_server.url


@pytest.fixture(scope="module")
def start_valkey() -> Iterator[Callable[..., ValkeyServer]]:
    """``start_valkey(*args, tls=False)``: a valkey-server of this module's own, started with
    these extra options (a password, TLS files); every one is stopped when the module ends,
    whether or not its tests passed or stopped it themselves."""
    servers: list[ValkeyServer] = []

    def start(*args: str, tls: bool = False) -> ValkeyServer:
        server = ValkeyServer(*args, tls=tls)
        servers.append(server)
        return server.start()

    try:
        yield start
    finally:
        for server in servers:
            server.stop()
