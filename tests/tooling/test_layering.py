"""The package's layering, read from the source: imports go one way, from a layer to its own
or a lower one; the few that go up are listed here with their reason; no cycle of any kind
(module-level, function-level or typing-only) is left once those are taken out; no module
takes another's private names; no module grows past its size.

The layers (lowest first) and what each holds:

- core: rules and vocabularies, no I/O;
- drivers: wire protocols (AWS, RESP), no job concepts;
- shared: what the worker and the producer both use (payloads, signing, logs, metrics...);
- stores: the result stores; engine: the runner. Peers: neither imports the other (the
  runner knows a store only by its protocol);
- triggers: messages in, settlement out (SQS, the Lambda handler, the stream worker);
- producer: enqueue and read outcomes; it never imports the engine or the triggers;
- tools: outside Lambda (testing, the command line, operator tools, the dashboard).

Each layer is a folder of the package (layers/kindling/kindling/<layer>/), and a module's
layer is read from where it sits: there is no list of modules to keep up. A layer folder is a
namespace package (no __init__.py): going through one loads no code on the cold path.

An exception is an edge (importer, imported): when one is no longer needed, this test says
so, and it comes off the list.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "layers/kindling/kindling"

# The layers, lowest first: each is a folder of the package, and a module's layer is the
# folder it sits in. What sits outside them is a face: the package's own (kindling), the
# kindling.valkey face, and the names users import kept at their old paths (re-exports).
ORDER = ["core", "drivers", "shared", "stores", "engine", "triggers", "producer", "tools"]
HOLDS = {  # docs/architecture.md's table says this of each layer (test_the_docs_table_is_the_tree)
    "core": "rules and vocabularies, no I/O",
    "drivers": "wire protocols (AWS, RESP), no job concepts",
    "shared": "what the worker and the producer both use",
    "stores": "the result stores",
    "engine": "the runner",
    "triggers": "messages in, settlement out",
    "producer": "enqueue and read outcomes",
    "tools": "outside Lambda",
}
PEERS = {frozenset({"stores", "engine"})}
NEVER = {("producer", "engine"), ("producer", "triggers")}
FACES_WITH_CODE = {"kindling", "valkey"}  # the others only re-export

# Upward or sideways edges allowed, each with its reason. Keys: (importer, imported).
ALLOWED = {
    # API sugar on a task: the producer is imported at the call, never by a worker.
    ("core.registry", "producer.dispatch"): "Task.delay/apply_async send through the producer (function-level)",
    ("core.registry", "producer.canvas"): "Task.s builds a signature (function-level)",
    ("producer.dispatch", "tools.testing"): "eager mode under KINDLING_EAGER=1 (function-level)",
}

# Private names taken across modules, each to be made public or moved: (importer, imported, name).
PRIVATE_ALLOWED = {
    ("shared.valkey.kick", "drivers.aws.client", "_resolve_endpoint"),
    ("shared.valkey.kick", "drivers.aws.client", "_resolve_region"),
    ("tools.ops.dead_stream", "tools.ops.dlq", "_records"), ("tools.ops.dlq", "tools.ops.revive", "_release"),
    ("tools.ops.revive", "producer.client", "_fifo_options"),
    ("shared.payloads", "core.envelope", "_payload_error"),
}

MAX_LINES = 700
# Modules to split, at most their size then: the runner's import of records grew to one name a
# line (ruff's wrapping) with the longer module path.
OVERSIZE: dict[str, int] = {"engine.runner": 707}


def _name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or "kindling"


MODULES = {_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "scaffold_files" not in p.parts}


def _layer(module: str) -> str | None:
    """The folder a module sits in, or None for a face."""
    top = module.split(".")[0]
    return top if top in ORDER else None


def _imports(module: str) -> list[tuple[str, str, int]]:
    """(imported module, name or "", line) for every kindling import, at any depth."""
    path = MODULES[module]
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name.removeprefix("kindling").lstrip(".") or "kindling", "", node.lineno)
                      for a in node.names if a.name.split(".")[0] == "kindling"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1] if node.level > 1 else package
                target = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module and node.module.split(".")[0] == "kindling":
                target = node.module.removeprefix("kindling").lstrip(".")
            else:
                continue
            for a in node.names:
                sub = f"{target}.{a.name}" if target else a.name
                if sub in MODULES:
                    found.append((sub, "", node.lineno))
                else:
                    found.append((target or "kindling", a.name, node.lineno))
    return found


EDGES = {(m, t, name, line) for m in MODULES for t, name, line in _imports(m) if t != m}


def test_every_module_is_in_a_layer_folder_or_is_a_face_that_re_exports():
    faces = [m for m in MODULES if _layer(m) is None and m not in FACES_WITH_CODE]
    assert [m for m in faces if "stays for the code that imports it" not in MODULES[m].read_text()] == []


def test_the_layer_folders_are_namespace_packages_and_nothing_else_stands_beside_them():
    assert [layer for layer in ORDER if (PACKAGE / layer / "__init__.py").exists()] == []
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders - set(ORDER) == {"valkey", "scaffold_files"}  # a face and data


def test_no_layer_imports_a_face():
    """The faces are for the code outside: inside, a module imports where a name lives."""
    found = sorted(f"{m}:{line} -> {t}" for m, t, _n, line in EDGES
                   if _layer(m) and t in MODULES and _layer(t) is None and t != "kindling")
    assert found == []


def test_imports_go_down_or_are_listed():
    upward = set()
    for m, t, _n, line in EDGES:
        if t not in MODULES or _layer(m) is None or _layer(t) is None:  # faces: the test above
            continue
        lm, lt = ORDER.index(_layer(m)), ORDER.index(_layer(t))
        bad = lt > lm or frozenset({_layer(m), _layer(t)}) in PEERS or (_layer(m), _layer(t)) in NEVER
        if bad and (m, t) not in ALLOWED:
            upward.add(f"{m}:{line} -> {t}")
    assert sorted(upward) == []


def test_every_listed_exception_is_still_needed():
    used = {(m, t) for m, t, _n, _l in EDGES}
    assert sorted(f"{m} -> {t}" for m, t in ALLOWED if (m, t) not in used) == []


def _circles() -> list[list[str]]:
    """The import graph's strongly connected components of more than one module (Tarjan):
    every kind of import counts, but the listed exceptions and the faces."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, t, _n, _l in EDGES:
        if t in MODULES and _layer(m) and _layer(t) and (m, t) not in ALLOWED:
            graph[m].add(t)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = [stack.pop()]
            while scc[-1] != v:
                scc.append(stack.pop())
            if len(scc) > 1:
                found.append(sorted(scc))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_cycle_of_any_kind_once_the_listed_edges_are_out():
    """A module-level, function-level or typing-only import all count: a module below another
    names it in no annotation either (it states what it reads of it as a protocol of its own)."""
    assert _circles() == []


def test_no_module_takes_another_modules_private_names():
    taken = {(m, t, n) for m, t, n, _l in EDGES if n.startswith("_") and not n.startswith("__")}
    assert sorted(taken - PRIVATE_ALLOWED) == []
    assert sorted(PRIVATE_ALLOWED - taken) == []  # made public: off the list


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_grows_past_its_size(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= OVERSIZE.get(module, MAX_LINES)


def layer_table() -> str:
    """docs/architecture.md's layer table, from the folders (a package with an __init__.py
    of its own, such as drivers/aws/, is one entry: ``aws.*``)."""
    rows = ["| layer | holds | modules |", "|---|---|---|"]
    for layer in ORDER:
        names = set()
        for m in MODULES:
            if _layer(m) != layer:
                continue
            parts = m.split(".")[1:]
            for i in range(1, len(parts) + 1):  # the first regular package on the way
                if (PACKAGE / layer).joinpath(*parts[:i], "__init__.py").exists():
                    parts = [*parts[:i], "*"]
                    break
            names.add(".".join(parts))
        rows.append(f"| {layer} | {HOLDS[layer]} | {', '.join(f'`{n}`' for n in sorted(names))} |")
    return "\n".join(rows)


def test_the_docs_table_is_the_tree():
    """Printed by ``python tests/tooling/test_layering.py``, pasted into docs/architecture.md."""
    docs = (PACKAGE.parents[2] / "docs/architecture.md").read_text()
    assert layer_table() in docs


if __name__ == "__main__":
    print(layer_table())
