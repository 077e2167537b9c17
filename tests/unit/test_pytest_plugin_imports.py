"""kindling's pytest plugin is loaded by every pytest run where kindling is installed, so
loading it costs what ``import kindling`` costs and no more: each fixture imports what it
uses when a test asks for it (held by tests/unit/test_import_budgets.py). No worker reaches it,
so the Lambda layer leaves it out."""

from __future__ import annotations

import subprocess
import sys

from support import ROOT


def test_the_plugin_is_left_out_of_the_layer():
    """The layer holds the modules a worker's entry points reach (kindling/tools/layerfiles.py)."""
    listed = subprocess.run([sys.executable, "-I", str(ROOT / "layers/kindling/kindling/tools/layerfiles.py"), "--list",
                             str(ROOT / "layers/kindling/kindling")], capture_output=True, text=True, check=True,
                            timeout=60).stdout.split()
    assert listed and not [m for m in listed if "pytest_plugin" in m], listed
