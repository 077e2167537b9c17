"""The fixtures every drawer shares, each defined here once (tests/conftest.py imports them).

A module that needs a variant says so instead of copying the fixture:

- ``reg``: a module that declares ``registry_tasks(reg)`` gets a registry of those tasks;
  every other module gets support.tasks' recording tasks.
- ``store``: the in-memory store, unless the module (or test) is marked with the kinds to
  run on: ``pytest.mark.stores("memory", "dynamo", "valkey")`` parametrizes each test that
  takes ``store`` over them.
- ``own_valkey``: a valkey-server of the module's own, started with the options of the
  module's ``valkey_options`` mark (``pytest.mark.valkey_options("--requirepass", "secret")``).
- ``mypy``: runs ``mypy --strict`` on a file; one cache per test process, so the standard
  library's and kindling's stubs are read once, not by every type-checking test.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from support.tasks import recording_tasks

STORE_KINDS = ("memory", "dynamo", "valkey")


@pytest.fixture
def reg(request):
    """A fresh task registry for the test, runs noted in ``reg.runs``: the tasks its module
    declares with ``registry_tasks(reg)``, or support.tasks' recording tasks (add, total,
    boom, nap, attempt)."""
    from kindling.core.registry import Registry

    registry = Registry()
    registry.runs = []
    getattr(request.module, "registry_tasks", recording_tasks)(registry)
    return registry


def pytest_generate_tests(metafunc):
    marker = metafunc.definition.get_closest_marker("stores")
    if marker is not None and "store" in metafunc.fixturenames:
        metafunc.parametrize("store", marker.args, indirect=True)


@pytest.fixture
def store(request) -> Iterator:
    """A fresh result store of the kind the test runs on (its ``stores`` mark):
    ``memory`` (the default), ``dynamo`` (a fresh table on moto) or ``valkey`` (the shared
    valkey-server, under a prefix of its own, records kept 60 s)."""
    kind = getattr(request, "param", "memory")
    assert kind in STORE_KINDS, f"store kinds are {STORE_KINDS}, not {kind!r}"
    if kind == "memory":
        from kindling.stores.results import MemoryResultStore

        yield MemoryResultStore()
    elif kind == "dynamo":
        from kindling.stores.results import DynamoResultStore

        dynamo = DynamoResultStore(request.getfixturevalue("table"))
        yield dynamo
        dynamo.close()
    else:
        from kindling.valkey import ValkeyResultStore

        valkey = ValkeyResultStore(request.getfixturevalue("valkey_url"), ttl_s=60,
                                   prefix=f"t-{uuid.uuid4().hex[:8]}")
        yield valkey
        valkey.client.close()


@pytest.fixture(scope="module")
def own_valkey(request, start_valkey):
    """A valkey-server of the module's own (its tests stop, flood or proxy it), started with
    the options of the module's ``valkey_options`` mark (none by default)."""
    options = request.node.get_closest_marker("valkey_options")
    return start_valkey(*(options.args if options else ()))


@pytest.fixture(scope="session")
def mypy(tmp_path_factory):
    """``mypy(path)``: ``mypy --strict`` on ``path`` (run in its folder), its CompletedProcess."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    exe = shutil.which("mypy", path=str(Path(sys.executable).parent))
    assert exe, "mypy is in the dev extras"
    cache = tmp_path_factory.mktemp("mypy-cache")  # per xdist worker: never two writers

    def check(path: Path) -> subprocess.CompletedProcess:
        return subprocess.run([exe, "--strict", "--cache-dir", str(cache), path.name], cwd=path.parent,
                              capture_output=True, text=True, timeout=300)
    return check
