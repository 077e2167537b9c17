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

An exception is an edge (importer, imported): when one is no longer needed, this test says
so, and it comes off the list.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "layers/kindling/kindling"

LAYERS = {
    "core": ["errors", "status", "digest", "codec", "policy", "backoff", "envelope", "records", "registry", "routing",
             "schedules", "jobsig", "batch", "refusals", "result_store", "models", "celery_message", "ratelimit",
             "valkey.keys", "valkey.readsize"],  # no imports; the cluster client (drivers) reads its hash-tag rule
    "drivers": ["aws", "aws.*", "secrets", "valkey.client", "valkey.commands", "valkey.resp", "valkey.errors",
                "valkey.cluster"],
    "shared": ["payloads", "sqs_send", "signed", "logs", "metrics", "otel", "tasklog", "snapstart", "valkey.scheduled",
               "valkey.kick", "valkey.connection",
               "valkey.scripts", "config"],
    "stores": ["results", "stores", "dynamo", "valkey.results"],
    "engine": ["runner", "execution", "execution.*", "followups", "hooks"],
    "triggers": ["sqs", "sqs_io", "tick", "handler", "loop", "valkey", "valkey.worker", "valkey.consumer",
                 "valkey.heartbeat",
                 "valkey.lambda_drain", "valkey.drain_event"],
    "producer": ["client", "handles", "canvas", "dispatch", "coalesce", "valkey.producer"],
    "tools": ["kindling", "testing", "cli", "exits", "demo", "scaffold", "layerfiles", "ops", "ops.*", "dashboard",
              "dashboard.*",
              "valkey.migrate"],
}
ORDER = list(LAYERS)
PEERS = {frozenset({"stores", "engine"})}
NEVER = {("producer", "engine"), ("producer", "triggers")}

# Upward or sideways edges allowed, each with its reason. Keys: (importer, imported).
ALLOWED = {
    # API sugar: a task's handle sends through the producer, lazily.
    ("registry", "dispatch"): "Task.delay/apply_async send through the producer (function-level)",
    ("registry", "canvas"): "Task.s builds a signature (function-level)",
    ("dispatch", "testing"): "eager mode under KINDLING_EAGER=1 (function-level)",
    ("valkey", "valkey.producer"): "the face names its own producer (typing only)",
    # Annotations inside core: free at run time.
    ("policy", "envelope"): "Job in annotations (typing only)",
    ("policy", "registry"): "Task in annotations (typing only)",
    ("envelope", "registry"): "Task in Call's annotations (typing only)",
    ("schedules", "registry"): "Registry and Task in annotations (typing only)",
    ("envelope", "celery_message"): "a body that is not an envelope but a Celery message (function-level)",
    ("batch", "registry"): "Task in annotations (typing only); a direct call sets its job context (function-level)",
    # Same-layer cycles, to break.
    ("runner", "followups"): "only chains and chords load it (function-level)",
}

# Private names taken across modules: (importer, imported, name).
# Private names taken across modules, each to be made public or moved: (importer, imported, name).
PRIVATE_ALLOWED = {
    ("valkey.kick", "aws.client", "_resolve_endpoint"),
    ("valkey.kick", "aws.client", "_resolve_region"),
    ("ops.dead_stream", "ops.dlq", "_records"), ("ops.dlq", "ops.revive", "_release"),
    ("ops.revive", "client", "_fifo_options"),
    ("payloads", "envelope", "_payload_error"),
}

MAX_LINES = 700
OVERSIZE: dict[str, int] = {}  # modules to split, at most their size then; none left


def _name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or "kindling"


MODULES = {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _layer(module: str) -> str | None:
    for layer, patterns in LAYERS.items():
        for pattern in patterns:
            if module == pattern or (pattern.endswith(".*") and module.startswith(pattern[:-1])):
                return layer
    return None


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


def test_every_module_has_a_layer():
    assert [m for m in MODULES if m != "kindling" and _layer(m) is None] == []


def test_imports_go_down_or_are_listed():
    upward = set()
    for m, t, _n, line in EDGES:
        if t == "kindling" or t not in MODULES:  # the package face: free once the package is loaded
            continue
        lm, lt = ORDER.index(_layer(m)), ORDER.index(_layer(t))
        bad = lt > lm or frozenset({_layer(m), _layer(t)}) in PEERS or (_layer(m), _layer(t)) in NEVER
        if bad and (m, t) not in ALLOWED:
            upward.add(f"{m}:{line} -> {t}")
    assert sorted(upward) == []


def test_every_listed_exception_is_still_needed():
    used = {(m, t) for m, t, _n, _l in EDGES}
    assert sorted(f"{m} -> {t}" for m, t in ALLOWED if (m, t) not in used) == []


def test_no_cycle_of_any_kind_once_the_listed_edges_are_out():
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, t, _n, _l in EDGES:
        if t in MODULES and t != "kindling" and (m, t) not in ALLOWED:
            graph[m].add(t)
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(path[path.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_no_module_takes_another_modules_private_names():
    taken = {(m, t, n) for m, t, n, _l in EDGES if n.startswith("_") and not n.startswith("__")}
    assert sorted(taken - PRIVATE_ALLOWED) == []
    assert sorted(PRIVATE_ALLOWED - taken) == []  # made public: off the list


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_grows_past_its_size(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= OVERSIZE.get(module, MAX_LINES)
