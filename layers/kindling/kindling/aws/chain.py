"""The credential chain outside the environment: what botocore finds, in botocore's order.

:func:`kindling.aws.client.get_credentials` returns the environment's keys itself and
imports this module only when there are none (never inside Lambda, which sets them). The
sources, in order:

1. a profile botocore must resolve (IAM Identity Center ``sso_*``, ``role_arn`` with
   ``source_profile`` or ``credential_source``): through botocore when it is installed,
   else a CredentialsError saying so;
2. web identity: ``AWS_WEB_IDENTITY_TOKEN_FILE`` and ``AWS_ROLE_ARN`` (EKS service
   accounts), or a profile's ``web_identity_token_file`` and ``role_arn``
   (:mod:`kindling.aws.sts`);
3. the shared credentials file's keys for the profile, then its ``credential_process``,
   then the config file's keys (:mod:`kindling.aws.profiles`);
4. the container endpoint (ECS, EKS Pod Identity: ``AWS_CONTAINER_CREDENTIALS_FULL_URI`` /
   ``_RELATIVE_URI``);
5. EC2 instance metadata, IMDSv2 (:mod:`kindling.aws.imds`), unless
   ``AWS_EC2_METADATA_DISABLED=true``.

The first source that is configured answers; one that is configured and fails raises
(a broken profile is not skipped for the instance's role). Temporary credentials are cached
and fetched again before they expire (:func:`refresh_due`).
"""

import os
import time
from _thread import allocate_lock

from kindling.aws.errors import AwsError
from kindling.aws.temporary import ADVISORY_REFRESH, MANDATORY_REFRESH, Credentials, refresh_due

__all__ = ["ADVISORY_REFRESH", "MANDATORY_REFRESH", "Credentials", "get", "refresh_due", "reset", "resolve"]

SOURCES = ("environment", "web identity", "shared credentials and config files", "container endpoint",
           "EC2 instance metadata")
# profile keys only botocore resolves
_BOTOCORE_KEYS = ("sso_session", "sso_start_url", "sso_account_id", "credential_source", "source_profile")

_lock = allocate_lock()
_cached: Credentials | None = None
_cached_for: tuple = ()


def _environment_key() -> tuple:
    """What, in the environment, picks the source: a change (another profile) starts over."""
    env = os.environ
    return tuple(env.get(name) for name in (
        "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_EC2_METADATA_DISABLED", "AWS_EC2_METADATA_SERVICE_ENDPOINT"))


def get(deadline: float | None = None) -> tuple[str, str, str | None]:
    """(access key, secret key, token) from the first configured source; cached, refreshed
    ahead of expiry. Raises AwsError "MissingCredentials" naming the sources tried."""
    global _cached, _cached_for
    from kindling.aws import errors

    if not errors.acquire(_lock, deadline):
        raise AwsError("DeadlineExceeded", "credentials: another thread was fetching them until the deadline", 0, True)
    try:
        key = _environment_key()
        cached = _cached if _cached_for == key else None
        if cached is not None:
            if cached.live:
                return cached.fetch(deadline).as_tuple()
            due = refresh_due(cached.expires_at, time.time())
            if due == "fresh":
                return cached.as_tuple()
            try:
                fresh = cached.fetch(deadline)
            except AwsError:
                if due == "advisory":
                    return cached.as_tuple()  # still valid for 10 minutes or more: try again next call
                raise
        else:
            fresh = resolve(deadline)
        _cached, _cached_for = fresh, key
        return fresh.as_tuple()
    finally:
        _lock.release()


def reset() -> None:
    """Forget the cached credentials (tests; a process that changed its profile)."""
    global _cached, _cached_for
    _cached, _cached_for = None, ()


def resolve(deadline: float | None = None) -> Credentials:
    """Walk the chain once, uncached: the first configured source's credentials."""
    from kindling.aws import profiles

    env = os.environ
    name = profiles.profile_name()
    settings = profiles.profile(name)
    if settings is None and profiles.named_explicitly():
        raise AwsError("CredentialsError", f"the profile {name!r} (AWS_PROFILE) is in neither "
                       f"{profiles.credentials_path()} nor {profiles.config_path()}")
    settings = settings or {}
    if any(settings.get(k) for k in _BOTOCORE_KEYS) and not settings.get("aws_access_key_id"):
        return _found(_botocore_fetcher(name), deadline)
    token_file, role = env.get("AWS_WEB_IDENTITY_TOKEN_FILE"), env.get("AWS_ROLE_ARN")
    session = env.get("AWS_ROLE_SESSION_NAME")
    if not (token_file and role) and settings.get("web_identity_token_file") and settings.get("role_arn"):
        token_file, role = settings["web_identity_token_file"], settings["role_arn"]
        session = settings.get("role_session_name") or session
    if token_file and role:
        from kindling.aws import sts

        return _found(lambda d: sts.assume_role_with_web_identity(role, token_file, session, d), deadline)
    static = _static(name)
    if static is not None:
        return static
    if settings.get("credential_process"):
        command = settings["credential_process"]
        return _found(lambda d: _from_process(command), deadline)
    config_keys = profiles.config_profiles().get(name) or {}
    if config_keys.get("aws_access_key_id") and config_keys.get("aws_secret_access_key"):
        return Credentials(config_keys["aws_access_key_id"], config_keys["aws_secret_access_key"],
                           config_keys.get("aws_session_token"), source=f"config file (profile {name})")
    full_uri = env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI")
    relative_uri = env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
    if full_uri or relative_uri:
        from kindling.aws.container import container_credentials

        uri = full_uri or f"http://169.254.170.2{relative_uri}"
        found = _found(lambda d: Credentials(*container_credentials(uri, d), source="container endpoint",
                                             live=True), deadline)
        return found
    if env.get("AWS_EC2_METADATA_DISABLED", "").lower() != "true":
        from kindling.aws import imds

        try:
            return _found(imds.instance_credentials, deadline)
        except AwsError as exc:
            if exc.code != "MissingCredentials":
                raise
            raise missing(exc.message) from exc
    raise missing()


def missing(detail: str = "") -> AwsError:
    """The error for no credentials anywhere: it names every source tried."""
    from kindling.aws import profiles

    return AwsError(
        "MissingCredentials",
        "no AWS credentials; tried: the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), web identity "
        f"(AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN), the profile {profiles.profile_name()!r} in "
        f"{profiles.credentials_path()} and {profiles.config_path()}, the container endpoint "
        "(AWS_CONTAINER_CREDENTIALS_FULL_URI), EC2 instance metadata"
        + (" (disabled by AWS_EC2_METADATA_DISABLED)" if os.environ.get("AWS_EC2_METADATA_DISABLED", "").lower()
           == "true" else f": {detail}" if detail else ""),
    )


def _found(fetch, deadline: float | None) -> Credentials:
    """Credentials from ``fetch(deadline)``, remembering ``fetch`` to refresh them with."""
    creds = fetch(deadline)
    creds.fetch = fetch
    return creds


def _static(name: str) -> Credentials | None:
    from kindling.aws import profiles

    section = profiles.credentials_profiles().get(name) or {}
    if section.get("aws_access_key_id") and section.get("aws_secret_access_key"):
        return Credentials(section["aws_access_key_id"], section["aws_secret_access_key"],
                           section.get("aws_session_token"), source=f"shared credentials file (profile {name})")
    return None


def _from_process(command: str) -> Credentials:
    """``credential_process``: run it (no shell, as botocore) and read its JSON (Version 1)."""
    import shlex
    import subprocess

    from kindling import codec
    from kindling.aws.temporary import parse_utc

    try:
        done = subprocess.run(shlex.split(command), capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        raise AwsError("CredentialsError", f"credential_process {command!r}: {exc}") from exc
    if done.returncode != 0:
        raise AwsError("CredentialsError", f"credential_process {command!r} exited {done.returncode}: "
                       f"{done.stderr.decode(errors='replace').strip()[:500]}")
    try:
        doc = codec.loads(done.stdout)
        if doc.get("Version") != 1:
            raise ValueError(f"unsupported Version {doc.get('Version')!r} (1 expected)")
        expiry = doc.get("Expiration")
        return Credentials(doc["AccessKeyId"], doc["SecretAccessKey"], doc.get("SessionToken"),
                           expires_at=parse_utc(expiry) if expiry else None, source="credential_process")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise AwsError("CredentialsError", f"credential_process {command!r} printed no credentials: {exc}") from exc


def _botocore_fetcher(name: str):
    """SSO and assume-role profiles: botocore's own providers, which refresh themselves; one
    botocore session per profile, asked on every call."""
    found: list = []

    def fetch(deadline: float | None) -> Credentials:
        if not found:
            try:
                import botocore.session
            except ImportError:
                raise AwsError("CredentialsError", f"the profile {name!r} needs botocore (IAM Identity Center or "
                               "assume-role): pip install boto3, or give the process keys, web identity or a "
                               "container endpoint") from None
            creds = botocore.session.Session(profile=name).get_credentials()
            if creds is None:
                raise AwsError("MissingCredentials", f"botocore found no credentials for the profile {name!r}")
            found.append(creds)
        frozen = found[0].get_frozen_credentials()
        return Credentials(frozen.access_key, frozen.secret_key, frozen.token,
                           source=f"botocore (profile {name})", live=True)

    return fetch
