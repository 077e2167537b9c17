"""The errors of kindling's Valkey client, named and nested as valkey-py names them.

Every one derives from :class:`kindling.core.errors.KindlingError`; the connection's also from
the built-in ``ConnectionError`` and ``TimeoutError`` (so from ``OSError``). A server error
reply is a :class:`ResponseError` carrying the server's message, so ``"BUSYGROUP" in
str(exc)`` and ``"NOGROUP" in str(exc)`` work as with valkey-py.

Code that may be handed either client (this one, or a ``valkey.Valkey`` passed as
``client=``) catches the classes of both with the functions at the end, which look at
``sys.modules`` instead of importing valkey-py::

    except errors.response_errors() as exc:
"""

from __future__ import annotations

import builtins
import sys

from kindling.core.errors import KindlingError


class ValkeyError(KindlingError):
    """Base class of the Valkey client's errors. ``maybe_ran`` is true on an error raised
    after the command was sent (the connection lost or a timeout while waiting for the
    reply): the server may have run it."""

    maybe_ran = False


class ConnectionError(ValkeyError, builtins.ConnectionError):
    """The connection failed or was lost. Raised after a command was sent only when resending
    it could run it twice (a write): the command may or may not have run."""


class TimeoutError(ValkeyError, builtins.TimeoutError):
    """A socket wait took longer than ``socket_timeout`` (or ``socket_connect_timeout``)."""


class DeadlineExceeded(TimeoutError):
    """The call's deadline passed before its replies were read."""


class AuthenticationError(ConnectionError):
    """AUTH failed, or the server wants it (WRONGPASS, NOAUTH)."""


class BusyLoadingError(ConnectionError):
    """The server is loading its dataset (LOADING)."""


class UntrustedNodeError(ConnectionError):
    """A cluster node named an address (MOVED, ASK, CLUSTER SLOTS) outside those the client
    may follow (``cluster_allow``): refused before any connection to it, so neither the
    password nor a command went there. Nothing ran on its account."""


class ClusterMapError(ConnectionError):
    """A cluster's redirect or ``CLUSTER SLOTS`` reply that cannot be read (a slot out of
    range, a port that is not one, a wrong shape): the command it answered did not run."""


class InvalidResponse(ValkeyError):
    """The server's bytes are not RESP."""


class ResponseError(ValkeyError):
    """The server answered a command with an error; the message is the server's."""


class DataError(ValkeyError):
    """A command's arguments cannot be sent (a bool, a value of an unknown type)."""


class WatchError(ValkeyError):
    """A transaction was aborted (EXEC returned nil)."""


class NoScriptError(ResponseError):
    """EVALSHA of a script the server does not hold (NOSCRIPT)."""


class OutOfMemoryError(ResponseError):
    """OOM."""


class ExecAbortError(ResponseError):
    """EXECABORT: a transaction was discarded because a command in it was refused."""


class ReadOnlyError(ResponseError):
    """READONLY: a write sent to a replica."""


class NoPermissionError(ResponseError):
    """NOPERM: the ACL user may not run the command or touch the key."""


class ModuleError(ResponseError):
    """A module could not be loaded or unloaded."""


class AuthenticationWrongNumberOfArgsError(ResponseError):
    """AUTH with a user name, sent to a server without ACLs."""


def _theirs(*names: str) -> tuple:
    module = sys.modules.get("valkey.exceptions")
    return tuple(getattr(module, name) for name in names) if module is not None else ()


def response_errors() -> tuple[type[BaseException], ...]:
    """Server error replies of either client (valkey-py's only if it is imported)."""
    return (ResponseError, *_theirs("ResponseError"))


def connection_errors() -> tuple[type[BaseException], ...]:
    """Lost connections and timeouts of either client, and the OSErrors under them."""
    return (ConnectionError, TimeoutError, OSError, *_theirs("ConnectionError", "TimeoutError"))


def valkey_errors() -> tuple[type[BaseException], ...]:
    """Everything either client raises about Valkey (server, connection, protocol)."""
    return (ValkeyError, OSError, *_theirs("ValkeyError"))


TOPOLOGY_CHANGED = ("UNBLOCKED", "READONLY", "LOADING", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN")
"""The first words of the error replies that mean "the topology changed under this command"
(a failover, a node loading, a slot moving): the command did not run, and it can be sent
again once the map is read again (on a single node: once the connection is opened again)."""

_PIPELINE_PREFIX = " of pipeline caused error: "


def topology_changed(exc: BaseException) -> bool:
    """Whether ``exc`` (either client's) is a reply of :data:`TOPOLOGY_CHANGED`: nothing ran."""
    if isinstance(exc, (ReadOnlyError, BusyLoadingError,
                        *_theirs("ReadOnlyError", "BusyLoadingError", "ClusterDownError", "TryAgainError"))):
        return True
    if not isinstance(exc, response_errors()) or not exc.args:
        return False
    text = str(exc.args[0])
    if _PIPELINE_PREFIX in text:  # "Command # 2 (XADD ...) of pipeline caused error: READONLY ..."
        text = text.split(_PIPELINE_PREFIX, 1)[1]
    return text.split(" ", 1)[0] in TOPOLOGY_CHANGED


def unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` means Valkey cannot serve now (a connection lost or refused, a
    timeout, the topology changing): what a loop waits out and goes on from."""
    return isinstance(exc, connection_errors()) or topology_changed(exc)


def outcome_unknown(exc: BaseException) -> bool:
    """Whether commands that raised ``exc`` may have run all the same: kindling's client says
    so (``maybe_ran``); another client's lost connection or timeout is taken to mean they
    may have (it cannot tell), any other error that they did not."""
    known = getattr(exc, "maybe_ran", None)
    if known is not None:
        return bool(known)
    return isinstance(exc, connection_errors())
