"""The benchmark harness names kindling's modules where they are: every ``kindling.x.y`` the
scripts under infra/bench import, or write into a child's ``-c`` code, is a module (or a name
of one) of the package. A harness left behind by a move fails here, not half an hour into
``make bench``."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOTTED = re.compile(r"\bkindling(?:\.[a-z_][a-z0-9_]*)+")
FROM = re.compile(r"from (kindling(?:\.[a-z_][a-z0-9_]*)*) import ([A-Za-z_][\w, ]*)")


def _resolves(name: str) -> bool:
    try:
        if importlib.util.find_spec(name) is not None:
            return True
    except ModuleNotFoundError:
        pass
    parent, _, attr = name.rpartition(".")
    try:
        return hasattr(importlib.import_module(parent), attr)
    except ImportError:
        return False


def test_every_kindling_module_the_harness_names_exists():
    missing = []
    for path in sorted((ROOT / "infra/bench").rglob("*.py")):
        if ".venv" in path.parts:
            continue
        text = path.read_text()
        names = set(DOTTED.findall(text))
        for module, imported in FROM.findall(text):
            names |= {f"{module}.{n.strip().split(' ')[0]}" for n in imported.split(",") if n.strip()}
        missing += [f"{path.relative_to(ROOT)}: {n}" for n in sorted(names) if not _resolves(n)]
    assert missing == []
