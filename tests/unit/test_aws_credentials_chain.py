"""The credential chain outside Lambda, over files and the environment (no sockets): the
shared files and their profiles, credential_process, botocore-only profiles, the refresh
rule, the error that names every source, and the order of the sources."""

from __future__ import annotations

import sys
import textwrap

import pytest
from kindling.drivers import aws
from kindling.drivers.aws import chain
from kindling.drivers.aws.chain import ADVISORY_REFRESH, MANDATORY_REFRESH, refresh_due
from kindling.drivers.aws.client import get_credentials

CHAIN_ENV = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_REGION",
    "AWS_DEFAULT_REGION", "AWS_SECURITY_TOKEN",
)


@pytest.fixture
def files(monkeypatch, tmp_path):
    """No credentials in the environment; the shared files are the two tmp files returned."""
    for name in CHAIN_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    credentials, config = tmp_path / "credentials", tmp_path / "config"
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    chain.reset()
    yield credentials, config
    chain.reset()


def write(path, text):
    path.write_text(textwrap.dedent(text))


def test_the_default_profile_of_the_shared_credentials_file(files):
    credentials, _ = files
    write(credentials, """
        [default]
        aws_access_key_id = AKIDDEFAULT
        aws_secret_access_key = secret-default
        [work]
        aws_access_key_id = AKIDWORK
        aws_secret_access_key = secret-work
        aws_session_token = token-work
    """)
    assert get_credentials() == ("AKIDDEFAULT", "secret-default", None)


def test_aws_profile_picks_the_section(files, monkeypatch):
    credentials, _ = files
    write(credentials, """
        [default]
        aws_access_key_id = AKIDDEFAULT
        aws_secret_access_key = secret-default
        [work]
        aws_access_key_id = AKIDWORK
        aws_secret_access_key = secret-work
        aws_session_token = token-work
    """)
    monkeypatch.setenv("AWS_PROFILE", "work")
    assert get_credentials() == ("AKIDWORK", "secret-work", "token-work")


def test_keys_in_the_config_file_under_profile_name(files, monkeypatch):
    _, config = files
    write(config, """
        [default]
        region = eu-west-3
        [profile ci]
        region = ap-south-1
        aws_access_key_id = AKIDCONFIG
        aws_secret_access_key = secret-config
    """)
    monkeypatch.setenv("AWS_PROFILE", "ci")
    assert get_credentials() == ("AKIDCONFIG", "secret-config", None)
    assert aws.JsonClient("sqs", "AmazonSQS").region == "ap-south-1"  # the profile's region, as boto3


def test_the_credentials_file_wins_over_the_config_file(files):
    credentials, config = files
    write(credentials, "[default]\naws_access_key_id = FROMCREDS\naws_secret_access_key = s1\n")
    write(config, "[default]\naws_access_key_id = FROMCONFIG\naws_secret_access_key = s2\n")
    assert get_credentials()[0] == "FROMCREDS"


def test_the_environment_wins_over_the_files(files, monkeypatch):
    credentials, _ = files
    write(credentials, "[default]\naws_access_key_id = FROMFILE\naws_secret_access_key = s1\n")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "FROMENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s2")
    assert get_credentials() == ("FROMENV", "s2", None)


def test_a_named_profile_that_is_nowhere_is_an_error(files, monkeypatch):
    credentials, _ = files
    write(credentials, "[default]\naws_access_key_id = A\naws_secret_access_key = s\n")
    monkeypatch.setenv("AWS_PROFILE", "nope")
    with pytest.raises(aws.AwsError, match="'nope'") as info:
        get_credentials()
    assert info.value.code == "CredentialsError"


def test_credential_process_is_run_and_its_json_read(files, tmp_path):
    _, config = files
    script = tmp_path / "creds.py"
    script.write_text('import json\nprint(json.dumps({"Version": 1, "AccessKeyId": "AKIDPROC", '
                      '"SecretAccessKey": "secret-proc", "SessionToken": "tok", '
                      '"Expiration": "2999-01-01T00:00:00Z"}))\n')
    write(config, f"[default]\ncredential_process = {sys.executable} {script}\n")
    assert get_credentials() == ("AKIDPROC", "secret-proc", "tok")


def test_a_failing_credential_process_says_what_it_printed(files, tmp_path):
    _, config = files
    script = tmp_path / "fail.py"
    script.write_text('import sys\nsys.stderr.write("token expired, run aws sso login")\nsys.exit(3)\n')
    write(config, f"[default]\ncredential_process = {sys.executable} {script}\n")
    with pytest.raises(aws.AwsError, match="exited 3: token expired") as info:
        get_credentials()
    assert info.value.code == "CredentialsError"


@pytest.mark.parametrize("profile", [
    "sso_session = corp\nsso_account_id = 111122223333\nsso_role_name = Dev\n",
    "role_arn = arn:aws:iam::111122223333:role/Dev\nsource_profile = base\n",
])
def test_sso_and_assume_role_profiles_say_they_need_botocore_when_it_is_missing(files, monkeypatch, profile):
    _, config = files
    write(config, "[default]\n" + profile)
    monkeypatch.setitem(sys.modules, "botocore.session", None)  # import botocore.session raises ImportError
    with pytest.raises(aws.AwsError, match="needs botocore") as info:
        get_credentials()
    assert info.value.code == "CredentialsError"


def test_assume_role_profiles_go_through_botocore_when_it_is_installed(files, monkeypatch):
    _, config = files
    write(config, "[default]\nrole_arn = arn:aws:iam::111122223333:role/Dev\nsource_profile = base\n")
    asked = []

    class Frozen:
        access_key, secret_key, token = "AKIDBOTO", "secret-boto", "tok-boto"

    class FakeSession:
        def __init__(self, profile):
            asked.append(profile)

        def get_credentials(self):
            return type("C", (), {"get_frozen_credentials": lambda self: Frozen()})()

    import botocore.session

    monkeypatch.setattr(botocore.session, "Session", FakeSession)
    assert get_credentials() == ("AKIDBOTO", "secret-boto", "tok-boto")
    assert get_credentials() == ("AKIDBOTO", "secret-boto", "tok-boto")
    assert asked == ["default"]  # one botocore session, asked again on every call: it refreshes itself


def test_no_credentials_anywhere_names_every_source_tried(files):
    with pytest.raises(aws.AwsError) as info:
        get_credentials()
    err = info.value
    assert err.code == "MissingCredentials"
    for source in ("AWS_ACCESS_KEY_ID", "AWS_WEB_IDENTITY_TOKEN_FILE", "'default'", str(files[0]), str(files[1]),
                   "AWS_CONTAINER_CREDENTIALS_FULL_URI", "EC2 instance metadata", "AWS_EC2_METADATA_DISABLED"):
        assert source in err.message, source


def test_files_are_read_once_then_cached_until_the_profile_changes(files, monkeypatch):
    credentials, _ = files
    write(credentials, "[default]\naws_access_key_id = FIRST\naws_secret_access_key = s\n"
                       "[other]\naws_access_key_id = OTHER\naws_secret_access_key = s\n")
    assert get_credentials()[0] == "FIRST"
    write(credentials, "[default]\naws_access_key_id = SECOND\naws_secret_access_key = s\n")
    assert get_credentials()[0] == "FIRST"  # static keys: read once, as botocore's session does
    monkeypatch.setenv("AWS_PROFILE", "default")  # the environment changed: walk the chain again
    assert get_credentials()[0] == "SECOND"


# ------------------------------------------------------------------ refresh before expiry


@pytest.mark.parametrize("left, due", [
    (None, "fresh"),
    (3600.0, "fresh"),
    (ADVISORY_REFRESH + 1, "fresh"),
    (ADVISORY_REFRESH, "advisory"),
    (MANDATORY_REFRESH + 1, "advisory"),
    (MANDATORY_REFRESH, "mandatory"),
    (0.0, "mandatory"),
    (-60.0, "mandatory"),
])
def test_refresh_due(left, due):
    now = 1_700_000_000.0
    assert refresh_due(None if left is None else now + left, now) == due


def test_botocore_s_refresh_windows():
    assert (ADVISORY_REFRESH, MANDATORY_REFRESH) == (15 * 60, 10 * 60)


def _chain_with(monkeypatch, expires_in, outcomes):
    """The chain holding credentials that expire in ``expires_in`` s; refreshing them pops
    ``outcomes`` (Credentials, or an AwsError to raise)."""
    import time

    calls = []

    def fetch(deadline):
        calls.append(deadline)
        result = outcomes.pop(0)
        if isinstance(result, Exception):
            raise result
        return result

    first = chain.Credentials("OLD", "s", "t", expires_at=time.time() + expires_in, source="test")
    first.fetch = fetch
    monkeypatch.setattr(chain, "_cached", first)
    monkeypatch.setattr(chain, "_cached_for", chain._environment_key())
    return calls


def test_fresh_credentials_are_not_fetched_again(files, monkeypatch):
    calls = _chain_with(monkeypatch, 3600, [])
    assert get_credentials()[0] == "OLD" and calls == []


def test_in_the_advisory_window_a_failed_refresh_keeps_the_old_credentials(files, monkeypatch):
    import time

    new = chain.Credentials("NEW", "s", "t", expires_at=time.time() + 3600)
    calls = _chain_with(monkeypatch, 12 * 60, [aws.AwsError("CredentialsError", "down"), new])
    assert get_credentials()[0] == "OLD"
    assert get_credentials()[0] == "NEW"
    assert get_credentials()[0] == "NEW"
    assert len(calls) == 2


def test_in_the_mandatory_window_a_failed_refresh_raises(files, monkeypatch):
    calls = _chain_with(monkeypatch, 5 * 60, [aws.AwsError("CredentialsError", "down")])
    with pytest.raises(aws.AwsError, match="down"):
        get_credentials()
    assert len(calls) == 1


# ------------------------------------------------------------------ Lambda's cold path


def test_the_command_line_s_one_line_for_missing_credentials_keeps_the_sources(files):
    from kindling.tools import exits

    with pytest.raises(aws.AwsError) as info:
        get_credentials()
    line, code = exits.describe(info.value)
    assert code == exits.ERROR
    assert "tried: the environment" in line and "EC2 instance metadata" in line and str(files[0]) in line


# -- where botocore refuses, kindling refuses (never other credentials from further down)

def test_an_access_key_id_without_a_secret_in_the_environment_is_an_error(files, monkeypatch):
    credentials, _ = files
    write(credentials, "[default]\naws_access_key_id = AKIDFILE\naws_secret_access_key = s\n")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
    with pytest.raises(aws.AwsError, match="AWS_SECRET_ACCESS_KEY") as info:
        get_credentials()
    assert info.value.code == "CredentialsError"


@pytest.mark.parametrize("which", ["credentials", "config"])
def test_an_access_key_id_without_a_secret_in_a_file_is_an_error(files, which):
    credentials, config = files
    write(credentials if which == "credentials" else config, "[default]\naws_access_key_id = AKIDHALF\n")
    with pytest.raises(aws.AwsError, match="without aws_secret_access_key"):
        get_credentials()


def test_role_arn_without_a_source_is_an_error(files):
    credentials, config = files
    write(credentials, "[default]\naws_access_key_id = AKIDFILE\naws_secret_access_key = s\n")
    write(config, "[default]\nrole_arn = arn:aws:iam::111122223333:role/Dev\n")
    with pytest.raises(aws.AwsError, match="neither source_profile nor credential_source"):
        get_credentials()


def test_a_role_beside_keys_is_assumed_through_botocore(files, monkeypatch):
    """botocore assumes the role of a profile that holds keys too: the keys are the source's."""
    credentials, config = files
    write(credentials, "[default]\naws_access_key_id = AKIDFILE\naws_secret_access_key = s\n")
    write(config, "[default]\nrole_arn = arn:aws:iam::111122223333:role/Dev\nsource_profile = default\n")
    monkeypatch.setitem(sys.modules, "botocore.session", None)
    with pytest.raises(aws.AwsError, match="needs botocore"):
        get_credentials()


def test_aws_default_profile_comes_before_aws_profile(files, monkeypatch):
    credentials, _ = files
    write(credentials, """
        [a]
        aws_access_key_id = AKIDA
        aws_secret_access_key = a
        [b]
        aws_access_key_id = AKIDB
        aws_secret_access_key = b
    """)
    monkeypatch.setenv("AWS_PROFILE", "a")
    monkeypatch.setenv("AWS_DEFAULT_PROFILE", "b")
    assert get_credentials()[0] == "AKIDB"


def test_the_files_are_parsed_as_botocore_parses_them(files):
    credentials, _ = files
    write(credentials, "[default]\nAWS_ACCESS_KEY_ID = AKIDUPPER\nAWS_SECRET_ACCESS_KEY = s\n")
    assert get_credentials()[0] == "AKIDUPPER"  # keys in any case
    chain.reset()
    write(credentials, "[ default ]\naws_access_key_id = AKIDSPACED\naws_secret_access_key = s\n")
    with pytest.raises(aws.AwsError) as info:  # not the default profile
        get_credentials()
    assert info.value.code == "MissingCredentials"
    chain.reset()
    write(credentials, "[default]\naws_access_key_id = A\naws_secret_access_key = s\n[default]\nx = 1\n")
    with pytest.raises(aws.AwsError, match="cannot parse"):  # a duplicate section
        get_credentials()


def test_aws_security_token_is_read_first_as_botocore_reads_it(files, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token")
    monkeypatch.setenv("AWS_SECURITY_TOKEN", "security-token")
    assert get_credentials() == ("AKIDENV", "s", "security-token")
