"""The commands a new user types first, given the wrong input: one line on stderr naming
the cause and the fix, no traceback, and the documented exit code (kindling.tools.exits)."""

import json

import boto3
import pytest
from kindling.tools import cli
from test_ops import indexed_table, stack  # noqa: F401  (fixtures: a table with the template's indexes, queues)

DEAD = {"id": {"S": "job-dead"}, "status": {"S": "dead"}, "task": {"S": "t"}, "attempts": {"N": "3"},
        "error": {"M": {"type": {"S": "RuntimeError"}, "message": {"S": "boom"}}}}


@pytest.fixture
def env(moto_endpoint, stack, monkeypatch):  # noqa: F811  (the fixture)
    queue_url, table = stack.queue_url, stack.table
    boto3.client("dynamodb").put_item(TableName=table, Item=DEAD)
    for name in ("KINDLING_QUEUE_URL", "KINDLING_TABLE", "KINDLING_QUEUES", "KINDLING_DEBUG",
                 "KINDLING_SIGNING_SECRET"):
        monkeypatch.delenv(name, raising=False)
    return {"queue_url": queue_url, "table": table, "endpoint": moto_endpoint, "dlq_url": stack.dlq_url}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def no_credentials(monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never ask the instance metadata address


# (name, argv built from the env, setup, message on stderr, exit code)
CASES = [
    ("bad --kwargs JSON", lambda e: ["enqueue", "t", "--kwargs", "{width: 1}", "--queue-url", e["queue_url"]],
     None, "kindling: --kwargs is not valid JSON", 2),
    ("--kwargs not an object", lambda e: ["enqueue", "t", "--kwargs", "[1]", "--queue-url", e["queue_url"]],
     None, "kindling: --kwargs must be a JSON object, got list", 2),
    ("no KINDLING_QUEUE_URL", lambda e: ["enqueue", "t"], None,
     "kindling: --queue-url is required: pass --queue-url or set KINDLING_QUEUE_URL", 2),
    ("no KINDLING_TABLE (status)", lambda e: ["status", "job-1"], None,
     "kindling: --table is required: pass --table or set KINDLING_TABLE", 2),
    ("no KINDLING_TABLE (result)", lambda e: ["result", "job-1"], None,
     "kindling: --table is required: pass --table or set KINDLING_TABLE", 2),
    ("a wrong queue URL", lambda e: ["enqueue", "t", "--queue-url", e["endpoint"] + "/123456789012/no-such-queue"],
     None, "kindling: queue not found (SendMessage", 1),
    ("a missing table (status)", lambda e: ["status", "job-1", "--table", "no-such-table"], None,
     "kindling: table not found (GetItem", 1),
    ("a missing table (jobs list)", lambda e: ["jobs", "list", "--status", "dead", "--table", "no-such-table"],
     None, "kindling: table not found (Query", 1),
    ("no credentials", lambda e: ["enqueue", "t", "--queue-url", e["queue_url"]], no_credentials,
     "kindling: no AWS credentials", 1),
    ("no credentials (status)", lambda e: ["status", "job-1", "--table", e["table"]], no_credentials,
     "kindling: no AWS credentials", 1),
    ("an endpoint that does not answer", lambda e: ["status", "job-1", "--table", e["table"]],
     lambda mp, _: (mp.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9/"), mp.setenv("AWS_MAX_ATTEMPTS", "1")),
     "kindling: cannot reach AWS", 1),
    ("a dead job's result", lambda e: ["result", "job-dead", "--table", e["table"]], None,
     "kindling: job job-dead is dead: RuntimeError: boom", 3),
    ("a dead job's status", lambda e: ["status", "job-dead", "--table", e["table"]], None, "", 3),
    ("a result not there in time", lambda e: ["result", "job-never", "--timeout", "0.05", "--table", e["table"]],
     None, "kindling: ", 4),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_bad_input_prints_one_line_naming_it_and_exits_with_its_code(env, capsys, monkeypatch, tmp_path, case):
    _, argv, setup, message, code = case
    if setup:
        setup(monkeypatch, tmp_path)
    got, out, err = run(capsys, *argv(env))
    assert got == code
    assert "Traceback" not in err and len(err.splitlines()) == (1 if message else 0)
    assert err.startswith(message)


def test_debug_shows_the_traceback(env, capsys):
    from kindling.tools.exits import UsageError

    with pytest.raises(UsageError, match="--table is required"):
        cli.main(["--debug", "status", "job-1"])


def test_argparse_usage_errors_keep_code_2(env, capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main(["enqueue"])
    assert exit.value.code == 2


def test_every_command_that_prints_data_prints_json_with_json(env, capsys):
    base = ["--table", env["table"]]
    code, out, _ = run(capsys, "enqueue", "t", "1", "--kwargs", '{"a": 1}', "--json", "--queue-url", env["queue_url"])
    assert code == 0 and json.loads(out)["task"] == "t"
    code, out, _ = run(capsys, "status", "job-dead", "--json", *base)
    assert code == 3 and json.loads(out)["record"]["status"] == "dead"
    code, out, _ = run(capsys, "status", "job-none", "--json", *base)
    assert code == 1 and json.loads(out) == {"id": "job-none", "record": None}
    code, out, _ = run(capsys, "jobs", "list", "--status", "dead", "--since", "2020-01-01", "--json", *base)
    assert code == 0 and isinstance(json.loads(out), list)
    code, out, _ = run(capsys, "jobs", "show", "job-dead", "--json", *base)
    assert code == 0 and json.loads(out)["status"] == "dead"
    code, out, _ = run(capsys, "jobs", "revoke", "job-none", "--json", *base)
    assert code == 0 and json.loads(out) == {"id": "job-none", "status": "revoked"}
    code, out, _ = run(capsys, "dlq", "peek", "--json", "--queue-url", env["queue_url"], *base)
    assert code == 0 and json.loads(out)["messages"] == []
    code, out, _ = run(capsys, "schedules", "--json")
    assert code == 0 and isinstance(json.loads(out), list)
