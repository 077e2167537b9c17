"""The shell blocks of README.md and docs/*.md, command by command.

test_docs.py runs every Python block; these are the rest. Each command is of a kind this
test knows, and is checked as far as it can be without an AWS account or a registry:
``kindling`` commands parse with the command line's own parser, with every optional part of
their synopsis given; ``make`` targets exist; ``infra/localstack/ctl`` subcommands exist (and
``env`` runs); scripts and modules named exist. Deploys, installs from PyPI and AWS CLI calls
are listed as such, so a new kind of command fails here until it is checked too."""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys

import pytest
from kindling.tools import cli
from support import ROOT
from test_docs import PAGES, fenced_blocks

# Commands that act on an AWS account, a registry or a deployment: shown, not run.
NOT_RUN = {
    "pip": "installs from PyPI",
    "sam": "builds and deploys to an AWS account",
    "aws": "calls an AWS account",
    "key=$(head": "makes a secret for the aws call after it",
}
PLACEHOLDERS = {"ID": "01JD3X", "NAME": "reports", "N": "5", "...": "x"}


def shell_commands() -> list[tuple[str, str]]:
    """(page:line, command) for every command of every sh block: continuations joined,
    comments and indentation dropped."""
    commands = []
    for page in PAGES:
        for line, language, content, _ in fenced_blocks(page):
            if language != "sh":
                continue
            text = content.replace("\\\n", " ")
            for offset, raw in enumerate(text.splitlines()):
                command = re.sub(r"\s+#.*$", "", raw).strip()
                if command:
                    commands.append((f"{page.relative_to(ROOT)}:{line + 1 + offset}", command))
    return commands


def synopsis(words: list[str]) -> list[str]:
    """A synopsis as the command it documents at its longest: ``[--x N]`` given, ``ID``
    and ``NAME`` filled in."""
    out = []
    for word in words:
        word = word.strip("[]")
        if not word:
            continue
        out.append(PLACEHOLDERS.get(word, word))
    return out


COMMANDS = shell_commands()


def test_the_docs_have_shell_blocks_and_each_command_is_of_a_kind_checked_here():
    assert len(COMMANDS) > 20
    unknown = [f"{where}: {command}" for where, command in COMMANDS if kind(command) is None]
    assert unknown == []


def kind(command: str) -> str | None:
    command = re.sub(r"^cd \S+ && ", "", command)  # into a project first: the rest is the command
    words = command.split()
    program = words[0]
    while "=" in program and not program.startswith("key="):  # VAR=value before the program
        words = words[1:]
        program = words[0]
    if program == "flock":  # flock LOCKFILE program ...
        words = words[2:]
        program = words[0]
    if command.startswith("key=$(head") or program in NOT_RUN:
        return "not run"
    if program == "kindling":
        return "kindling"
    if program == "make":
        return "make"
    if program == "infra/localstack/ctl":
        return "ctl"
    if program == "eval" and "infra/localstack/ctl env" in command:
        return "ctl"
    if program.endswith("python") or program == "python3":
        return "python"
    return None


@pytest.mark.parametrize("where,command", [c for c in COMMANDS if kind(c[1]) == "kindling"])
def test_a_kindling_command_parses_with_every_option_its_synopsis_gives(where, command, capsys):
    argv = synopsis(shlex.split(re.sub(r"<[^>]+>", "x", command)))[1:]
    argv = cli._valkey_equals(argv)
    try:
        cli.parser(argv[0]).parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{where}: {command!r} does not parse: {capsys.readouterr().err.strip()} ({exc.code})")


def test_every_make_target_the_docs_name_exists():
    # This repository's targets, and those of a project kindling init makes.
    makefile = ((ROOT / "Makefile").read_text()
                + (ROOT / "layers/kindling/kindling/scaffold_files/Makefile.tmpl").read_text())
    targets = {t for line in makefile.splitlines() for t in re.findall(r"^([\w.-]+(?: [\w.-]+)*):", line)
               for t in t.split()}
    for where, command in COMMANDS:
        if kind(command) == "make":
            target = re.sub(r"^cd \S+ && ", "", command).split()[1]
            assert target in targets, f"{where}: make {target}"


def test_every_localstack_ctl_command_exists_and_env_runs():
    ctl = ROOT / "infra/localstack/ctl"
    known = re.search(r"COMMANDS = \{(.*?)\}", ctl.read_text(), re.S).group(1)
    for where, command in COMMANDS:
        if kind(command) == "ctl":
            for sub in re.findall(r"infra/localstack/ctl (\w+)", command):
                assert f'"{sub}"' in known, f"{where}: ctl {sub}"
    done = subprocess.run([sys.executable, ctl, "env"], capture_output=True, text=True, timeout=30, check=True)
    assert done.stdout.startswith("export AWS_ENDPOINT_URL=http://127.0.0.1:")


def test_every_script_and_module_the_docs_run_exists():
    for where, command in COMMANDS:
        if kind(command) != "python":
            continue
        words = re.sub(r"^cd \S+ && ", "", command).split()
        if "-c" in words:  # code given inline: compiled, not run
            compile(shlex.split(" ".join(words))[words.index("-c") + 1], where, "exec")
            continue
        if "-m" in words:
            module = words[words.index("-m") + 1]
            assert importlib.util.find_spec(module) is not None, f"{where}: python -m {module}"
        else:
            scripts = [w for w in words if w.endswith(".py")]
            assert scripts and all((ROOT / s).is_file() for s in scripts), f"{where}: {command}"
