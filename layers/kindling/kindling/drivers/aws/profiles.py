"""The shared AWS files, as botocore reads them: profiles and their settings.

``~/.aws/credentials`` (or ``AWS_SHARED_CREDENTIALS_FILE``) holds ``[name]`` sections,
``~/.aws/config`` (or ``AWS_CONFIG_FILE``) ``[default]``, ``[profile name]`` and
``[services name]`` sections; the profile is ``AWS_DEFAULT_PROFILE`` (or ``AWS_PROFILE``),
else ``default``, botocore's order. As botocore (configparser, strictly): keys are
lower-cased, a duplicate section or key is an error, section names are taken as written
(``[ default ]`` is not ``[default]``), a profile section's name is split as a shell would
(``[profile "my name"]``), and where both ``[default]`` and ``[profile default]`` are there
the later one wins. A profile's settings are the config file's with the credentials file's
over them.

Never read inside Lambda while the environment has credentials and a region: only the
credential chain and the endpoint settings come here, and the endpoint settings only when
one of the files is there or a profile is named (:func:`kindling.drivers.aws.endpoints._profile`).
"""

import os

DEFAULT = "default"
_PROFILE_VARIABLES = ("AWS_DEFAULT_PROFILE", "AWS_PROFILE")
_parsed: dict[str, tuple[tuple, dict]] = {}  # path -> ((mtime, size), sections)


def profile_name() -> str:
    env = os.environ
    for name in _PROFILE_VARIABLES:  # botocore: the first one set, even to another profile than the second
        if env.get(name):
            return env[name]
    return DEFAULT


def named_explicitly() -> bool:
    """Whether the environment names a profile (then a missing one is an error, as in botocore)."""
    return any(os.environ.get(name) for name in _PROFILE_VARIABLES)


def expand(path: str) -> str:
    """A file's path as botocore reads it: ``$VARIABLES`` and ``~`` expanded."""
    return os.path.expanduser(os.path.expandvars(path))


def credentials_path() -> str:
    return expand(os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials")


def config_path() -> str:
    return expand(os.environ.get("AWS_CONFIG_FILE") or "~/.aws/config")


def read_sections(path: str) -> dict[str, dict[str, str]]:
    """Every section of an INI file as botocore's configparser reads it ({} when the file is
    not there); AwsError "CredentialsError" for one it cannot parse. Parsed again only when
    the file changed."""
    try:
        stat = os.stat(path)
    except OSError:
        return {}
    version = (stat.st_mtime_ns, stat.st_size)
    cached = _parsed.get(path)
    if cached is not None and cached[0] == version:
        return cached[1]
    import configparser

    parser = configparser.RawConfigParser()  # strict, keys lower-cased: botocore's parser
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError) as exc:
        from kindling.drivers.aws.errors import AwsError

        raise AwsError("CredentialsError", f"cannot parse {path}: {exc}") from exc
    sections = {name: dict(parser.items(name)) for name in parser.sections()}
    _parsed[path] = (version, sections)
    return sections


def nested(value: str | None) -> dict[str, str]:
    """An indented block (``s3 =`` then ``key = value`` lines) as botocore reads it."""
    out: dict[str, str] = {}
    for line in (value or "").splitlines():
        key, sep, val = line.strip().partition("=")
        if sep:
            out[key.strip()] = val.strip()
    return out


def _named(section: str, kind: str) -> str | None:
    """``x`` for a section ``[<kind> x]`` (split as botocore splits it), else None."""
    if not section.startswith(kind):
        return None
    import shlex

    try:
        parts = shlex.split(section)
    except ValueError:
        return None
    return parts[1] if len(parts) == 2 else None


def config_profiles(path: str | None = None) -> dict[str, dict[str, str]]:
    """The config file's profiles by name: ``[profile x]`` is x, ``[default]`` default (of
    the two default sections, the later one in the file)."""
    out: dict[str, dict[str, str]] = {}
    for section, values in read_sections(path or config_path()).items():
        name = DEFAULT if section == DEFAULT else _named(section, "profile")
        if name is not None:
            out[name] = values
    return out


def services_section(name: str) -> dict[str, dict[str, str]] | None:
    """The config file's ``[services name]`` section: service id -> its settings."""
    for section, values in read_sections(config_path()).items():
        if _named(section, "services") == name:
            return {service: nested(block) for service, block in values.items()}
    return None


def credentials_profiles(path: str | None = None) -> dict[str, dict[str, str]]:
    """The credentials file's profiles by name (``[name]``, as written)."""
    return read_sections(path or credentials_path())


def profile(name: str | None = None) -> dict[str, str] | None:
    """The profile's settings: the config file's, with the credentials file's over them
    (botocore's merged profile); None when neither file has it."""
    name = name or profile_name()
    config = config_profiles().get(name)
    creds = credentials_profiles().get(name)
    if config is None and creds is None:
        return None
    return {**(config or {}), **(creds or {})}


def scoped() -> dict[str, str]:
    """The settings of the profile the environment picks ({} for none); AwsError
    "CredentialsError" when the environment names a profile neither file has, as botocore
    refuses to make a client then."""
    found = profile()
    if found is None and named_explicitly():
        from kindling.drivers.aws.errors import AwsError

        raise AwsError("CredentialsError", f"the profile {profile_name()!r} (AWS_DEFAULT_PROFILE / AWS_PROFILE) is "
                       f"in neither {credentials_path()} nor {config_path()}")
    return found or {}

