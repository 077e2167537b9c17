"""The package's docstrings are written as reStructuredText is (``Example::`` before an
indented block, :class:`roles`); the API reference renders Markdown. ``markdown`` turns one
into the other, and a griffe extension (mkdocs.yml) applies it to every docstring the
reference shows. tests/tooling/test_docs_site.py compiles every code block it finds."""

from __future__ import annotations

import re
import textwrap

ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):`~?([^`]+)`")


def markdown(text: str) -> str:
    """``text`` with each ``::`` literal block fenced as Python and each role as code."""
    text = ROLE.sub(lambda m: f"`{m.group(1)}`", text)
    out: list[str] = []
    for kind, part in parts(text):
        out.append(f"```python\n{part}```\n" if kind == "code" else part)
    return "".join(out)


def code_blocks(text: str) -> list[str]:
    """The ``::`` literal blocks of a docstring, dedented."""
    return [part for kind, part in parts(text) if kind == "code"]


def parts(text: str) -> list[tuple[str, str]]:
    """``text`` cut into ("prose", ...) and ("code", ...) pieces; a line ending in ``::``
    ends with ``:`` in the prose (or goes, if it held nothing else)."""
    lines = text.splitlines(keepends=True)
    pieces: list[tuple[str, str]] = []
    prose: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::") and i + 1 < len(lines) and not lines[i + 1].strip():
            lead = line.rstrip()[:-2].rstrip()
            if lead.strip():
                prose.append(lead + ":\n")
            prose.append("\n")
            indent = len(line) - len(line.lstrip())
            j = i + 1
            block: list[str] = []
            while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent):
                block.append(lines[j])
                j += 1
            while block and not block[-1].strip():
                block.pop()
            pieces.append(("prose", "".join(prose)))
            pieces.append(("code", textwrap.dedent("".join(block)).lstrip("\n")))
            prose = ["\n"]
            i = j
            continue
        prose.append(line)
        i += 1
    pieces.append(("prose", "".join(prose)))
    return pieces


try:
    import griffe
except ImportError:  # the test suite imports this module for markdown(), without griffe
    griffe = None

if griffe is not None:

    class RestDocstrings(griffe.Extension):
        """Every docstring the reference shows, as Markdown (:func:`markdown`)."""

        def on_object(self, *, obj, **kwargs) -> None:
            if obj.docstring is not None:
                obj.docstring.value = markdown(obj.docstring.value)
