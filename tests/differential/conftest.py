"""The differential drawer talks to loopback stubs only: a test here that connects anywhere
else fails at once (botocore's requests to AWS are stopped before they are sent)."""

from __future__ import annotations

import logging
import socket

import pytest

# botocore logs every step at DEBUG; under pytest's capture that formatting is most of the time
logging.getLogger("botocore").setLevel(logging.WARNING)

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    real = socket.socket.connect

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in _LOOPBACK:
            raise AssertionError(f"a differential test connected to {address!r}: only loopback stubs here")
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
