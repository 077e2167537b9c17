"""Print the conformance matrix: run the suite, then scenario x path, each cell ``=`` (the
path behaves as the table says), ``= but <observation>: exception: <reason>`` (it does, but
for that observation, an intended difference), ``xfail: <reason>`` (a known difference,
known.py's KNOWN), ``exception: <reason>`` (an intended one for the whole cell, EXCEPTIONS)
or ``FIXED``/``FAILS`` for a cell the tables no longer describe.

Run: .venv/bin/python tests/conformance/matrix.py [matrix.md] [--stack] [extra pytest args]

``--stack`` adds the deployed stack's column (tests/stack/test_conformance_stack.py: LocalStack,
about a minute and a half).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv and not argv[0].startswith("-") else None
    extra = argv[1:] if target else argv
    stack = "--stack" in extra
    extra = [a for a in extra if a != "--stack"]
    with tempfile.TemporaryDirectory() as tmp:
        out, column = Path(tmp) / "matrix.md", Path(tmp) / "stack.md"
        env = dict(os.environ, KINDLING_CONFORMANCE_MATRIX=str(out), KINDLING_CONFORMANCE_MATRIX_STACK=str(column))
        pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=no"]
        code = subprocess.call([*pytest, *extra, str(HERE)], cwd=HERE.parent.parent, env=env, stdout=subprocess.DEVNULL)
        if stack:  # one process: its scenarios share one deployed stack (extra arguments such as -n are not given)
            code |= subprocess.call([*pytest, str(HERE.parent / "stack/test_conformance_stack.py")],
                                    cwd=HERE.parent.parent, env=env, stdout=subprocess.DEVNULL)
        text = out.read_text() if out.exists() else ""
        if stack and column.exists():
            text += "\n" + column.read_text()
    if target is not None:
        target.write_text(text)
    print(text, end="")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
