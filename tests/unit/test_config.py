"""Configuration: one table of every KINDLING_* variable the package reads, one default of
attempts, one rule for how long results are kept."""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest
from kindling.core import policy
from kindling.shared import config

PACKAGE = Path(config.__file__).parents[1]
_NAME = re.compile(r"KINDLING_[A-Z0-9_]+")


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _read_by_module() -> dict[str, set[str]]:
    """Each KINDLING_* name written whole as a string in the package, and the modules that do:
    reading a variable means writing its name (``os.environ.get("KINDLING_X")``, an
    ``env("KINDLING_X", ...)`` default, a name handed to a parser)."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).as_posix() == "tools/cdk.py":
            continue  # writes the function's environment, as template.yaml does: it reads none
        tree = ast.parse(path.read_text())
        rows = {id(n.args[0]) for n in ast.walk(tree)  # the table's own rows name them all
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "Variable"}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and _NAME.fullmatch(node.value)
                    and id(node) not in rows):
                found.setdefault(node.value, set()).add(_module(path))
    return found


def test_every_variable_the_package_reads_is_in_the_table_with_its_readers():
    read = _read_by_module()
    table = {name: set(v.readers) for name, v in config.VARIABLES.items()}
    assert sorted(set(read) - set(table)) == []  # read, but not in the table
    assert sorted(set(table) - set(read)) == []  # in the table, but nothing reads it
    assert {n: sorted(m) for n, m in read.items() if m != table[n]} == {
        n: sorted(table[n]) for n, m in read.items() if m != table[n]}


def test_every_variable_in_the_table_says_what_it_means():
    for name, v in config.VARIABLES.items():
        assert v.name == name and len(v.meaning) > 10 and v.readers, name


def test_reading_a_variable_not_in_the_table_is_an_error():
    with pytest.raises(KeyError):
        config.get("KINDLING_NOT_A_SETTING")
    assert config.get("KINDLING_VALKEY_BATCH", {}) == "100"  # unset: the table's default
    assert config.get("KINDLING_VALKEY_BATCH", {"KINDLING_VALKEY_BATCH": "7"}) == "7"


def _literal_defaults(tree: ast.AST) -> list[int]:
    """Lines where a number is written as the default of ``max_attempts``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            positional = node.args.posonlyargs + node.args.args
            args = positional + node.args.kwonlyargs
            defaults = [None] * (len(positional) - len(node.args.defaults)) + node.args.defaults
            defaults += node.args.kw_defaults
            lines += [node.lineno for a, d in zip(args, defaults, strict=True)
                      if a.arg == "max_attempts" and isinstance(d, ast.Constant) and d.value is not None]
        elif isinstance(node, ast.Dict):
            lines += [k.lineno for k, v in zip(node.keys, node.values, strict=True)
                      if isinstance(k, ast.Constant) and k.value == "max_attempts" and isinstance(v, ast.Constant)]
        elif isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id == "Variable"):
            if node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "KINDLING_MAX_ATTEMPTS":
                lines += [node.lineno for d in node.args[1:] if isinstance(d, ast.Constant)]
            lines += [node.lineno for k in node.keywords if k.arg == "max_attempts" and isinstance(k.value, ast.IfExp)
                      and isinstance(k.value.body, ast.Constant)]
        elif isinstance(node, ast.IfExp) and "max_attempts" in ast.unparse(node.test):
            lines += [node.lineno for b in (node.body, node.orelse) if isinstance(b, ast.Constant) and b.value]
    return lines


# Their max_attempts counts tries of one request (an AWS call, a SendMessageBatch), not a job's.
REQUEST_RETRIES = {"drivers/aws/client.py", "drivers/aws/s3.py", "shared/sqs_send.py"}


def test_the_default_number_of_attempts_is_written_once():
    written = [f"{path.relative_to(PACKAGE)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
               if str(path.relative_to(PACKAGE)) not in REQUEST_RETRIES
               for line in _literal_defaults(ast.parse(path.read_text()))]
    assert written == []
    assert policy.DEFAULT_MAX_ATTEMPTS == 3


def test_the_detector_finds_each_way_a_default_is_written():
    source = '''
def f(max_attempts=3): ...
def g(*, max_attempts: int = 3): ...
options = {"max_attempts": 3}
n = int(env("KINDLING_MAX_ATTEMPTS", "3"))
r = build(3 if max_attempts is None else max_attempts)
'''
    assert len(_literal_defaults(ast.parse(source))) == 5
    assert _literal_defaults(ast.parse("def f(max_attempts=None): ...\nx = {'max_attempts': n}")) == []


def _valkey_worker(monkeypatch, **env):
    from kindling.tools.cli import valkey_worker

    for name in ("KINDLING_RESULT_TTL_DAYS", "KINDLING_RESULT_TTL_S", "KINDLING_MAX_ATTEMPTS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KINDLING_RESULTS", "valkey")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    ns = argparse.Namespace(valkey="redis://127.0.0.1:1/0", table="", stream="s", concurrency=1)
    worker = valkey_worker(ns)
    return worker.runner.ttl_s, worker.runner.store.ttl_s


@pytest.mark.parametrize(("env", "ttl_s"), [
    ({}, policy.DEFAULT_RESULT_TTL_DAYS * 86_400),
    ({"KINDLING_RESULT_TTL_DAYS": "30"}, 30 * 86_400),
    ({"KINDLING_RESULT_TTL_S": "3600"}, 3600),  # the name the stream worker read before
    ({"KINDLING_RESULT_TTL_DAYS": "30", "KINDLING_RESULT_TTL_S": "3600"}, 30 * 86_400),  # days win
])
def test_records_and_their_valkey_keys_expire_together_by_one_rule(monkeypatch, env, ttl_s):
    assert _valkey_worker(monkeypatch, **env) == (ttl_s, ttl_s)


def test_one_default_for_how_long_results_are_kept(monkeypatch):
    from kindling.engine.runner import Runner
    from kindling.stores.results import MemoryResultStore
    from kindling.triggers.sqs.handler import LambdaWorker
    from kindling.valkey import ValkeyResultStore

    monkeypatch.delenv("KINDLING_RESULT_TTL_DAYS", raising=False)
    day = 86_400
    assert {LambdaWorker(store=MemoryResultStore()).runner.ttl_s, Runner(None, MemoryResultStore()).ttl_s,
            ValkeyResultStore("redis://127.0.0.1:1/0").ttl_s} == {policy.DEFAULT_RESULT_TTL_DAYS * day}


def test_a_default_written_beside_a_read_is_the_tables():
    """Where a module reads a variable with a default of its own (the handler, off the table
    for its cold start), that default is the table's: the table documents what runs."""
    differ = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and len(node.args) == 2 and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str) and _NAME.fullmatch(node.args[0].value)
                    and isinstance(node.args[1], ast.Constant)):
                name, written = node.args[0].value, node.args[1].value
                tabled = config.VARIABLES[name].default
                if (str(written) or None) != tabled:
                    differ.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {name}={written!r}, table {tabled!r}")
    assert differ == []
