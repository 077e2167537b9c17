"""Each vocabulary has one home, read from the source: a job's or a chord's status is never
retyped as a string outside :mod:`kindling.core.status`, and is imported from there, not from a
module that happens to import it too; the job-id charset is written in
:mod:`kindling.core.envelope` alone, and every record key prefix (``<kind>#``) in
:mod:`kindling.core.records` alone.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "layers/kindling/kindling"
ROOT = PACKAGE.parents[2]

# The words themselves, written out: reading them from kindling.core.status would let a word
# dropped from there pass unnoticed here.
STATUS_WORDS = {"succeeded", "failed", "dead", "rejected", "skipped", "deferred", "duplicate", "queued", "revoked",
                "scheduled", "waiting", "completed"}
STATUS_NAMES = {"Status", "SUCCEEDED", "FAILED", "DEAD", "REJECTED", "SKIPPED", "DEFERRED", "DUPLICATE", "QUEUED",
                "REVOKED", "SCHEDULED", "RECORDED", "BY_STATUS", "FINAL", "FAILED_FINAL", "RAN", "SETTLED",
                "HANDED_BACK", "REVIVABLE", "GENERATION_CHECKED", "NEWER_GENERATION", "WAITING", "COMPLETED",
                "CHORD_STATUSES"}


def _words(node: ast.AST) -> list[ast.Constant]:
    """The status words ``node`` is, or holds as a tuple, list or set literal."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [n for n in items if isinstance(n, ast.Constant) and n.value in STATUS_WORDS]


def _is(node: ast.AST | None, text: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == text


def _retyped(tree: ast.AST) -> list[ast.Constant]:
    """Status words used as statuses: compared, written as a record's ``status`` (keyword,
    key, item or DynamoDB ``{"S": ...}`` value), or keying a table by status."""
    found: list[ast.Constant] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                found += _words(operand)
        elif isinstance(node, ast.Call):
            found += [w for k in node.keywords if k.arg == "status" for w in _words(k.value)]
            if len(node.args) >= 2 and _is(node.args[0], "status"):  # .get("status", "x"), .setdefault(...)
                found += _words(node.args[1])
        elif isinstance(node, ast.Dict):
            keyed = [k for k in node.keys if k is not None and _words(k)]
            if len(keyed) >= 2:  # a table keyed by status
                found += keyed
            found += [w for k, v in zip(node.keys, node.values, strict=True) if _is(k, "status") or _is(k, "S")
                      for w in _words(v)]
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and _is(target.slice, "status"):
                    found += _words(node.value)
    return found


def test_no_status_is_retyped_outside_the_status_module():
    retyped = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "status.py" and path.parent == PACKAGE:
            continue
        for const in _retyped(ast.parse(path.read_text())):
            retyped.append(f"{path.relative_to(PACKAGE)}:{const.lineno} {const.value!r}")
    assert retyped == []


def test_the_word_lists_hold_every_status_and_every_name_the_status_module_exports():
    """A status added to kindling.core.status and not here would be retyped unseen."""
    from kindling.core import status

    assert status.Status.ALL | status.CHORD_STATUSES <= STATUS_WORDS
    constants = {name for name in status.__all__ if name.isupper() or name == "Status"}
    members = {name for name, value in vars(status).items()
               if name.isupper() and isinstance(value, str) and value in status.Status.ALL}
    assert constants | members <= STATUS_NAMES


def test_the_detector_finds_each_way_a_status_is_retyped():
    source = '''
if r["status"] == "dead": pass
if s in ("failed", "dead"): pass
rec.update(status="completed")
rec.setdefault("status", "waiting")
v = {":w": {"S": "waiting"}}
counts = {"succeeded": 1, "failed": 2}
rec["status"] = "dead"
'''
    assert sorted(c.value for c in _retyped(ast.parse(source))) == sorted(
        ["dead", "failed", "dead", "completed", "waiting", "waiting", "succeeded", "failed", "dead"])
    assert _retyped(ast.parse('x = {"failed": 3, "ok": 1}; rec.get("dead"); names = {"#dead": "dead"}')) == []


def _status_imports(path: Path) -> list[str]:
    bad = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "kindling"
                and node.module != "kindling.core.status"):
            bad += [f"{path.relative_to(ROOT)}:{node.lineno} {a.name} from {node.module}"
                    for a in node.names if a.name in STATUS_NAMES]
    return bad


def test_statuses_are_imported_from_the_status_module():
    files = [*PACKAGE.rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "functions").rglob("*.py")]
    assert [b for p in sorted(files) for b in _status_imports(p)] == []


def test_the_runner_does_not_export_the_statuses():
    tree = ast.parse((PACKAGE / "engine/runner.py").read_text())
    exported = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets))
    assert sorted(set(exported) & STATUS_NAMES) == []


def _constants(path: Path) -> list[ast.Constant]:
    nodes = ast.walk(ast.parse(path.read_text()))
    return [n for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_the_job_id_charset_is_written_in_policy_alone():
    """Its punctuation (``-_.:``) is the mark of a charset retyped: a chord id or a tick's
    job id checked against a copy would drift from what ``policy.is_job_id`` accepts. A
    message may name them (``letters, digits and -_.:``)."""
    written = [f"{p.relative_to(PACKAGE)}:{c.lineno}" for p in sorted(PACKAGE.rglob("*.py"))
               for c in _constants(p) if "-_.:" in c.value.replace("letters, digits and -_.:", "")
               and p.relative_to(PACKAGE) != Path("core/policy.py")]
    assert written == []


def test_every_record_key_prefix_is_written_in_records_alone():
    """``#`` occurs in no job id, so ``<kind>#<id>`` keys never land on a job's record:
    the kinds (rejected, chord, revive...) are one list, in one module."""
    prefixes = [f"{p.relative_to(PACKAGE)}:{c.lineno} {c.value!r}" for p in sorted(PACKAGE.rglob("*.py"))
                if p.relative_to(PACKAGE) != Path("core/records.py")
                for c in _constants(p) if c.value.endswith("#") and c.value[:-1].isalpha() and c.value.islower()
                ]
    assert prefixes == []


_LUA_STATUS = re.compile(r"status\s*(?:==|~=|=|or)\s*'([a-z ]+)'")


def test_the_lua_scripts_write_only_the_status_modules_words():
    """Lua cannot import kindling.core.status: the scripts spell the words out, so each one they
    compare or write must be one the status module defines."""
    from kindling.core import status

    known = status.Status.ALL | status.CHORD_STATUSES
    spelled = {(f"{p.relative_to(PACKAGE)}", word) for p in sorted(PACKAGE.rglob("*.py")) for c in _constants(p)
               if "redis.call" in c.value for word in _LUA_STATUS.findall(c.value)}
    assert spelled  # the scripts do spell statuses: the pattern still finds them
    assert sorted((p, w) for p, w in spelled if w not in known) == []
