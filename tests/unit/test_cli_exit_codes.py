"""Every error the command expects maps to one line naming its cause and fix, and an exit
code that argparse's usage error (2) never shares (kindling.tools.exits)."""

import os

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError, NoRegionError
from kindling.core.errors import EnqueueError, JobFailed, JobTimeout, KindlingError
from kindling.tools.exits import ERROR, JOB_FAILED, TIMEOUT, USAGE, UsageError, describe, need
from kindling.tools.ops import OpsError


def client_error(code: str, message: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, operation)


CASES = {
    "no credentials": (NoCredentialsError(), "no AWS credentials", "AWS_PROFILE", ERROR),
    "no region": (NoRegionError(), "no AWS region", "AWS_REGION", ERROR),
    "an endpoint that does not answer": (EndpointConnectionError(endpoint_url="http://127.0.0.1:1/"),
                                         "cannot reach AWS", "AWS_ENDPOINT_URL", ERROR),
    "a queue that is not there": (client_error("AWS.SimpleQueueService.NonExistentQueue", "The specified queue "
                                               "does not exist.", "SendMessage"),
                                  "queue not found (SendMessage", "KINDLING_QUEUE_URL", ERROR),
    "a table that is not there": (client_error("ResourceNotFoundException", "Requested resource not found",
                                               "GetItem"), "table not found (GetItem", "KINDLING_TABLE", ERROR),
    "credentials the queue refuses": (client_error("AccessDenied", "not authorized", "SendMessage"),
                                      "AWS refused SendMessage (AccessDenied", "AWS_PROFILE", ERROR),
    "another AWS error": (client_error("Throttling", "slow\ndown", "Query"), "Query failed (Throttling: slow down)",
                          "", ERROR),
    "an operation refused": (OpsError("job x already succeeded"), "job x already succeeded", "", ERROR),
    "a kindling error": (KindlingError("no such queue"), "no such queue", "", ERROR),
    "an enqueue that failed": (EnqueueError("1 job(s) not sent", failed={"a": "x"}), "not sent", "", ERROR),
    "a dead job": (JobFailed("j1", "dead", {"type": "RuntimeError", "message": "boom"}),
                   "job j1 is dead: RuntimeError: boom", "kindling jobs retry", JOB_FAILED),
    "a rejected job": (JobFailed("j1", "rejected", {"type": "InvalidJob", "message": "x"}), "is rejected",
                       "fix the producer", JOB_FAILED),
    "a revoked job": (JobFailed("j1", "revoked", None), "is revoked", "cancelled", JOB_FAILED),
    "a wait that timed out": (TimeoutError("job j1: no final outcome after 1s"), "no final outcome", "--timeout",
                              TIMEOUT),
    "a job timeout": (JobTimeout("ran past 3s"), "ran past 3s", "--timeout", TIMEOUT),
    "a port in use": (OSError(98, "Address already in use"), "OSError: [Errno 98] Address already in use", "",
                      ERROR),
    "an argument that does not parse": (UsageError("--kwargs is not valid JSON (x)"), "--kwargs", "JSON", USAGE),
}


@pytest.mark.parametrize("case", CASES)
def test_an_expected_error_is_one_line_naming_its_cause_and_fix_with_its_own_exit_code(case):
    exc, cause, fix, code = CASES[case]
    message, got = describe(exc)
    assert cause in message and fix in message
    assert "\n" not in message and "Traceback" not in message
    assert got == code


def test_the_exit_codes_are_distinct_and_none_is_argparses_usage_code_but_usage():
    assert len({ERROR, USAGE, JOB_FAILED, TIMEOUT, 0}) == 5 and USAGE == 2


@pytest.mark.parametrize("exc", [AttributeError("x"), KeyError("k"), ValueError("a bug"), TypeError("t")])
def test_a_bug_is_not_described_so_it_keeps_its_traceback(exc):
    assert describe(exc) is None


def test_a_missing_setting_names_the_option_and_the_variable():
    assert need("t", "--table", "KINDLING_TABLE") == "t"
    with pytest.raises(UsageError, match="--table is required: pass --table or set KINDLING_TABLE"):
        need(None, "--table", "KINDLING_TABLE")


# Every command that needs a table, a queue or a Valkey URL, run with none of them set.
NEEDS_A_SETTING = {
    "status": ["status", "j1"],
    "result": ["result", "j1"],
    "enqueue": ["enqueue", "t"],
    "worker": ["worker"],
    "worker --valkey, results in the table": ["worker", "--valkey", "valkey://127.0.0.1:1"],
    "jobs list": ["jobs", "list", "--status", "dead"],
    "jobs list without a status or task": ["jobs", "list", "--table", "t"],
    "jobs show": ["jobs", "show", "j1"],
    "jobs retry": ["jobs", "retry", "j1"],
    "jobs revoke": ["jobs", "revoke", "j1"],
    "dlq peek": ["dlq", "peek"],
    "dlq redrive": ["dlq", "redrive"],
    "dlq peek --valkey": ["dlq", "peek", "--valkey"],
    "info": ["info"],
    "dashboard": ["dashboard", "--port", "0"],
}


@pytest.mark.parametrize("case", NEEDS_A_SETTING)
def test_a_required_setting_neither_passed_nor_set_exits_2_naming_it(case, monkeypatch, capsys):
    from kindling.tools import cli

    for name in [n for n in os.environ if n.startswith(("KINDLING_", "AWS_"))]:
        monkeypatch.delenv(name)
    # Were a command to reach AWS regardless, it would find nothing listening here.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    code = cli.main(NEEDS_A_SETTING[case])
    err = capsys.readouterr().err
    assert code == USAGE, err
    assert err.startswith("kindling: ") and "--" in err and "Traceback" not in err, err
