"""Print how often kindling's AWS client and botocore agree, part by part:
``.venv/bin/python tests/differential/report.py`` (add ``-v`` for every difference)."""

from __future__ import annotations

import os
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/

from differential import known, stub  # noqa: E402
from differential.against_botocore import PARTS, TITLES, run  # noqa: E402


def main(verbose: bool = False) -> None:
    print("| part | cases | agree | disagree | of which deliberate |")
    print("|---|---:|---:|---:|---:|")
    details = []
    for part in PARTS:
        with stub.loopback_only() as attempts:
            outcomes = run(part)
        assert attempts == [], f"connections off loopback: {attempts}"
        differ = [o for o in outcomes if not o.agree]
        excused = Counter(known.excuse(o) for o in differ)
        deliberate = sum(n for name, n in excused.items() if name)
        print(f"| {TITLES[part]} | {len(outcomes):,} | {len(outcomes) - len(differ):,} | {len(differ):,} "
              f"| {deliberate:,} |")
        details += [(part, o, known.excuse(o)) for o in differ]
    if verbose:
        for part, o, name in details:
            print(f"\n[{part}] {o.case.name}{f'  (deliberate: {name})' if name else ''}\n"
                  f"  botocore: {o.botocore}\n  kindling: {o.kindling}")


if __name__ == "__main__":
    main("-v" in sys.argv)
