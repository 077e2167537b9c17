"""What the Lambda layer ships: the modules a worker can import, read from the import graph.

The wheel holds every module; the layer only those a worker reaches from its entry points
(:data:`ENTRY_POINTS`: the package, the Lambda handler, the stream drain, the stores and
what a task uses to enqueue), following every import that can run: at module level, inside
functions, and through a package's lazy ``__getattr__`` (``__import__(f"{__name__}.{name}")``
reaches each submodule its ``_WHERE`` table names); not those under ``if TYPE_CHECKING:``,
which never runs (and is left out of the bytecode).
What no entry point reaches (the command line, the operator tools, the dashboard, the
scaffold, the demo) stays out, wherever it lives in the package.

What is reached ships in one of two layers (:func:`layer_of`): the worker's (``KindlingLayer``,
with orjson) and, on top of it, the Valkey stream support (``KindlingValkeyLayer``: every
``valkey`` module or folder of a layer folder), which only a deployment with a Valkey URL
attaches. The worker's modules reach the Valkey ones only inside functions that run when a
stream is configured (a drain event, a Valkey URL setting).

The layer's Makefile runs this file by path with the standard library alone
(``python -I -X no_debug_ranges layerfiles.py SRC PYTHON_DIR``, after pip installed orjson
into ``PYTHON_DIR``), so it builds the layer of an installed release as well as of kindling's
own source::

    python -I -X no_debug_ranges kindling/tools/layerfiles.py kindling/ build/python   # prints the count
    python -I -X no_debug_ranges kindling/tools/layerfiles.py --layer valkey kindling/ build-valkey/python
    python -I kindling/tools/layerfiles.py --list kindling/                             # the modules, one a line
    python -I kindling/tools/layerfiles.py --size build/                                # bytes, zipped as sam does
"""

from __future__ import annotations

import ast
import os
import shutil
import sys

PACKAGE = "kindling"

ENTRY_POINTS = (
    "kindling",  # `from kindling import task, current_job` in the tasks module
    "kindling.triggers.sqs.handler",  # the function's handler: SQS batches, stream drains, the ticker
    "kindling.valkey",  # the stream trigger's and producer's face
    "kindling.triggers.valkey.lambda_drain",
    "kindling.triggers.valkey.worker",
    "kindling.stores.memory",  # the result stores a deployment configures
    "kindling.producer.dispatch",  # Task.delay / apply_async inside a job
    "kindling.producer.canvas",  # task.s(), chain, group, chord inside a job
    "kindling.producer.client",
    # The names a task module imports at their old paths (re-exports of the modules above).
    "kindling.handler", "kindling.client", "kindling.handles", "kindling.canvas", "kindling.dispatch",
    "kindling.errors", "kindling.records", "kindling.status", "kindling.tasklog",
)
"""Where a worker starts importing kindling: everything the layer ships is reached from here."""

DATA_FOLDERS = ("__pycache__", "scaffold_files")
"""Folders of the source package that hold no modules of the worker's."""

DATA = ()
"""Files other than modules that the runtime reads (none: the worker reads no package data)."""


def modules(src: str) -> dict[str, str]:
    """Every module of the package whose source directory is ``src``: name to path."""
    found = {}
    for directory, dirs, files in os.walk(src):
        # The layer folders are namespace packages (no __init__.py); data folders are not packages.
        dirs[:] = sorted(d for d in dirs if d.isidentifier() and d not in DATA_FOLDERS)
        rel = os.path.relpath(directory, src)
        prefix = PACKAGE if rel == "." else PACKAGE + "." + rel.replace(os.sep, ".")
        for name in sorted(files):
            if name.endswith(".py"):
                stem = name[:-3]
                found[prefix if stem == "__init__" else f"{prefix}.{stem}"] = os.path.join(directory, name)
    return found


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _typing_only(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (with no ``else``): a block that never runs."""
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
            and not node.orelse)


def _runs(tree: ast.AST):
    """Every node of ``tree`` but those inside ``if TYPE_CHECKING:`` blocks."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(child for child in ast.iter_child_nodes(node) if not _typing_only(child))


def _lazy_table(tree: ast.Module) -> list[str]:
    """The values of a module-level ``_WHERE = {...}`` table of string constants."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) \
                and any(isinstance(t, ast.Name) and t.id == "_WHERE" for t in node.targets):
            return [v.value for v in node.value.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return []


class DynamicImport(Exception):
    """A module imports a kindling module by a name this reading cannot resolve."""


def imports(name: str, path: str, known: dict[str, str]) -> set[str]:
    """The package's modules that ``name`` (at ``path``) can import, wherever the import
    statement is; importing ``a.b.c`` runs ``a`` and ``a.b`` too."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    is_package = os.path.basename(path) == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    targets: list[str] = []
    for node in _runs(tree):
        if isinstance(node, ast.Import):
            targets += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets.append(module)
            targets += [f"{module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and (
                (isinstance(node.func, ast.Name) and node.func.id == "__import__")
                or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")):
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                targets.append(arg.value)
            elif isinstance(arg, ast.JoinedStr):
                # A lazy face: __import__(f"{__name__}.{module}") or f"kindling.{module}", with
                # module taken from its _WHERE table.
                first = arg.values[0] if arg.values else None
                if (isinstance(first, ast.FormattedValue) and isinstance(first.value, ast.Name)
                        and first.value.id == "__name__"):
                    prefix = name
                elif isinstance(first, ast.Constant) and first.value == PACKAGE + ".":
                    prefix = PACKAGE
                else:
                    raise DynamicImport(f"{path}:{node.lineno}: a module chosen at run time from an unknown prefix")
                table = _lazy_table(tree)
                if not table:
                    raise DynamicImport(f"{path}:{node.lineno}: a submodule chosen at run time, with no _WHERE table")
                targets += [f"{prefix}.{module}" for module in table]
    found = set()
    for target in targets:
        found.update(m for m in _with_parents(target) if m in known)
    found.discard(name)
    return found


def reachable(src: str, entry_points=ENTRY_POINTS) -> set[str]:
    """The modules the entry points can import, directly or not (the entry points included)."""
    known = modules(src)
    missing = [e for e in entry_points if e not in known]
    if missing:
        raise SystemExit(f"layerfiles: no module {', '.join(missing)} in {src}")
    seen: set[str] = set()
    todo = [m for e in entry_points for m in _with_parents(e)]
    while todo:
        name = todo.pop()
        if name in seen or name not in known:  # a namespace folder: no file, nothing it imports
            continue
        seen.add(name)
        todo.extend(imports(name, known[name], known) - seen)
    return seen


VALKEY = "valkey"
"""The optional layer: the Valkey stream support (``KindlingValkeyLayer``, which template.yaml
attaches only when a Valkey URL is configured)."""

LAYERS = ("kindling", VALKEY)
"""The layers built from the package: the worker's (SQS batches, the ticker, the stores, the
producers' SQS path, orjson) and the Valkey one that goes on top of it."""


def layer_of(name: str) -> str:
    """The layer a reachable module ships in: the Valkey layer for a layer folder's ``valkey``
    module or ``valkey/`` folder (``kindling.drivers.valkey.client``, ``kindling.stores.valkey``),
    the worker's for every other (the ``kindling.valkey`` face included: with the Valkey layer
    absent it names the layer that is missing)."""
    return VALKEY if VALKEY in name.split(".")[2:] else "kindling"


def layer_paths(src: str, layer: str = "kindling") -> list[str]:
    """The files the layer ``layer`` ships, relative to ``src``."""
    known = modules(src)
    return sorted(os.path.relpath(known[m], src) for m in reachable(src) if layer_of(m) == layer) \
        + (list(DATA) if layer == "kindling" else [])


LAYER_ROOT = "/opt/python"
"""Where Lambda puts the layer's ``python/``: the file names tracebacks show."""


def _strip(tree: ast.Module) -> tuple[ast.Module, int]:
    """The module without what nothing in the worker reads or runs: docstrings, function
    annotations, module-level variable annotations, ``if TYPE_CHECKING:`` blocks, and the
    ``from __future__`` statements (their compiler flags, returned, still apply; the import
    itself would load ``__future__`` at run time). The class-level annotations a NamedTuple
    or dataclass reads stay, and so do line numbers."""
    import __future__

    flags = 0
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and any(_typing_only(s) for s in block):
                kept = [s for s in block if not _typing_only(s)]
                setattr(node, field, kept or [ast.copy_location(ast.Pass(), block[0])])
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None:
                    arg.annotation = None
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                if len(body) > 1:
                    del body[0]
                else:
                    body[0] = ast.copy_location(ast.Pass(), body[0])
    body = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                flags |= getattr(__future__, alias.name).compiler_flag
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if node.value is not None:
                body.append(ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node))
        else:
            body.append(node)
    tree.body = body or [ast.Pass()]
    return ast.fix_missing_locations(tree), flags


def bytecode(source: bytes, filename: str) -> bytes:
    """A sourceless ``.pyc`` of ``source``: an unchecked-hash header (valid whatever mtimes
    the zip leaves, and reproducible) and the code compiled without docstrings, function
    annotations or column positions (``-X no_debug_ranges``: tracebacks keep file and line)."""
    import importlib.util
    import marshal

    if "no_debug_ranges" not in sys._xoptions:
        raise SystemExit("layerfiles: run with -X no_debug_ranges (the column tables would double the bytecode)")
    tree, flags = _strip(ast.parse(source, filename))
    code = compile(tree, filename, "exec", flags=flags, dont_inherit=True)
    header = importlib.util.MAGIC_NUMBER + (0b01).to_bytes(4, "little") + importlib.util.source_hash(source)
    return header + marshal.dumps(code)


def build(src: str, out: str, layer: str = "kindling") -> list[str]:
    """Write the layer's kindling into ``out`` (``python/kindling``): each module of ``layer``
    the worker reaches, as sourceless bytecode in place of its source (``/opt`` is read-only:
    bytecode the runtime cannot write must ship, and the source it would never read need not).
    Lambda extracts every layer of a function into ``/opt``: the Valkey layer's files land
    beside the worker layer's, in the same folders."""
    paths = layer_paths(src, layer)
    for rel in paths:
        with open(os.path.join(src, rel), "rb") as f:
            source = f.read()
        target = os.path.join(out, rel + "c")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(bytecode(source, os.path.join(LAYER_ROOT, PACKAGE, rel)))
    return paths


KEEP_IN_DIST_INFO = ("METADATA", "licenses", "LICENSE", "LICENSE.txt")
"""What a third-party distribution keeps of its ``.dist-info``: ``METADATA`` and its licenses."""

METADATA_HEADERS = ("Metadata-Version", "Name", "Version", "Summary", "License-Expression", "License-File",
                    "Requires-Python", "Requires-Dist")
"""The ``METADATA`` headers kept: what ``importlib.metadata`` answers with (name, version,
requirements) and the license; not the classifiers, URLs or long description."""


def strip_third_party(python: str) -> None:
    """Take out of the layer's ``python/`` (orjson, as pip installs it) what the runtime never
    reads: type stubs, ``py.typed``, tests, scripts, and of ``.dist-info`` all but its
    licenses and ``METADATA``'s main headers; each module is left as bytecode in place of its
    source, as kindling's are."""
    for directory, dirs, files in os.walk(python, topdown=True):
        if os.path.relpath(directory, python).split(os.sep)[0] == PACKAGE:
            dirs[:] = []
            continue
        for name in list(dirs):
            if name in ("tests", "test", "bin", "__pycache__"):
                shutil.rmtree(os.path.join(directory, name))
                dirs.remove(name)
        for name in files:
            path = os.path.join(directory, name)
            if name.endswith(".pyi") or name == "py.typed":
                os.remove(path)
            elif name.endswith(".py"):
                with open(path, "rb") as f:
                    source = f.read()
                with open(path + "c", "wb") as f:
                    f.write(bytecode(source, os.path.join(LAYER_ROOT, os.path.relpath(path, python))))
                os.remove(path)
        if directory.endswith(".dist-info"):
            for name in list(dirs) + files:
                if name not in KEEP_IN_DIST_INFO:
                    path = os.path.join(directory, name)
                    shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
            dirs[:] = []
            metadata = os.path.join(directory, "METADATA")
            if os.path.isfile(metadata):
                with open(metadata, encoding="utf-8") as f:
                    headers = f.read().split("\n\n", 1)[0].splitlines()
                with open(metadata, "w", encoding="utf-8") as f:
                    f.write("".join(f"{h}\n" for h in headers if h.split(":", 1)[0] in METADATA_HEADERS))


def zipped_size(layer: str) -> int:
    """The bytes of the layer directory ``layer`` (the one holding ``python/``) zipped as
    ``sam deploy`` uploads it: each file deflated at zlib's default level, no directory entries."""
    import io
    import zipfile

    if not os.path.isdir(os.path.join(layer, "python")):
        raise SystemExit(f"layerfiles: no python/ in {layer}: build the layer first")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for directory, dirs, files in os.walk(layer):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(directory, name)
                archive.write(path, os.path.relpath(path, layer))
    return len(buffer.getvalue())


def main(argv: list[str]) -> int:
    layer = "kindling"
    if argv[:1] == ["--layer"] and len(argv) > 1 and argv[1] in LAYERS:
        layer, argv = argv[1], argv[2:]
    if argv[:1] == ["--list"] and len(argv) == 2:
        print("\n".join(layer_paths(argv[1], layer)))
        return 0
    if argv[:1] == ["--size"] and len(argv) == 2:
        print(zipped_size(argv[1]))
        return 0
    if len(argv) != 2:
        print("usage: layerfiles.py [--layer kindling|valkey] SRC PYTHON_DIR | [--layer ...] --list SRC"
              " | --size LAYER_DIR", file=sys.stderr)
        return 2
    src, python = argv
    paths = build(src, os.path.join(python, PACKAGE), layer)
    if layer == "kindling":
        strip_third_party(python)
    print(f"layer {layer}: {len(paths)} of {len(modules(src))} modules of {PACKAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
