"""The docs are a site (mkdocs.yml): every page of docs/ and the README in its nav, built with
``mkdocs build --strict`` (infra/docs/build, in its own virtualenv), with an API reference
generated from the docstrings of the modules programs import."""

from __future__ import annotations

import html
import os
import re
import subprocess

import pytest
import yaml
from support import ROOT


def nav_pages(nav) -> list[str]:
    pages = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_every_page_of_docs_and_the_readme_changelog_and_security_policy_are_in_the_nav():
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)  # !!python tags unread
    pages = nav_pages(config["nav"])
    assert len(pages) == len(set(pages))
    expected = {p.name for p in (ROOT / "docs").glob("*.md")} | {"readme.md", "changelog.md", "security-policy.md"}
    assert sorted(pages) == sorted(expected)


@pytest.mark.slow
def test_the_site_builds_strict_with_the_typed_api_reference(tmp_path):
    site = tmp_path / "site"
    done = subprocess.run([ROOT / "infra/docs/build"], env=dict(os.environ, SITE_DIR=str(site)),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    page = (site / "reference/index.html").read_text()
    for name in ("kindling.task", "kindling.client.Client", "kindling.testing.eager", "kindling.handles.JobHandle",
                 "kindling.valkey.StreamProducer", "kindling.errors.JobFailed"):  # the paths programs import
        assert f'id="{name}"' in page, name
    # The signatures a type checker sees (registry.pyi, handles.pyi): a handle gives the task's R.
    signatures = html.unescape(re.sub(r"<[^>]+>|\s+", "", page))
    assert "delay(*args:P.args,**kwargs:P.kwargs)->Handle[R]" in signatures
    assert "result(timeout:float=...,*,model:None=...)->R" in signatures
    readme = (site / "readme/index.html").read_text()
    assert 'href="../tutorial/"' in readme and 'href="../changelog/"' in readme  # links as the site names them
