import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def layer_python(tmp_path_factory) -> Path:
    """The layer's python/ directory, built by its own Makefile as `sam build` would."""
    out = tmp_path_factory.mktemp("layer")
    subprocess.run(
        ["make", "-s", "-C", str(ROOT / "layers/kindling"), "build-KindlingLayer",
         f"ARTIFACTS_DIR={out}", f"PYTHON={sys.executable}"],
        check=True,
    )
    return out / "python"
