"""The credential chain outside the environment: what botocore finds, in botocore's order.

:func:`kindling.drivers.aws.client.get_credentials` returns the environment's keys itself and
imports this module only when there are none (never inside Lambda, which sets them). The
sources, in order:

1. an assume-role profile (``role_arn`` with ``source_profile`` or ``credential_source``;
   ``role_arn`` with neither, or both, is an error), even one that holds keys too: through
   botocore when it is installed, else a CredentialsError saying so;
2. web identity: ``AWS_WEB_IDENTITY_TOKEN_FILE`` or the profile's ``web_identity_token_file``,
   with ``AWS_ROLE_ARN`` or the profile's ``role_arn`` (EKS service accounts; a token file
   without a role is an error) (:mod:`kindling.drivers.aws.sts`);
3. an IAM Identity Center profile (``sso_*``), through botocore;
4. the shared credentials file's keys for the profile, then its ``credential_process``,
   then the config file's keys (:mod:`kindling.drivers.aws.profiles`); an access key id without a
   secret is an error, not a reason to look further;
5. the container endpoint (ECS, EKS Pod Identity: ``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI``,
   else ``_FULL_URI``);
6. EC2 instance metadata, IMDSv2 (:mod:`kindling.drivers.aws.imds`), unless
   ``AWS_EC2_METADATA_DISABLED=true``.

The first source that is configured answers; one that is configured and fails raises
(a broken profile is not skipped for the instance's role). Temporary credentials are cached
and fetched again before they expire (:func:`refresh_due`).
"""

import os
import time
from _thread import allocate_lock

from kindling.drivers.aws.errors import AwsError
from kindling.drivers.aws.temporary import ADVISORY_REFRESH, MANDATORY_REFRESH, Credentials, refresh_due

__all__ = ["ADVISORY_REFRESH", "MANDATORY_REFRESH", "Credentials", "get", "refresh_due", "reset", "resolve"]

SOURCES = ("environment", "web identity", "shared credentials and config files", "container endpoint",
           "EC2 instance metadata")
# IAM Identity Center profiles: botocore resolves them
_SSO_KEYS = ("sso_session", "sso_start_url", "sso_account_id")

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
    from kindling.drivers.aws import errors

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
    """Walk the chain once, uncached: the first configured source's credentials (botocore's
    providers after the environment's, in botocore's order)."""
    from kindling.drivers.aws import profiles

    env = os.environ
    name = profiles.profile_name()
    settings = profiles.profile(name)
    if settings is None and profiles.named_explicitly():
        raise AwsError("CredentialsError", f"the profile {name!r} (AWS_DEFAULT_PROFILE / AWS_PROFILE) is in neither "
                       f"{profiles.credentials_path()} nor {profiles.config_path()}")
    settings = settings or {}
    if "role_arn" in settings and "web_identity_token_file" not in settings:  # botocore assumes the role
        sources = [key for key in ("source_profile", "credential_source") if key in settings]
        if len(sources) != 1:
            raise AwsError("CredentialsError", f"the profile {name!r} has a role_arn and "
                           + ("both source_profile and credential_source" if sources else
                              "neither source_profile nor credential_source") + ": botocore refuses it too")
        return _found(_botocore_fetcher(name), deadline)
    token_file = env.get("AWS_WEB_IDENTITY_TOKEN_FILE") or settings.get("web_identity_token_file")
    if token_file:
        role = env.get("AWS_ROLE_ARN") or settings.get("role_arn")
        if not role:
            raise AwsError("CredentialsError", f"web identity: {token_file} is configured but no role "
                           "(AWS_ROLE_ARN, or role_arn in the profile)")
        session = env.get("AWS_ROLE_SESSION_NAME") or settings.get("role_session_name")
        from kindling.drivers.aws import sts

        return _found(lambda d: sts.assume_role_with_web_identity(role, token_file, session, d), deadline)
    if any(settings.get(key) for key in _SSO_KEYS):
        return _found(_botocore_fetcher(name), deadline)
    static = _keys(profiles.credentials_profiles().get(name), f"shared credentials file (profile {name})")
    if static is not None:
        return static
    if settings.get("credential_process"):
        command = settings["credential_process"]
        return _found(lambda d: _from_process(command), deadline)
    static = _keys(profiles.config_profiles().get(name), f"config file (profile {name})")
    if static is not None:
        return static
    relative_uri = env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
    full_uri = env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI")
    if relative_uri is not None or full_uri is not None:  # set, even empty: botocore's test
        from kindling.drivers.aws import container

        uri = f"{container.RELATIVE_URI_BASE}{relative_uri}" if relative_uri is not None else full_uri
        return _found(lambda d: Credentials(*container.container_credentials(uri, d), source="container endpoint",
                                            live=True), deadline)
    if env.get("AWS_EC2_METADATA_DISABLED", "").lower() != "true":
        from kindling.drivers.aws import imds

        try:
            return _found(imds.instance_credentials, deadline)
        except AwsError as exc:
            if exc.code != "MissingCredentials":
                raise
            raise missing(exc.message) from exc
    raise missing()


def missing(detail: str = "") -> AwsError:
    """The error for no credentials anywhere: it names every source tried."""
    from kindling.drivers.aws import profiles

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


def _keys(section: dict[str, str] | None, source: str) -> Credentials | None:
    """A profile section's keys; None where it has no access key id. An access key id without
    a secret is an error, as in botocore: never another identity from further down the chain."""
    if not section or "aws_access_key_id" not in section:
        return None
    if "aws_secret_access_key" not in section:
        raise AwsError("CredentialsError", f"{source}: aws_access_key_id without aws_secret_access_key")
    return Credentials(section["aws_access_key_id"], section["aws_secret_access_key"],
                       section.get("aws_session_token"), source=source)


def _from_process(command: str) -> Credentials:
    """``credential_process``: run it (no shell, as botocore) and read its JSON (Version 1)."""
    import shlex
    import subprocess

    from kindling.core import codec
    from kindling.drivers.aws.temporary import parse_utc

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
        try:
            import botocore.exceptions
            import botocore.session
        except ImportError:
            raise AwsError("CredentialsError", f"the profile {name!r} needs botocore (IAM Identity Center or "
                           "assume-role): pip install boto3, or give the process keys, web identity or a "
                           "container endpoint") from None
        try:
            if not found:
                creds = botocore.session.Session(profile=name).get_credentials()
                if creds is None:
                    raise AwsError("MissingCredentials", f"botocore found no credentials for the profile {name!r}")
                found.append(creds)
            frozen = found[0].get_frozen_credentials()
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            raise AwsError("CredentialsError", f"the profile {name!r}, through botocore: {exc}") from exc
        return Credentials(frozen.access_key, frozen.secret_key, frozen.token,
                           source=f"botocore (profile {name})", live=True)

    return fetch
