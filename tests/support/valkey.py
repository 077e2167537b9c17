"""valkey-server processes for tests: each one a child of the test process on a loopback port,
with no persistence, stopped by :meth:`ValkeyServer.stop` or, failing that, when the test
process dies.

infra/valkey/ctl installs the binary; the servers are not its daemons, because a daemon
outlives a test run that is killed or times out, and a start that fails half-way (no PING
within its wait, a busy machine) leaves its daemon running with nobody to stop it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from support import ROOT, ctl, free_port

CTL = ROOT / "infra/valkey/ctl"
PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


@functools.cache
def server_binary() -> str:
    """valkey-server (or redis-server), installed by infra/valkey/ctl if missing."""
    ctl(CTL, "install")
    return shutil.which("valkey-server") or shutil.which("redis-server") or "valkey-server"


def _die_with_parent(parent: int) -> None:
    """Runs in the child before exec: SIGTERM when the process that started it ends, even by
    SIGKILL. Linux only; elsewhere stop() and the fixtures' teardown are all there is.

    The signal follows the starting *thread*, so servers must be started from the main
    thread (pytest runs fixtures there)."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before prctl took hold
        os._exit(1)


class ValkeyServer:
    """A valkey-server on 127.0.0.1: ``ValkeyServer("--requirepass", "pw").start()``.

    ``args`` go to valkey-server after the loopback, port and no-persistence options;
    ``tls=True`` serves TLS only, on ``port``. stop() then start() again restarts it on the
    same port, empty. Also a context manager: stopped on exit, whatever happened inside.
    """

    def __init__(self, *args: str, port: int | None = None, tls: bool = False):
        self.port = port or free_port()
        self.args = args
        self.tls = tls
        self.proc: subprocess.Popen | None = None
        self._dir: Path | None = None

    @property
    def url(self) -> str:
        return f"{'rediss' if self.tls else 'redis'}://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> ValkeyServer:
        self._dir = Path(tempfile.mkdtemp(prefix=f"valkey-{self.port}-"))
        ports = ["--port", "0", "--tls-port", str(self.port)] if self.tls else ["--port", str(self.port)]
        argv = [server_binary(), *ports, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--dir", str(self._dir), "--logfile", str(self._dir / "valkey.log"), *self.args]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT, cwd=self._dir,
                                     preexec_fn=functools.partial(_die_with_parent, os.getpid()))
        try:
            self._wait_listening(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_listening(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"valkey-server on port {self.port} exited:\n{self._log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"valkey-server did not listen on port {self.port} within {timeout} s:\n{self._log()}")

    def _log(self) -> str:
        with contextlib.suppress(OSError):
            return (self._dir / "valkey.log").read_text()[-3000:] if self._dir else ""
        return ""

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s); a no-op when it is not running."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self.proc = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> ValkeyServer:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()
