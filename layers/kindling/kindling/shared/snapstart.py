"""SnapStart: a worker restored from a snapshot shares nothing that must be its own.

With SnapStart, Lambda runs a function version's init once, snapshots the environment and
resumes every new execution environment from that snapshot. What the init made is copied
into each of them: kept-alive sockets (stale: their peer knows one of them at most), the
state of ``random`` (the same jitter everywhere), cached credentials (as old as the
snapshot). The handler loads this module only during an init Lambda takes a snapshot of
(``AWS_LAMBDA_INITIALIZATION_TYPE=snap-start``) and registers :func:`after_restore`
through the managed runtime's ``snapshot_restore_py``; where that module is absent nothing
is registered.

After a restore, every connection opened before it is closed at its next use and a new one
opened (the AWS client's, S3's, the Lambda invoker's, the container credentials', the
Valkey client's); ``random`` is reseeded from ``os.urandom`` if something imported it;
credentials are read again; a Valkey drain's consumer name, which comes from the log
stream's name in the snapshot's environment, gets a tag of the copy's own. Only modules
already loaded are touched: a restore imports nothing. kindling makes nothing unique at
import (job ids and jitter are drawn when used, from ``os.urandom``, which Lambda keeps
unique across restores).
"""

from __future__ import annotations

import os
import sys

_installed = False

restore_tag = ""
"""Empty until a restore; then ``-`` and 8 hex digits of this copy's own, for names the
environment gave the snapshot and so every copy (a Valkey drain's consumer name)."""


def install() -> bool:
    """Register :func:`after_restore` with the runtime (once); False where the runtime has no
    ``snapshot_restore_py`` (outside Lambda, a runtime without SnapStart)."""
    global _installed
    if not _installed:
        try:
            from snapshot_restore_py import register_after_restore
        except ImportError:
            return False
        register_after_restore(after_restore)
        _installed = True
    return True


def after_restore() -> None:
    """Drop what a restored environment must not share with the snapshot's other copies."""
    global restore_tag
    restore_tag = "-" + os.urandom(4).hex()
    modules = sys.modules
    for name in ("kindling.drivers.aws.connection", "kindling.drivers.valkey.client"):
        module = modules.get(name)
        if module is not None:
            module.after_restore()  # each connection opened before now reconnects at its next use
    chain = modules.get("kindling.drivers.aws.chain")
    if chain is not None:
        chain.reset()
    random = modules.get("random")
    if random is not None:
        random.seed()  # from os.urandom
