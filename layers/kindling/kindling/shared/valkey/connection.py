"""Connecting to Valkey (the names every part shares are in :mod:`kindling.core.valkey.keys`)."""

from __future__ import annotations

import os

from kindling.core.valkey.keys import DEFAULT_GROUP, DEFAULT_STREAM, FIELD, SIG_FIELD, TRACE_FIELD

__all__ = ["DEFAULT_GROUP", "DEFAULT_SOCKET_TIMEOUT", "DEFAULT_STREAM", "FIELD", "SIG_FIELD", "TRACE_FIELD",
           "URL_SECRET_ENV", "configured_url", "connect", "default_consumer", "text", "url_from_secret"]

URL_SECRET_ENV = "KINDLING_VALKEY_URL_SECRET"
DEFAULT_SOCKET_TIMEOUT = 10.0
"""Seconds any one socket wait of a kindling connection may take unless told otherwise (a
URL's ``?socket_timeout=``, or ``socket_timeout=``): a server that accepts and never answers
fails the call instead of blocking it for ever."""

_secret_urls: dict[str, str] = {}


def connect(url: str, **options):
    """A client for ``url`` (redis://, rediss:// with TLS, user:password@): kindling's own
    (:mod:`kindling.drivers.valkey.client`), which the layer ships and which loads neither ssl
    (for a plain URL) nor asyncio. It answers as ``valkey.Valkey`` does, so a valkey-py
    client can be passed as ``client=`` wherever a part takes one.

    Every wait is bounded: ``socket_timeout`` defaults to :data:`DEFAULT_SOCKET_TIMEOUT`
    (``None`` passed explicitly waits for ever), and the URL's own options win."""
    from kindling.drivers.valkey.client import Valkey

    options.setdefault("socket_timeout", DEFAULT_SOCKET_TIMEOUT)
    options.setdefault("socket_connect_timeout", 5)
    options.setdefault("health_check_interval", 30)
    return Valkey.from_url(url, **options)


def configured_url(environ=None) -> str | None:
    """The deployment's Valkey URL: ``KINDLING_VALKEY_URL``, else the one kept in the secret
    ``KINDLING_VALKEY_URL_SECRET`` names (Secrets Manager or SSM SecureString), read at the
    first call (never at import) and kept for the process's life; ``None`` if neither is set."""
    env = os.environ if environ is None else environ
    url = env.get("KINDLING_VALKEY_URL")
    if url:
        return url
    ref = env.get(URL_SECRET_ENV)
    if not ref:
        return None
    if ref not in _secret_urls:
        _secret_urls[ref] = url_from_secret(ref)
    return _secret_urls[ref]


def url_from_secret(ref: str, deadline: float | None = None) -> str:
    """Read the Valkey URL kept in the secret ``ref``: its value is the URL, or a JSON object
    with a ``url`` key (Secrets Manager's key/value form). Errors never quote the value."""
    from kindling.core import codec
    from kindling.core.errors import KindlingError
    from kindling.drivers import secrets

    value = secrets.read(ref, deadline=deadline).strip()
    if value.startswith("{"):
        try:
            value = codec.loads(value).get("url") or ""
        except (ValueError, AttributeError):
            value = ""
    if not isinstance(value, str) or not value.startswith(("redis://", "rediss://", "valkey://", "valkeys://")):
        raise KindlingError(f"secret {ref} does not hold a Valkey URL (redis:// or rediss://, or JSON with \"url\")")
    return value


def default_consumer() -> str:
    # os.uname, not socket.gethostname: socket.py costs the cold path enum and selectors.
    return f"{os.uname().nodename}-{os.getpid()}"


def text(value) -> str:
    """A reply's bytes (an entry id, a field, a script's status) as text; anything else as ``str``."""
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)
