"""Print the conformance matrix: run the suite, then scenario x path, each cell ``=`` (the
path behaves as the table says), ``= but <observation>: exception: <reason>`` (it does, but
for that observation, an intended difference), ``xfail: <reason>`` (a known difference,
known.py's KNOWN), ``exception: <reason>`` (an intended one for the whole cell, EXCEPTIONS)
or ``FIXED``/``FAILS`` for a cell the tables no longer describe.

Run: .venv/bin/python tests/conformance/matrix.py [matrix.md] [extra pytest args]
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
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "matrix.md"
        env = dict(os.environ, KINDLING_CONFORMANCE_MATRIX=str(out))
        code = subprocess.call([sys.executable, "-m", "pytest", str(HERE), "-q", "-p", "no:cacheprovider",
                                "--tb=no", *extra], cwd=HERE.parent.parent, env=env, stdout=subprocess.DEVNULL)
        text = out.read_text() if out.exists() else ""
    if target is not None:
        target.write_text(text)
    print(text, end="")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
