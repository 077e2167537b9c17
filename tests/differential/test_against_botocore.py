"""kindling's AWS client answers as botocore does, in every fixture environment of every part
(tests/differential/cases.py), but for the deliberate differences in known.py.

A difference no entry of known.DELIBERATE covers fails its part; so does an entry that no
longer covers any difference (then it is deleted there). ``python tests/differential/report.py``
prints the counts."""

from __future__ import annotations

import pytest
from differential import known
from differential.against_botocore import run


def check(part: str) -> None:
    outcomes = run(part)
    differ = [o for o in outcomes if not o.agree]
    defects = [o for o in differ if known.excuse(o) is None]
    used = {known.excuse(o) for o in differ}
    stale = [name for name, _, _ in known.DELIBERATE[part] if name not in used]
    report = "\n".join(f"{o.case.name}:\n  botocore {o.botocore}\n  kindling {o.kindling}" for o in defects[:20])
    assert not defects, f"{len(defects)} of {len(outcomes)} {part} cases differ from botocore:\n{report}"
    assert not stale, f"deliberate differences that no longer differ (delete them from known.py): {stale}"


def test_the_credential_chain_finds_what_botocore_finds():
    check("credentials")


@pytest.mark.slow
def test_every_region_service_and_variant_resolves_as_botocore():
    check("endpoints")


def test_region_profile_and_config_file_endpoint_settings_resolve_as_botocore():
    check("endpoint settings")


def test_proxies_and_no_proxy_are_read_as_botocore_reads_them():
    check("proxies")
