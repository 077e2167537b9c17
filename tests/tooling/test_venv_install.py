"""infra/venv/install, how the Makefile and infra/localstack/ctl make their virtualenvs: uv
when it can be had, pip when it cannot, the same pip install arguments either way."""

from __future__ import annotations

import os
import subprocess
import sys

from support import ROOT

INSTALL = ROOT / "infra/venv/install"


def recorder(path, calls):
    """An executable that appends its arguments to ``calls``; as ``python -m venv DIR`` it
    also puts a copy of itself at DIR/bin/python, as venv would."""
    path.write_text(f'#!/bin/sh\necho "$0 $*" >> {calls}\n'
                    'if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; fi\n')
    path.chmod(0o755)
    return path


def test_uv_makes_the_virtualenv_and_installs_with_the_same_arguments(tmp_path):
    calls = tmp_path / "calls"
    fake_uv = recorder(tmp_path / "uv", calls)
    env = dict(os.environ, KINDLING_UV=str(fake_uv))
    subprocess.run([INSTALL, tmp_path / "venv", sys.executable, "-e", ".[dev]", "-c", "pins.txt"],
                   env=env, check=True, timeout=60)
    venv = tmp_path / "venv"
    assert calls.read_text().splitlines() == [
        f"{fake_uv} venv --quiet --seed --python {sys.executable} {venv}",  # --seed: pip is in it, as venv puts it
        f"{fake_uv} pip install --quiet --compile-bytecode --python {venv}/bin/python -e .[dev] -c pins.txt",
    ]


def test_without_uv_pip_makes_the_virtualenv_and_the_same_install(tmp_path):
    calls = tmp_path / "calls"
    python = recorder(tmp_path / "python3.13", calls)
    venv = tmp_path / "venv"
    env = dict(os.environ, KINDLING_UV="none")
    subprocess.run([INSTALL, venv, python, "-e", ".[dev]", "-c", "pins.txt"], env=env, check=True, timeout=60)
    assert calls.read_text().splitlines() == [
        f"{python} -m venv {venv}",
        f"{venv}/bin/python -m pip install --quiet --disable-pip-version-check -e .[dev] -c pins.txt",
    ]
    calls.unlink()
    subprocess.run([INSTALL, venv, python, "-r", "more.txt"], env=env, check=True, timeout=60)
    assert calls.read_text().splitlines() == [  # the virtualenv is there: installed into, not made again
        f"{venv}/bin/python -m pip install --quiet --disable-pip-version-check -r more.txt",
    ]
