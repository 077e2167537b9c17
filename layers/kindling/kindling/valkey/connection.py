"""Connecting to Valkey, and the names every part of the Valkey trigger shares."""

from __future__ import annotations

import os

DEFAULT_STREAM = "kindling:jobs"
DEFAULT_GROUP = "kindling"
FIELD = b"job"
"""The one field of a stream entry: the job's envelope JSON."""


def connect(url: str, **options):
    """A client for ``url`` (redis://, rediss:// with TLS, user:password@): kindling's own
    (:mod:`kindling.valkey.client`), which the layer ships and which loads neither ssl
    (for a plain URL) nor asyncio. It answers as ``valkey.Valkey`` does, so a valkey-py
    client can be passed as ``client=`` wherever a part takes one."""
    from kindling.valkey.client import Valkey

    options.setdefault("socket_connect_timeout", 5)
    options.setdefault("health_check_interval", 30)
    return Valkey.from_url(url, **options)


def default_consumer() -> str:
    # os.uname, not socket.gethostname: socket.py costs the cold path enum and selectors.
    return f"{os.uname().nodename}-{os.getpid()}"


def _s(value) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)
