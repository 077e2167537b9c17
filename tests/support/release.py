"""kindling as a release installs it: a wheel built from this checkout, unpacked into a
directory of its own. Put that directory on PYTHONPATH and ``import kindling`` finds it
before the editable install (a path entry of site-packages), package data included."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from support import ROOT


def install_release(dest: Path) -> Path:
    """Build the wheel from a copy of the checkout (the build writes beside its sources) and
    install it, without dependencies, into ``dest/site``; that directory."""
    src = dest / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    # Links (the scaffold's template and Makefiles) are copied as the files they point at,
    # as a wheel holds them.
    shutil.copytree(ROOT / "layers/kindling", src / "layers/kindling", ignore=ignore)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps",
                    "--no-build-isolation", str(src), "-w", str(dest / "dist")], check=True, timeout=300)
    (wheel,) = (dest / "dist").glob("kindling_jobs-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                    "--target", str(dest / "site"), str(wheel)], check=True, timeout=300)
    return dest / "site"
