"""The shared AWS files, as the AWS CLI and botocore read them: profiles and their settings.

``~/.aws/credentials`` (or ``AWS_SHARED_CREDENTIALS_FILE``) holds ``[name]`` sections,
``~/.aws/config`` (or ``AWS_CONFIG_FILE``) ``[default]`` and ``[profile name]`` sections;
the profile is ``AWS_PROFILE`` (or ``AWS_DEFAULT_PROFILE``), else ``default``. Never read
inside Lambda while the environment has credentials and a region: only the credential
chain and the region's last fallback come here, and a file that is not there costs a
``stat`` (configparser is imported only to read one that is).
"""

import os

DEFAULT = "default"


def profile_name() -> str:
    env = os.environ
    return env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE") or DEFAULT


def named_explicitly() -> bool:
    """Whether the environment names a profile (then a missing one is an error, as in botocore)."""
    return bool(os.environ.get("AWS_PROFILE") or os.environ.get("AWS_DEFAULT_PROFILE"))


def credentials_path() -> str:
    return os.path.expanduser(os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials")


def config_path() -> str:
    return os.path.expanduser(os.environ.get("AWS_CONFIG_FILE") or "~/.aws/config")


def read_sections(path: str) -> dict[str, dict[str, str]]:
    """Every section of an INI file, names and keys as written ({} when the file is not there).

    Values may continue on indented lines (the config file's nested ``s3 =`` blocks); such a
    value is kept as its raw text, as botocore leaves what it does not parse."""
    if not os.path.isfile(path):
        return {}
    import configparser

    parser = configparser.RawConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # keys as written: aws_access_key_id, not lowercased copies
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error as exc:
        from kindling.aws.errors import AwsError

        raise AwsError("CredentialsError", f"cannot parse {path}: {exc}") from exc
    return {name: dict(parser.items(name)) for name in parser.sections()}


def config_profiles(path: str | None = None) -> dict[str, dict[str, str]]:
    """The config file's profiles by name: ``[profile x]`` is x, ``[default]`` default (and
    ``[profile default]`` wins over it, as in botocore)."""
    out: dict[str, dict[str, str]] = {}
    for section, values in read_sections(path or config_path()).items():
        kind, _, name = section.strip().partition(" ")
        if kind == "profile" and name.strip():
            out[name.strip()] = values
        elif section.strip() == DEFAULT and DEFAULT not in out:
            out[DEFAULT] = values
    return out


def credentials_profiles(path: str | None = None) -> dict[str, dict[str, str]]:
    """The credentials file's profiles by name (``[name]``)."""
    return {section.strip(): values for section, values in read_sections(path or credentials_path()).items()}


def profile(name: str | None = None) -> dict[str, str] | None:
    """The profile's settings: the config file's, with the credentials file's over them
    (where botocore looks for keys first); None when neither file has it."""
    name = name or profile_name()
    config = config_profiles().get(name)
    creds = credentials_profiles().get(name)
    if config is None and creds is None:
        return None
    return {**(config or {}), **(creds or {})}


def profile_setting(key: str, name: str | None = None) -> str | None:
    """One setting of the profile in the config file (``region``, say), or None."""
    found = config_profiles().get(name or profile_name()) or {}
    return found.get(key) or None
