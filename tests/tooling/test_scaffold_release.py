"""What ``kindling init`` writes comes with the release: a wheel built from this checkout
carries every scaffold file, its template and build files with this repository's content
(they are links here; the wheel must hold the files, not the links)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from support import ROOT
from support.release import install_release

OWN = {"template.yaml": "template.yaml", "layers/kindling/Makefile": "layers/kindling/Makefile",
       "functions/worker/Makefile": "functions/worker/Makefile"}


def test_an_installed_release_scaffolds_with_this_repositorys_template_and_build_files(tmp_path):
    site = install_release(tmp_path)
    probe = ("import json, kindling, kindling.tools.scaffold as s; "
             "print(json.dumps([kindling.__file__, {k: v.decode() for k, v in s.files().items()}]))")
    out = subprocess.run([sys.executable, "-c", probe], env=dict(os.environ, PYTHONPATH=str(site)),
                         capture_output=True, text=True, check=True).stdout
    origin, files = json.loads(out)
    assert origin.startswith(str(site))  # the wheel's copy, not the editable install
    assert {"app.py", "tasks.py"} <= {k.rpartition("/")[2] for k in files if k.startswith("functions/worker/")}
    for rel, source in OWN.items():
        assert files[rel] == (ROOT / source).read_text(), rel
