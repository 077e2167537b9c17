"""template.yaml as the tests read it: as committed, or rendered with named queues by
infra/queues/render.py (the committed one has none), parsed as CloudFormation reads it."""

from __future__ import annotations

import sys

from support import ROOT

if str(ROOT / "infra/queues") not in sys.path:
    sys.path.insert(0, str(ROOT / "infra/queues"))
import render  # noqa: E402

__all__ = ["render", "template"]


def template(queues: list[str] | None = None) -> dict:
    """template.yaml, rendered with ``queues`` when given, as a dict of CloudFormation."""
    from cfnlint.decode import cfn_yaml

    text = (ROOT / "template.yaml").read_text()
    return cfn_yaml.loads(render.render(text, queues) if queues is not None else text)
