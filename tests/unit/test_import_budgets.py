"""What each step of the cold path may load, as one table: every row runs its code in a fresh
``python -S`` (no site: nothing but what the code imports) and names the modules it must not
load, must load, or the only ones it may add. A module that a rare path needs is imported
where that path runs; a row here fails the day it moves back to the top of a module.

The first batch's whole budget (the 22 kindling modules of a plain batch) is
tests/unit/test_cold_path.py's; the rows here pin one module's promise each.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "layers/kindling"


@dataclass(frozen=True)
class Probe:
    """``code`` (which may assert what is loaded midway) run after ``setup``: the modules it
    must not load (``absent``, checked against everything loaded at the end), must load
    (``present``), or the only ones ``code`` may add to those ``setup`` loaded (``only``; of
    the packages ``among`` names, if given).
    ``path``: the package from the source tree (``source``), the built layer (``layer``), or
    this interpreter's whole ``sys.path`` (``sys.path``: orjson and the other installed
    packages too)."""

    what: str
    code: str
    absent: frozenset[str] = frozenset()
    present: frozenset[str] = frozenset()
    only: frozenset[str] | None = None
    among: tuple[str, ...] = ()
    setup: str = ""
    path: str = "source"
    clean_env: bool = False  # no inherited environment but PYTHONPATH


STRATEGIES = frozenset({"kindling.engine.execution", "kindling.engine.execution.threaded",
                        "kindling.engine.execution.asyncrun", "kindling.engine.execution.fifo", "asyncio"})


def batch(tasks: list[str], threads: int = 0, group: str | None = None) -> str:
    """A runner's batch of ``tasks`` (``plain``: a function, ``coro``: a coroutine), all succeeding."""
    return textwrap.dedent(f"""
        from kindling.core.envelope import encode_job, new_job
        from kindling.core.registry import Registry
        from kindling.stores.results import MemoryResultStore
        from kindling.engine.runner import Delivery, Runner
        reg = Registry()
        reg.task(name="plain")(lambda: 1)
        async def coro():
            return 2
        reg.task(name="coro")(coro)
        runner = Runner(reg, MemoryResultStore(), threads={threads}, log=None, metrics=False)
        jobs = [new_job(name) for name in {tasks!r}]
        outcomes = runner.run([Delivery(j.id, encode_job(j).decode(), group={group!r}) for j in jobs])
        assert [o.status for o in outcomes] == ["succeeded"] * len(jobs), outcomes
    """)


def strategy(what: str, loaded: set[str], tasks: list[str], threads: int = 0, group: str | None = None) -> Probe:
    return Probe(what, batch(tasks, threads, group), present=frozenset(loaded), absent=STRATEGIES - loaded)


def failing_batch(hook: bool) -> str:
    return textwrap.dedent(f"""
        from kindling.core.envelope import encode_job, new_job
        from kindling.core.registry import Registry
        from kindling.engine.runner import Delivery, Runner
        from kindling.stores.memory import MemoryResultStore
        reg = Registry()
        reg.task(name="boom")(lambda: 1 / 0)
        if {hook}:
            reg.on_failure(lambda job, error: None)
        Runner(reg, MemoryResultStore(), log=None, metrics=False).run(
            [Delivery("m", encode_job(new_job("boom")).decode(), 1)])
    """)


def lambda_worker(init: str) -> str:
    """The Lambda worker made as an init of type ``init`` makes it (``""``: none named)."""
    return textwrap.dedent(f"""
        import os
        if {init!r}:
            os.environ["AWS_LAMBDA_INITIALIZATION_TYPE"] = {init!r}
        os.environ["KINDLING_TABLE"] = "t"
        from kindling.triggers.sqs.handler import LambdaWorker
        LambdaWorker()
    """)


AWS_CHAIN = frozenset({"kindling.drivers.aws.chain", "kindling.drivers.aws.profiles", "kindling.drivers.aws.sts",
                       "kindling.drivers.aws.imds"})

PROBES = [
    Probe("backoff loads nothing but itself (no random: ~1 ms of the cold path)",
          "import kindling.core.backoff", setup="import kindling",
          only=frozenset({"kindling.core.backoff"}), clean_env=True),
    Probe("the standard codec imports neither json nor orjson (nor re)",
          "import kindling.core.codec as c; c.loads('[1]'); c.dumps({'a': 1})",
          absent=frozenset({"json", "orjson", "re"}), path="sys.path"),
    Probe("loading the pytest plugin imports nothing beyond the kindling package (every pytest run loads it)",
          "import kindling.tools.pytest_plugin", setup="import kindling",
          only=frozenset({"kindling.tools", "kindling.tools.pytest_plugin"}),
          among=("kindling", "boto3", "botocore", "moto"), path="sys.path"),
    Probe("importing kindling.valkey loads none of its modules; its names load no valkey client until it connects",
          "import kindling.valkey\n"
          "assert not [m for m in sys.modules if m.startswith('kindling.valkey.') or m == 'valkey'], 'at import'\n"
          "from kindling.valkey import (CHUNK, DEFAULT_GROUP, DEFAULT_STREAM, FIELD, Sent, StreamFull, "
          "StreamProducer, StreamWorker, ValkeyResultStore, connect, default_consumer, drain)",
          absent=frozenset({"valkey"}), path="sys.path"),
    Probe("the worker's command line imports no pathlib, shutil, subprocess or other commands",
          "from kindling.tools import cli\n"
          "cli.parser('worker').parse_args(['worker', '--valkey', 'redis://127.0.0.1:1/0', '--tasks', 'tasks.py', "
          "'--burst', '--concurrency', '8'])",
          absent=frozenset({"pathlib", "shutil", "subprocess", "kindling.tools.ops", "kindling.tools.ops.cli"}),
          path="sys.path"),
    Probe("kindling envelopes never load the Celery message reader",
          textwrap.dedent("""
              from kindling.core.envelope import decode_job, encode_job, new_job
              decode_job(encode_job(new_job("orders.add", [1])).decode())
              for bad in ("{not json", '{"headers": 1}'):
                  try:
                      decode_job(bad)
                  except Exception:
                      pass
          """), absent=frozenset({"kindling.core.celery_message"})),
    Probe("a worker of plain tasks never imports pydantic or the model rule",
          textwrap.dedent("""
              from kindling.core.registry import Registry
              from kindling.tools.testing import eager
              r = Registry()
              def add(a: int, b: int) -> int:
                  return a + b
              add = r.task(name="add")(add)
              with eager():
                  assert add.delay(1, 2).result() == 3
          """), absent=frozenset({"pydantic", "kindling.core.models"}), path="sys.path"),
    Probe("a worker of plain tasks never imports the rate limit",
          textwrap.dedent("""
              from kindling.core.registry import Registry
              from kindling.engine.runner import Delivery, Runner
              from kindling.stores.memory import MemoryResultStore
              from kindling.core.envelope import encode_job, new_job
              r = Registry()
              r.task(name="add")(lambda a, b: a + b)
              Runner(r, MemoryResultStore(), log=None, metrics=False).run(
                  [Delivery("m", encode_job(new_job("add", [1, 2])), 1)])
          """), absent=frozenset({"kindling.core.ratelimit"})),
    Probe("the worker checks a task's arguments without inspect",
          "from kindling.core.registry import Registry\n"
          "t = Registry().task(name='t')(lambda a, b=1: a)\n"
          "t.check_arguments([1], {}); t.check_call([1], {})",
          absent=frozenset({"inspect"}), path="sys.path"),
    Probe("with keys in the environment not one module of the credential chain is loaded",
          textwrap.dedent("""
              import os
              os.environ.update(AWS_ACCESS_KEY_ID="AKIDLAMBDA", AWS_SECRET_ACCESS_KEY="s", AWS_SESSION_TOKEN="t")
              from kindling.drivers.aws.client import get_credentials
              assert get_credentials() == ("AKIDLAMBDA", "s", "t")
          """), present=frozenset({"kindling.drivers.aws.client"}),
          absent=AWS_CHAIN | {"configparser", "subprocess", "shlex", "re"}, path="sys.path"),
    Probe("without keys in the environment the chain reads the shared files",
          textwrap.dedent("""
              import os, tempfile
              for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                           "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                           "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
                  os.environ.pop(name, None)
              folder = tempfile.mkdtemp()
              with open(os.path.join(folder, "credentials"), "w") as f:
                  f.write("[default]\\naws_access_key_id = A\\naws_secret_access_key = s\\n")
              os.environ.update(AWS_SHARED_CREDENTIALS_FILE=os.path.join(folder, "credentials"),
                                AWS_CONFIG_FILE=os.path.join(folder, "config"), AWS_EC2_METADATA_DISABLED="true")
              from kindling.drivers.aws.client import get_credentials
              assert get_credentials()[:2] == ("A", "s")
          """), present=frozenset({"kindling.drivers.aws.chain", "kindling.drivers.aws.profiles"}), path="sys.path"),
    strategy("a batch of two plain jobs runs inline", set(), ["plain", "plain"]),
    strategy("a batch of one job starts no pool", set(), ["plain"], threads=4),
    strategy("a threaded batch loads the threads alone", {"kindling.engine.execution",
             "kindling.engine.execution.threaded"}, ["plain", "plain"], threads=4),
    strategy("a coroutine loads asyncio and its runner alone", {"kindling.engine.execution",
             "kindling.engine.execution.asyncrun", "asyncio"}, ["plain", "coro"]),
    strategy("a FIFO group loads the FIFO strategy alone", {"kindling.engine.execution",
             "kindling.engine.execution.fifo"}, ["plain", "plain"], threads=4, group="g"),
    strategy("a FIFO group with a coroutine loads asyncio too", {"kindling.engine.execution",
             "kindling.engine.execution.fifo", "kindling.engine.execution.asyncrun", "asyncio"},
             ["plain", "coro"], group="g"),
    Probe("without hooks the hooks module is never imported; a hook loads it",
          failing_batch(hook=False) + 'assert "kindling.engine.hooks" not in sys.modules, "loaded without a hook"\n'
          + failing_batch(hook=True), present=frozenset({"kindling.engine.hooks"}), path="layer"),
    Probe("logs and metrics load at the first batch, not at the handler's import",
          "import kindling.triggers.sqs.handler",
          absent=frozenset({"kindling.shared.logs", "kindling.shared.metrics", "logging"}), path="layer"),
    Probe("handles cost the worker nothing", "import app",
          absent=frozenset({"kindling.producer.dispatch", "kindling.tools.testing", "kindling.producer.client",
                            "typing"}), path="layer+worker"),
    *(Probe(f"an init of type {init or 'unnamed'} loads no SnapStart hooks", lambda_worker(init),
            absent=frozenset({"kindling.shared.snapstart", "snapshot_restore_py"}), path="layer")
      for init in ("", "on-demand")),
    Probe("a SnapStart init loads the hooks, and without the runtime's module registers none",
          lambda_worker("snap-start"), present=frozenset({"kindling.shared.snapstart"}),
          absent=frozenset({"snapshot_restore_py"}), path="layer"),
]

RUN = """
import sys
sys.path[:0] = {paths!r}
{setup}
before = set(sys.modules)
{code}
sys.stdout.write(" ".join(sorted(sys.modules)) + "\\n" + " ".join(sorted(set(sys.modules) - before)) + "\\n")
"""


def paths(kind: str, request) -> list[str]:
    if kind == "source":
        return [str(SOURCE)]
    if kind == "sys.path":
        return list(sys.path)
    layer = [str(request.getfixturevalue("layer_python"))]
    return [str(ROOT / "functions/worker"), *layer] if kind == "layer+worker" else layer


@pytest.mark.parametrize("probe", PROBES, ids=[p.what for p in PROBES])
def test_import_budget(probe: Probe, request):
    script = RUN.format(paths=paths(probe.path, request), setup=probe.setup, code=probe.code)
    env = {"PYTHONPATH": str(SOURCE)} if probe.clean_env else None
    done = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True, timeout=60,
                          env=env)
    assert done.returncode == 0, done.stderr
    loaded, added = (set(line.split()) for line in done.stdout.splitlines()[-2:])
    assert sorted(probe.absent & loaded) == []
    assert sorted(probe.present - loaded) == []
    if probe.only is not None:
        assert {m for m in added if not probe.among or m.split(".")[0] in probe.among} == probe.only
