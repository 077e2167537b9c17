"""Connecting to Valkey, and the names every part of the Valkey trigger shares."""

from __future__ import annotations

import os
import socket

DEFAULT_STREAM = "kindling:jobs"
DEFAULT_GROUP = "kindling"
FIELD = b"job"
"""The one field of a stream entry: the job's envelope JSON."""


def connect(url: str, **options):
    """A ``valkey.Valkey`` client for ``url`` (redis://, rediss:// with TLS, user:password@)."""
    import valkey

    options.setdefault("socket_connect_timeout", 5)
    options.setdefault("health_check_interval", 30)
    return valkey.Valkey.from_url(url, **options)


def default_consumer() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _s(value) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)
