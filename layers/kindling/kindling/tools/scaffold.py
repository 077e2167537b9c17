"""``kindling init DIR``: a SAM application of the user's own, from the installed release.

The files come from the package's ``scaffold_files/`` data directory: the same
template.yaml and layer Makefile as kindling's own repository (there, links to them), and
the starting points a project edits (the handler, a tasks module, an eager-mode test, a
Makefile, a README). A file kindling owns is one the next release may change (template.yaml,
the layer's Makefile): ``kindling init --upgrade DIR`` rewrites those, and only those, and
prints the diff. A file already in DIR is never replaced by ``init``.
"""

from __future__ import annotations

import difflib
import sys
from importlib import resources
from pathlib import Path

OWNED = ("template.yaml", "layers/kindling/Makefile")
"""The files a release owns: ``--upgrade`` rewrites them; a project edits the others."""

IAC = ("sam", "cdk")
"""What deploys a project: SAM (template.yaml) or the AWS CDK (app.py and cdk.json using
kindling.tools.cdk's KindlingWorker: ``scaffold_files/cdk/``, over the SAM project's files)."""

_SKIP = {"__pycache__"}


def _target_name(name: str) -> str:
    """A data file's name in the project: ``.tmpl`` off (it keeps example modules out of the
    package's own modules and of the layer), and ``gitignore`` as ``.gitignore`` (package
    data globs skip dotfiles)."""
    name = name.removesuffix(".tmpl")
    return ".gitignore" if name == "gitignore" else name


def files(iac: str = "sam") -> dict[str, bytes]:
    """Every file of a new project deployed by ``iac`` (:data:`IAC`), by its path relative to
    the project (``/``-separated)."""
    if iac not in IAC:
        raise SystemExit(f"kindling: --iac {iac}: one of {', '.join(IAC)}")
    found: dict[str, bytes] = {}

    def walk(node, prefix: str) -> None:
        for child in node.iterdir():
            if child.name in _SKIP:
                continue
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            else:
                found[prefix + _target_name(child.name)] = child.read_bytes()

    root = resources.files("kindling") / "scaffold_files"
    walk(root, "")
    cdk = {rel.removeprefix("cdk/"): found.pop(rel) for rel in [r for r in found if r.startswith("cdk/")]}
    if iac == "cdk":
        del found["template.yaml"]
        found.update(cdk)
    return dict(sorted(found.items()))


def init(directory: Path, *, force: bool = False, iac: str = "sam") -> tuple[list[str], list[str]]:
    """Write a new project into ``directory`` (made if missing): the paths written, and the
    paths already there and kept as they are. A non-empty ``directory`` is refused unless
    ``force``; even then no file in it is replaced."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise SystemExit(f"kindling: {directory} is not a directory")
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise SystemExit(f"kindling: {directory} is not empty; --force adds the files it lacks, "
                         "keeping every file already there")
    written, kept = [], []
    for rel, content in files(iac).items():
        path = directory / rel
        if path.exists() or path.is_symlink():
            kept.append(rel)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        written.append(rel)
    return written, kept


def upgrade(directory: Path) -> dict[str, str]:
    """Rewrite the files kindling owns (:data:`OWNED`) in the project ``directory`` with this
    release's; for each one that changed, its unified diff (old to new). A CDK project
    (cdk.json) has no template.yaml: only its layer's Makefile is kindling's there (its
    resources come with the installed kindling.tools.cdk)."""
    directory = Path(directory)
    cdk = (directory / "cdk.json").is_file()
    if not cdk and not (directory / "template.yaml").is_file():
        raise SystemExit(f"kindling: {directory} has no template.yaml: make a project with kindling init first")
    new_files, diffs = files("cdk" if cdk else "sam"), {}
    for rel in [r for r in OWNED if r in new_files]:
        path, new = directory / rel, new_files[rel]
        old = path.read_bytes() if path.is_file() else b""
        if old == new:
            continue
        diffs[rel] = "".join(difflib.unified_diff(
            old.decode(errors="replace").splitlines(keepends=True), new.decode().splitlines(keepends=True),
            f"a/{rel}", f"b/{rel}"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(new)
    return diffs


def cmd_init(ns) -> int:
    """``kindling init DIR [--force] [--upgrade]``."""
    directory = Path(ns.dir)
    if ns.upgrade:
        diffs = upgrade(directory)
        for diff in diffs.values():
            sys.stdout.write(diff if diff.endswith("\n") else diff + "\n")
        print(f"kindling: rewrote {', '.join(diffs)}" if diffs else f"kindling: {', '.join(OWNED)} up to date")
        return 0
    iac = getattr(ns, "iac", "sam")
    written, kept = init(directory, force=ns.force, iac=iac)
    for rel in written:
        print(f"  wrote {rel}")
    for rel in kept:
        print(f"  kept  {rel} (already there; not replaced)")
    then = "make synth   (app.py: KindlingWorker's settings)" if iac == "cdk" else \
        "make build   (README.md: deploy, local cloud, upgrades)"
    print(f"\nNext: cd {directory} && make test && {then}")
    return 0
