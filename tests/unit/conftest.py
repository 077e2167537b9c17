"""The unit drawer opens no sockets: a test here that connects or listens fails at once, so
it lives in tests/service (moto servers, valkey-server) or tests/stack (LocalStack) instead.
The few still here that do are marked ``service`` (run by ``make test``, left out of
``make check``) until they move."""

from __future__ import annotations

import socket

import pytest

_INET = (socket.AF_INET, socket.AF_INET6)


class SocketOpened(AssertionError):
    pass


@pytest.fixture(autouse=True)
def no_sockets(request, monkeypatch):
    if request.node.get_closest_marker("service"):
        return

    def refuse(name):
        real = getattr(socket.socket, name)

        def guarded(self, *args, **kwargs):
            if self.family in _INET:
                raise SocketOpened(f"a unit test called socket.{name}{args!r}: it belongs in tests/service")
            return real(self, *args, **kwargs)

        return guarded

    for name in ("connect", "connect_ex", "bind"):
        monkeypatch.setattr(socket.socket, name, refuse(name))
