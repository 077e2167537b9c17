"""The docs are a site (mkdocs.yml): every page of docs/ and the README in its nav, built with
``mkdocs build --strict`` (infra/docs/build, in its own virtualenv), with an API reference
generated from the docstrings of the modules programs import."""

from __future__ import annotations

import ast
import html
import importlib.util
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
                          capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr[-4000:]
    page = (site / "reference/index.html").read_text()
    for name in ("kindling.task", "kindling.producer.client.Client", "kindling.tools.testing.eager",
                 "kindling.producer.handles.JobHandle", "kindling.valkey.StreamProducer",
                 "kindling.core.errors.JobFailed"):  # where each lives; the section titles name the import paths
        assert f'id="{name}"' in page, name
    # The signatures a type checker sees (registry.pyi, handles.pyi): a handle gives the task's R.
    signatures = html.unescape(re.sub(r"<[^>]+>|\s+", "", page))
    assert "delay(*args:P.args,**kwargs:P.kwargs)->Handle[R]" in signatures
    assert "result(timeout:float=...,*,model:None=...)->R" in signatures
    readme = (site / "readme/index.html").read_text()
    assert 'href="../tutorial/"' in readme and 'href="../changelog/"' in readme  # links as the site names them


def load_rest():
    spec = importlib.util.spec_from_file_location("docs_rest", ROOT / "infra/docs/rest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_docstrings() -> list[tuple[str, str]]:
    """(where, docstring) of every module docs/reference.md renders, its classes and functions."""
    package = ROOT / "layers/kindling"
    found = []
    for name in re.findall(r"^::: ([\w.]+)$", (ROOT / "docs/reference.md").read_text(), re.M):
        path = package / name.replace(".", "/")
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc:
                    found.append((f"{name}:{getattr(node, 'name', '')}", doc))
    return found


def test_a_docstrings_literal_blocks_become_fenced_python_and_its_roles_code():
    rest = load_rest()
    text = ("Send it, :class:`kindling.producer.client.Client` style.\n\nExample::\n\n"
            "    job = send()\n    job.result()\n\nDone.")
    assert rest.markdown(text) == ("Send it, `kindling.producer.client.Client` style.\n\nExample:\n\n"
                                   "```python\njob = send()\njob.result()\n```\n\nDone.")


def test_every_code_block_in_the_reference_docstrings_compiles():
    rest = load_rest()
    blocks = [(where, block) for where, doc in reference_docstrings() for block in rest.code_blocks(doc)]
    assert len(blocks) >= 6
    for where, block in blocks:
        compile(block, where, "exec")
