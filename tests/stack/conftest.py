"""Fixtures for integration tests against LocalStack running on this host (infra/localstack/ctl):
LocalStack itself, and template.yaml deployed into it with the parameters a module needs."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from support import ROOT
from support import localstack as _localstack


@pytest.fixture(scope="session")
def localstack() -> Iterator[dict[str, str]]:
    """LocalStack on KINDLING_LOCALSTACK_PORT (default 4566): the AWS_* environment that points
    boto3 at it. Reuses a LocalStack already healthy there; otherwise installs and starts one and
    stops it at the end of the session."""
    with _localstack.running() as env:
        yield env


@contextlib.contextmanager
def _environ(env: Mapping[str, str]) -> Iterator[None]:
    """os.environ with ``env`` over it, as it was again on exit."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        yield


def _deploy(name: str, parameters: Mapping[str, str], build_dir: Path | None = None,
            queues: list[str] | None = None, prepare: Callable[[Path], None] | None = None) -> dict:
    """infra/localstack/deploy.py's deploy(), imported when a module first deploys; with
    ``queues``, of template.yaml rendered with those named queues (infra/queues/render.py),
    built in ``build_dir`` (by default .state/stacks/<name>)."""
    for tool in ("infra/localstack", "infra/queues"):
        if str(ROOT / tool) not in sys.path:
            sys.path.insert(0, str(ROOT / tool))
    from deploy import deploy

    template = None
    if queues is not None:
        import render

        build_dir = build_dir or ROOT / ".state/stacks" / name
        template = build_dir / "template.yaml"
        build_dir.mkdir(parents=True, exist_ok=True)
        template.write_text(render.absolute(render.render((ROOT / "template.yaml").read_text(), queues)))
    return deploy(name, dict(parameters), build_dir=build_dir, template=template, prepare=prepare)


@pytest.fixture(scope="module")
def aws(localstack) -> Iterator[dict[str, str]]:
    """os.environ pointing boto3 and kindling.drivers.aws at the session's LocalStack for a module that
    makes its own queues and buckets (no stack deployed): no session token, no named queues."""
    with _environ(localstack), pytest.MonkeyPatch.context() as patch:
        patch.delenv("AWS_SESSION_TOKEN", raising=False)
        patch.delenv("KINDLING_QUEUES", raising=False)
        yield localstack


@pytest.fixture(scope="module")
def deploy_stack(localstack) -> Iterator[Callable[..., dict]]:
    """``deploy_stack(name, parameters, build_dir=None, queues=None, prepare=None)``: template.yaml
    (rendered with the named queues ``queues``, when given) deployed into LocalStack as stack
    ``name`` with ``parameters`` over deploy.py's local defaults; the stack outputs.

    os.environ points boto3 at LocalStack from this fixture's start to the module's end, so a
    module's own fixtures and tests reach the stack (and create what its parameters name)."""
    with _environ(localstack):
        yield _deploy


def _deploy_cdk(name: str, parameters: Mapping[str, object], build_dir: Path,
                prepare: Callable[[Path], None] | None = None) -> dict:
    """infra/cdk/deploy.py's deploy() of a KindlingWorker with ``parameters`` (its keyword
    arguments) as stack ``name``: the layer and the function built into ``build_dir`` as
    ``sam build`` builds them (``build_dir/KindlingLayer``, ``build_dir/WorkerFunction``),
    ``prepare`` called with ``build_dir`` before they are deployed; the stack outputs. A stack
    left by an earlier run is deleted first: each run creates its stack anew."""
    import importlib.util
    import subprocess

    # By its path: infra/localstack/deploy.py is also a module named deploy on sys.path.
    spec = importlib.util.spec_from_file_location("kindling_cdk_deploy", ROOT / "infra/cdk/deploy.py")
    cdk_deploy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cdk_deploy)

    layer = cdk_deploy.build_layer(build_dir / "KindlingLayer")
    valkey_layer = cdk_deploy.build_layer(build_dir / "KindlingValkeyLayer", "KindlingValkeyLayer")
    subprocess.run(["make", "-C", str(ROOT / "functions/worker"), "build-WorkerFunction",
                    f"ARTIFACTS_DIR={build_dir / 'WorkerFunction'}", f"PYTHON={sys.executable}"],
                   check=True, capture_output=True, timeout=300)
    if prepare is not None:
        prepare(build_dir)
    return cdk_deploy.deploy(name, dict(parameters), layer_code=layer, function_code=build_dir / "WorkerFunction",
                             outdir=build_dir / "cdk.out", fresh=True, valkey_layer_code=valkey_layer)


@pytest.fixture(scope="module")
def deploy_cdk_stack(localstack) -> Iterator[Callable[..., dict]]:
    """``deploy_cdk_stack(name, parameters, build_dir, prepare=None)``: kindling.tools.cdk's
    KindlingWorker deployed into LocalStack (infra/cdk/deploy.py), as deploy_stack deploys
    template.yaml; os.environ points boto3 at LocalStack until the module's end."""
    with _environ(localstack), pytest.MonkeyPatch.context() as patch:
        patch.delenv("AWS_SESSION_TOKEN", raising=False)
        yield _deploy_cdk


@pytest.fixture(scope="session")
def stack(localstack) -> Iterator[dict[str, str]]:
    """template.yaml deployed into LocalStack (sam build + sam deploy): the stack outputs.

    With SnapStart on and the jobs queue's trigger in provisioned mode (2 to 10 pollers, no
    concurrency limit), so that every test of the drawer on this stack runs its jobs through
    the published "live" alias those options deploy."""
    with _environ(localstack):
        yield _deploy("kindling-it", {"MaxAttempts": "4", "MaxReceiveCount": "20", "SnapStart": "true",
                                      "MaxConcurrency": "0", "MinimumPollers": "2", "MaximumPollers": "10"})


NAMED_QUEUES = ["reports:3", "bulk_2", "thumb-nails", "emails", "exports:4"]
"""The named queues of the named-queues stack (infra/queues/render.py's name[:max concurrency])."""


@pytest.fixture(scope="session")
def named_queues_stack(localstack) -> Iterator[dict[str, str]]:
    """template.yaml rendered with :data:`NAMED_QUEUES` and deployed as ``kindling-five``
    (MaxAttempts 2, two producer accounts, 8 status shards, a warm table): the stack outputs.
    The named-queue and routing drawers share it, one deploy for both."""
    with _environ(localstack):
        yield _deploy("kindling-five", {"MaxAttempts": "2", "ProducerAccountIds": "111111111111,222222222222",
                                        "StatusIndexShards": "8", "TableWarmReadUnitsPerSecond": "13000"},
                      queues=NAMED_QUEUES)
