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


class ValkeyCluster:
    """A Valkey Cluster on 127.0.0.1: ``primaries`` primaries, each with ``replicas`` replicas
    (3 and 1: six valkey-server processes), made by ``valkey-cli --cluster create``.

    A node that stops answering is failed over after ``node_timeout_ms``; :meth:`kill`
    SIGKILLs a primary, :meth:`wait_promoted` waits until a replica serves its slots.
    Also a context manager: every node stopped on exit.
    """

    def __init__(self, primaries: int = 3, replicas: int = 1, node_timeout_ms: int = 1000):
        self.servers = [ValkeyServer("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                     "--cluster-node-timeout", str(node_timeout_ms),
                                     "--cluster-require-full-coverage", "no", "--cluster-replica-validity-factor", "0",
                                     "--cluster-port", str(free_port()))  # not port + 10000: may be taken
                        for _ in range(primaries * (1 + replicas))]
        self.replicas = replicas

    @property
    def url(self) -> str:
        """The URL of the first node: a client finds the others from it."""
        return self.servers[0].url

    @property
    def ports(self) -> list[int]:
        return [s.port for s in self.servers]

    def start(self, timeout: float = 30.0) -> ValkeyCluster:
        try:
            for server in self.servers:
                server.start()
            cli = shutil.which("valkey-cli") or shutil.which("redis-cli") or "valkey-cli"
            subprocess.run([cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports),
                            "--cluster-replicas", str(self.replicas), "--cluster-yes"],
                           check=True, capture_output=True, timeout=timeout)
            self.wait_ok(timeout, replicas_shown=True)
        except BaseException:
            self.stop()
            raise
        return self

    def _info(self, port: int, *args: str) -> str:
        cli = shutil.which("valkey-cli") or shutil.which("redis-cli") or "valkey-cli"
        done = subprocess.run([cli, "-h", "127.0.0.1", "-p", str(port), *args], capture_output=True, text=True,
                              timeout=10)
        return done.stdout

    def alive(self) -> list[ValkeyServer]:
        return [s for s in self.servers if s.proc is not None and s.proc.poll() is None]

    def wait_ok(self, timeout: float = 30.0, *, replicas_shown: bool = False) -> None:
        """Until every live node says cluster_state:ok and sees every slot served; with
        ``replicas_shown``, also until CLUSTER SLOTS lists every primary's replicas (seconds
        after they are attached: until then a client cannot know them, nor wait for them)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            infos = [self._info(s.port, "CLUSTER", "INFO") for s in self.alive()]
            links = [self._info(s.port, "INFO", "replication") for s in self.alive()]
            if all("cluster_state:ok" in i and "cluster_slots_ok:16384" in i for i in infos) and \
                    all("role:master" in i or "master_link_status:up" in i for i in links) and \
                    (not replicas_shown or self._replicas_shown()):
                return
            time.sleep(0.1)
        raise RuntimeError(f"the cluster on ports {self.ports} did not become ok within {timeout} s")

    def _replicas_shown(self) -> bool:
        """Whether CLUSTER SLOTS lists ``replicas`` replicas for every slot range."""
        from kindling.shared.valkey.connection import connect

        client = connect(self.alive()[0].url)
        try:
            return all(len(entry) - 3 >= self.replicas for entry in client.execute_command("CLUSTER", "SLOTS"))
        finally:
            client.close()

    def _primaries(self) -> dict[int, list[tuple[int, int]]]:
        """Each live primary's port and slot ranges, as a live node sees them (CLUSTER NODES)."""
        out = self._info(self.alive()[0].port, "CLUSTER", "NODES")
        primaries = {}
        for line in out.splitlines():
            fields = line.split()
            if len(fields) < 8 or "master" not in fields[2] or "fail" in fields[2]:
                continue
            port = int(fields[1].split("@")[0].rsplit(":", 1)[1])
            spans = [span.partition("-") for span in fields[8:] if not span.startswith("[")]
            primaries[port] = [(int(lo), int(hi or lo)) for lo, _, hi in spans]
        return primaries

    def primary_ports(self) -> list[int]:
        """The ports of the live primaries that serve slots."""
        return sorted(port for port, spans in self._primaries().items() if spans)

    def owner_port(self, key: str) -> int:
        """The port of the primary serving ``key``'s slot."""
        from kindling.drivers.valkey.cluster import key_slot

        slot = key_slot(key)
        for port, spans in self._primaries().items():
            if any(lo <= slot <= hi for lo, hi in spans):
                return port
        raise RuntimeError(f"no live primary serves slot {slot}")

    def server(self, port: int) -> ValkeyServer:
        return next(s for s in self.servers if s.port == port)

    def kill(self, port: int) -> None:
        """SIGKILL the node on ``port``: no goodbye, its connections reset."""
        self._before = set(self.primary_ports())
        proc = self.server(port).proc
        assert proc is not None
        proc.kill()
        proc.wait()

    def wait_promoted(self, killed: int, timeout: float = 30.0) -> int:
        """Until a replica of the killed primary serves its slots and the cluster is ok again;
        the new primary's port."""
        deadline = time.monotonic() + timeout
        before = self._before - {killed}
        while time.monotonic() < deadline:
            try:
                now = set(self.primary_ports()) - {killed}
            except (IndexError, ValueError):
                now = set()
            promoted = now - before
            if promoted:
                self.wait_ok(max(1.0, deadline - time.monotonic()))
                return promoted.pop()
            time.sleep(0.1)
        raise RuntimeError(f"no replica of the primary on port {killed} was promoted within {timeout} s")

    def replica_of(self, primary: int, timeout: float = 30.0) -> int:
        """The port of a replica of the primary on ``primary`` (CLUSTER NODES), waiting for one:
        a primary demoted by a failover shows as its successor's replica only once the nodes
        have gossiped it."""
        deadline = time.monotonic() + timeout
        while True:
            lines = [line.split() for line in self._info(primary, "CLUSTER", "NODES").splitlines() if line]
            primary_id = next(f[0] for f in lines if f[1].split("@")[0].endswith(f":{primary}"))
            ports = [int(f[1].split("@")[0].rsplit(":", 1)[1]) for f in lines
                     if "slave" in f[2] and f[3] == primary_id and "fail" not in f[2]]
            if ports:
                return ports[0]
            if time.monotonic() > deadline:
                raise RuntimeError(f"the primary on port {primary} has no replica after {timeout} s")
            time.sleep(0.05)

    def blocked(self, port: int, command: str = "xreadgroup") -> int:
        """How many clients of the node on ``port`` wait in a blocking ``command`` (CLIENT LIST)."""
        return sum(1 for line in self._info(port, "CLIENT", "LIST").splitlines()
                   if f"cmd={command}" in line and " flags=b" in line)

    def fail_over(self, primary: int, *, force: bool = False, timeout: float = 30.0) -> int:
        """``CLUSTER FAILOVER`` (``FORCE``: without the primary's agreement) sent to a replica
        of the primary on ``primary``; waits until that replica serves its slots and the
        primary follows it, and returns the replica's port (the new primary)."""
        replica = self.replica_of(primary)
        answer = self._info(replica, "CLUSTER", "FAILOVER", *(["FORCE"] if force else []))
        if "OK" not in answer:
            raise RuntimeError(f"CLUSTER FAILOVER on port {replica}: {answer!r}")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            primaries = self._primaries()
            if primaries.get(replica) and not primaries.get(primary):
                self.wait_ok(max(1.0, deadline - time.monotonic()))
                return replica
            time.sleep(0.05)
        raise RuntimeError(f"the replica on port {replica} did not take over from {primary} within {timeout} s")

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def __enter__(self) -> ValkeyCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
