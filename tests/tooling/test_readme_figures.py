"""The README states no figure a command does not print: the layer's size comes from
``make layer-size`` (the layer changes with every release), and how long a make target
takes is left to what it prints, never typed by hand."""

from __future__ import annotations

import re

from support import ROOT

README = (ROOT / "README.md").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()

DURATION = re.compile(r"\b(?:about|~|under|in)\s*\d[\d.]*\s*(?:s|ms|min|minutes|seconds)\b|\bin seconds\b", re.I)


def paragraph_of(text: str, needle: str) -> str:
    (found,) = [p for p in text.split("\n\n") if needle in p]
    return found


def test_the_readme_gives_the_layer_size_from_make_layer_size():
    claim = paragraph_of(README, "`make layer-size`")
    assert "layer" in claim, claim
    # The target it names is there (read, not run with -n: make runs a recipe line that calls
    # $(MAKE) even under -n, and this one builds the layer).
    assert re.search(r"^layer-size:", MAKEFILE, re.M)


def test_no_make_target_is_given_a_duration_in_the_readme_or_the_makefile():
    commands = [line for line in README.splitlines() if line.startswith("make ")]
    assert commands, "the README's make commands"
    targets = [p for p in README.split("\n\n") if "make " in p] + [
        line for line in MAKEFILE.splitlines() if line.startswith("#")]
    assert [t for t in targets if DURATION.search(t)] == []
