"""mkdocs hooks (mkdocs.yml): the repository's README.md, CHANGELOG.md and SECURITY.md are
pages of the site too (readme.md, changelog.md, security-policy.md), and links between them
and docs/ are rewritten to the site's names, so every page keeps one source and the links
work both on GitHub and on the site."""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
PAGES = {"README.md": "readme.md", "CHANGELOG.md": "changelog.md", "SECURITY.md": "security-policy.md"}
LINK = re.compile(r"\]\((?!https?:|#)([^)#\s]+)")


def on_files(files, config):
    for source, name in PAGES.items():
        files.append(File.generated(config, name, abs_src_path=str(ROOT / source)))
    return files


def site_link(target: str, from_root: bool) -> str:
    """Where a link of a page goes on the site: a root page's ``docs/x.md`` is ``x.md``, a
    docs page's ``../README.md`` is ``readme.md``."""
    path = target
    if not from_root:
        if not path.startswith("../"):
            return target
        path = path[3:]
    if path.startswith("docs/"):
        return path[len("docs/"):]
    return PAGES.get(path, target)


def on_page_markdown(markdown, page, config, files):
    from_root = page.file.src_uri in PAGES.values()
    return LINK.sub(lambda m: "](" + site_link(m.group(1), from_root), markdown)
