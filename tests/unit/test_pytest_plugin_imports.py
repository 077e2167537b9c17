"""kindling's pytest plugin is loaded by every pytest run where kindling is installed, so
loading it costs what ``import kindling`` costs and no more: each fixture imports what it
uses when a test asks for it. No worker reaches it, so the Lambda layer leaves it out."""

from __future__ import annotations

import subprocess
import sys

from support import ROOT

PROBE = "import sys, {module}; print(sorted(m for m in sys.modules if m.split('.')[0] in ('kindling', 'boto3', "\
        "'botocore', 'moto')))"


def loaded(module: str) -> str:
    return subprocess.run([sys.executable, "-c", PROBE.format(module=module)], capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()


def test_loading_the_plugin_imports_nothing_beyond_the_kindling_package():
    package = eval(loaded("kindling"))
    # tools/ is a namespace folder: no file, no code
    assert eval(loaded("kindling.tools.pytest_plugin")) == sorted({*package, "kindling.tools",
                                                                   "kindling.tools.pytest_plugin"})


def test_the_plugin_is_left_out_of_the_layer():
    """The layer holds the modules a worker's entry points reach (kindling/tools/layerfiles.py)."""
    listed = subprocess.run([sys.executable, "-I", str(ROOT / "layers/kindling/kindling/tools/layerfiles.py"), "--list",
                             str(ROOT / "layers/kindling/kindling")], capture_output=True, text=True, check=True,
                            timeout=60).stdout.split()
    assert listed and not [m for m in listed if "pytest_plugin" in m], listed
