"""The Lambda layers hold what a worker imports, as bytecode, and the kindling layer stays
within its budget.

The layers are built by their own Makefile (tests/conftest.py's ``layer_python`` fixtures), for
each architecture the template offers: the kindling layer (the SQS worker and orjson) and the
Valkey stream support's, which goes on top of it where a Valkey URL is configured. Which modules
each ships comes from the import graph (kindling/tools/layerfiles.py); these tests check the
built layers against the source with a reading of their own, so a module the reader misses is
caught here.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "layers/kindling/kindling"
sys.path.insert(0, str(SOURCE / "tools"))
import layerfiles  # noqa: E402  (a build script beside the package's modules, run by path)

sys.path.remove(str(SOURCE / "tools"))

LAYER_BUDGET = 400_000
"""Bytes, zipped as `sam deploy` uploads the kindling layer (`make layer-size` prints the
figure), orjson and the licenses included, for x86_64 and for arm64. About 100 KB of it is
orjson's extension module and 10 KB its licenses. A change that grows the layer past it takes
something out of the worker's reach (into a tool the worker never imports, or the Valkey
layer), or moves the budget with its reason in the commit message."""

TOOLS = ["tools/cli.py", "tools/demo.py", "tools/scaffold.py", "tools/ops/cli.py", "tools/ops/dlq.py",
         "tools/dashboard/__init__.py", "tools/dashboard/data.py", "tools/valkey_migrate.py", "valkey/migrate.py",
         "tools/layerfiles.py", "tools/cdk.py"]
"""What operators and developers run, and no worker: never in the layer."""


def module_name(rel: Path) -> str:
    parts = ["kindling", *rel.with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_modules() -> dict[str, Path]:
    return {module_name(p.relative_to(SOURCE)): p.relative_to(SOURCE) for p in SOURCE.rglob("*.py")}


def shipped(layer: Path) -> set[str]:
    """The kindling modules in a built layer's python/ directory (each a sourceless .pyc)."""
    kindling = layer / "kindling"
    return {module_name(p.relative_to(kindling).with_suffix(".py")) for p in kindling.rglob("*.pyc")}


def every_import(path: Path) -> set[str]:
    """Every ``kindling`` name any import statement of the file could load, wherever it is
    (module level, functions, methods, ``TYPE_CHECKING`` blocks: this reading keeps them all),
    and the submodules a lazy ``__getattr__`` names in its ``_WHERE`` table."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    own = module_name(path.relative_to(SOURCE))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"{path}: relative import"
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_WHERE" for t in node.targets):
            names |= {f"{own}.{v.value}" for v in node.value.values}
    loaded = set()
    for name in names:
        parts = name.split(".")
        loaded |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return {n for n in loaded if n == "kindling" or n.startswith("kindling.")}


def test_the_layer_ships_each_module_a_worker_reaches_and_no_other(layer_python, valkey_layer_python):
    """The two layers together, as Lambda extracts them into /opt, are closed under imports:
    whatever a shipped module can import (function-level imports included) is shipped too;
    every module left out is one no entry point reaches."""
    modules = source_modules()
    in_layer = shipped(layer_python) | shipped(valkey_layer_python)
    missing = {(m, i) for m in in_layer for i in every_import(SOURCE / modules[m])
               if i in modules and i not in in_layer}
    assert not missing, sorted(missing)
    assert set(layerfiles.ENTRY_POINTS) <= in_layer
    left_out = set(modules) - in_layer
    assert {module_name(Path(t)) for t in TOOLS} <= left_out
    assert not left_out & layerfiles.reachable(str(SOURCE))


def test_the_valkey_stream_support_ships_in_its_own_layer_and_only_there(layer_python, valkey_layer_python):
    """Every module of a ``valkey`` folder or named ``valkey`` in a layer folder (client,
    drain, stream worker, producer, result store) is in the Valkey layer; the kindling layer
    holds the SQS worker and the ``kindling.valkey`` face, which names the missing layer."""
    base, valkey = shipped(layer_python), shipped(valkey_layer_python)
    assert not base & valkey
    assert {"kindling.triggers.valkey.lambda_drain", "kindling.drivers.valkey.client", "kindling.stores.valkey",
            "kindling.producer.valkey"} <= valkey
    assert all("valkey" in m.split(".")[2:] for m in valkey), sorted(valkey)
    assert not [m for m in base if "valkey" in m.split(".")[2:]]
    assert {"kindling.valkey", "kindling.triggers.sqs.handler"} <= base
    assert sorted(p.name for p in valkey_layer_python.iterdir()) == ["kindling"]  # no orjson: it is the base's


def test_the_layer_ships_bytecode_for_its_runtime_and_no_source_stubs_or_sdk(layer_python):
    files = [p.relative_to(layer_python) for p in layer_python.rglob("*") if p.is_file()]
    assert not [f for f in files if f.suffix in (".py", ".pyi") or f.name == "py.typed"], files
    for pyc in (layer_python / "kindling").rglob("*.pyc"):
        assert pyc.read_bytes()[:4] == importlib.util.MAGIC_NUMBER, pyc
    top = {p.name for p in layer_python.iterdir()}
    assert top == {"kindling", "orjson", "orjson-3.13.0.dist-info"}, top
    dist_info = sorted(str(f) for f in files if f.parts[0].endswith(".dist-info"))
    assert dist_info == ["orjson-3.13.0.dist-info/METADATA", "orjson-3.13.0.dist-info/licenses/LICENSE-APACHE",
                         "orjson-3.13.0.dist-info/licenses/LICENSE-MIT",
                         "orjson-3.13.0.dist-info/licenses/LICENSE-MPL-2.0"]


IMPORT_ALL = """
import importlib, sys
sys.path[:0] = [{layer!r}]
for name in {names!r}:
    importlib.import_module(name)
import importlib.metadata, orjson
print(importlib.metadata.version("orjson"), orjson.dumps({{"a": 1}}).decode())
"""


def test_every_shipped_module_imports_from_the_layer_alone(layer_python):
    """No site-packages (-S): the kindling layer and the standard library, as in Lambda without
    boto3 and without the Valkey layer (its modules are imported only inside functions)."""
    # boto3, pydantic and opentelemetry, which these import at once, are the function's to bring.
    names = sorted(shipped(layer_python) - {"kindling.producer.client", "kindling.core.models", "kindling.shared.otel"})
    code = IMPORT_ALL.format(layer=str(layer_python), names=names)
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["3.13.0", '{"a":1}']


TRACEBACK = """
import sys, traceback
sys.path[:0] = [{layer!r}]
from kindling.core.envelope import decode_job
try:
    decode_job(b"not a job")
except Exception:
    print(traceback.format_exc())
"""


def test_a_traceback_through_the_layer_names_the_file_and_line(layer_python):
    """No source ships: a frame of kindling's shows where it is in Lambda and the line, which
    the source of the same release (the wheel, the repository) shows."""
    out = subprocess.run([sys.executable, "-S", "-c", TRACEBACK.format(layer=str(layer_python))],
                         capture_output=True, text=True, timeout=60, check=True)
    assert 'File "/opt/python/kindling/core/envelope.py", line ' in out.stdout, out.stdout


DRAIN_WITHOUT_VALKEY_LAYER = """
import sys
sys.path[:0] = [{layer!r}]
from kindling.core.errors import LayerMissing
from kindling.triggers.sqs.handler import LambdaWorker
from kindling import valkey
worker = LambdaWorker(store=object())
for attempt in (lambda: worker({{"kindling": "drain", "stream": "kindling:jobs"}}), lambda: valkey.StreamProducer):
    try:
        attempt()
    except LayerMissing as exc:
        print("refused:", exc)
"""


def test_a_stream_without_the_valkey_layer_names_the_missing_layer(layer_python):
    """The kindling layer alone (template.yaml adds the Valkey layer only with a Valkey URL):
    a drain event, or a producer of the stream, is refused with the layer's name, not a bare
    ModuleNotFoundError."""
    out = subprocess.run([sys.executable, "-S", "-c", DRAIN_WITHOUT_VALKEY_LAYER.format(layer=str(layer_python))],
                         capture_output=True, text=True, timeout=60, check=True)
    lines = [line for line in out.stdout.splitlines() if line.startswith("refused:")]
    assert len(lines) == 2, out.stdout
    assert all("KindlingValkeyLayer" in line and "ValkeyUrl" in line for line in lines), lines


@pytest.mark.parametrize("fixture", ["layer_python", "layer_python_arm64"])
def test_the_zipped_layer_stays_within_its_budget(fixture, request):
    layer = request.getfixturevalue(fixture)
    assert any(layer.glob("orjson/orjson.cpython-313-*-linux-gnu.so"))
    size = layerfiles.zipped_size(str(layer.parent))
    assert size <= LAYER_BUDGET, f"{size:,} bytes zipped, over the budget of {LAYER_BUDGET:,}"


@pytest.mark.slow  # importing SAM's packager takes seconds
def test_the_size_is_the_zip_sam_uploads(layer_python, tmp_path):
    from samcli.lib.package.utils import make_zip

    archive = make_zip(str(tmp_path / "layer"), str(layer_python.parent))
    assert Path(archive).stat().st_size == layerfiles.zipped_size(str(layer_python.parent))


# The import graph's reader, on a package of its own.

def write_package(root: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return str(root)


def test_the_reader_follows_function_level_and_lazy_imports_but_not_typing_only_ones(tmp_path):
    src = write_package(tmp_path / "kindling", {
        "__init__.py": "from kindling.handler import run\n",
        "handler.py": "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from kindling import cli\n"
                      "def run():\n    from kindling.rare import go\n    import kindling.sub\n",
        "rare.py": "def go():\n    pass\n",
        "sub/__init__.py": "_WHERE = {'W': 'worker'}\n"
                           "def __getattr__(n):\n    return __import__(f'{__name__}.{_WHERE[n]}', fromlist=[n])\n",
        "sub/worker.py": "",
        "sub/migrate.py": "from kindling import cli\n",
        "cli.py": "import kindling.rare\n",
    })
    assert layerfiles.reachable(src, ("kindling",)) == {"kindling", "kindling.handler", "kindling.rare",
                                                          "kindling.sub", "kindling.sub.worker"}


def test_the_reader_refuses_a_submodule_chosen_at_run_time_without_a_table(tmp_path):
    src = write_package(tmp_path / "kindling", {
        "__init__.py": "def load(n):\n    return __import__(f'{__name__}.{n}')\n",
        "other.py": "",
    })
    with pytest.raises(layerfiles.DynamicImport):
        layerfiles.reachable(src, ("kindling",))
