"""``kindling worker`` with a Valkey URL: where the URL comes from, and what goes on a command line."""

import pytest
from kindling.tools import cli

URL = "redis://worker:s3cret@127.0.0.1:6390/0"


def parse(*args: str):
    return cli.parser().parse_args(["worker", *args])


def test_the_url_comes_from_the_flag_then_the_file_then_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KINDLING_VALKEY_URL", "redis://from-env:6390/0")
    path = tmp_path / "url"
    path.write_text(f"  {URL}\n")
    assert cli.valkey_url(parse("--valkey", "redis://from-flag:6390/0")) == "redis://from-flag:6390/0"
    assert cli.valkey_url(parse("--valkey-url-file", str(path))) == URL
    assert cli.valkey_url(parse()) == "redis://from-env:6390/0"
    monkeypatch.delenv("KINDLING_VALKEY_URL")
    assert cli.valkey_url(parse()) is None  # the SQS worker


def test_a_missing_or_empty_url_file_and_two_sources_are_refused(tmp_path):
    with pytest.raises(SystemExit, match="valkey-url-file"):
        cli.valkey_url(parse("--valkey-url-file", str(tmp_path / "missing")))
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(SystemExit, match="is empty"):
        cli.valkey_url(parse("--valkey-url-file", str(tmp_path / "empty")))
    with pytest.raises(SystemExit):  # argparse: not allowed with --valkey-url-file
        parse("--valkey", URL, "--valkey-url-file", str(tmp_path / "empty"))


def test_a_worker_command_line_never_holds_the_url():
    ns = parse("--valkey", URL, "--stream", "s", "--tasks", "a.py", "--tasks", "b.tasks", "--table", "t",
               "--concurrency", "7", "--processes", "3", "--burst")
    argv = cli.worker_argv(ns, 1)
    assert not any("s3cret" in arg or "redis://" in arg for arg in argv)
    again = cli.parser().parse_args(argv[3:])  # after "python -m kindling.tools.cli"
    assert (again.stream, again.tasks, again.table, again.concurrency, again.processes, again.burst) == (
        "s", ["a.py", "b.tasks"], "t", 7, 1, True)
    assert again.valkey is None and again.valkey_url_file is None


def test_a_password_on_the_command_line_is_warned_about(capsys, monkeypatch):
    execs = []
    monkeypatch.setattr(cli.os, "execve", lambda *args: execs.append(args))
    cli._keep_password_off_command_line(parse("--valkey", URL))
    assert "holds a password" in capsys.readouterr().err
    assert execs == []  # not on this process's own argv (pytest's): nothing to hide by restarting
    cli._keep_password_off_command_line(parse("--valkey", "redis://127.0.0.1:6390/0"))
    assert capsys.readouterr().err == ""


def test_the_process_restarts_without_the_password_on_its_argv(monkeypatch):
    execs = []
    monkeypatch.setattr(cli.os, "execve", lambda *args: execs.append(args))
    monkeypatch.setattr(cli.sys, "argv", ["kindling", "worker", f"--valkey={URL}", "--processes", "2"])
    cli._keep_password_off_command_line(parse(f"--valkey={URL}", "--processes", "2"))
    (path, argv, env), = execs
    assert not any("s3cret" in arg for arg in argv) and "--processes" in argv
    assert env["KINDLING_VALKEY_URL"] == URL
