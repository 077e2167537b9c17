"""Lambda's CPU share by memory size, emulated with a cgroup CPU quota on one child process.

Lambda gives a function CPU in proportion to its memory: 1,769 MB is one vCPU, 128 MB
about 7% of one. Here a child runs in its own cgroup with a CFS bandwidth limit of
``quota = period * MB / 1769`` per ``period``. The period is short (14 ms) so that a burst
of start-up work is throttled the way a small share is, rather than running at full speed
for a long period's worth of quota; 14 ms rather than 10 because the kernel's smallest
quota is 1 ms, and 128 MB's share of 14 ms is 1.01 ms.

cgroup v1's ``cpu`` controller (``cpu.cfs_period_us``/``cpu.cfs_quota_us``) is used when
mounted and writable, else cgroup v2's ``cpu.max``. The child joins the group between
fork and exec (:meth:`CpuShare.join`, as ``preexec_fn``), so its whole start is throttled
and nothing else is. :meth:`CpuShare.remove` deletes the group.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

ONE_VCPU_MB = 1769
PERIOD_US = 14_000
MIN_QUOTA_US = 1000  # the kernel refuses a smaller cfs quota
V1_ROOT = Path("/sys/fs/cgroup/cpu")
V2_ROOTS = (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup"))


class CgroupUnavailable(RuntimeError):
    """No writable cgroup CPU controller here (not root, no cpu controller, read-only mount)."""


def quota_us(mb: int, period_us: int = PERIOD_US) -> int:
    """The CFS quota giving ``mb`` of Lambda memory its CPU share: period * MB / 1769."""
    q = round(period_us * mb / ONE_VCPU_MB)
    if q < MIN_QUOTA_US:
        raise ValueError(f"{mb} MB in a {period_us} us period is {q} us, below the kernel's {MIN_QUOTA_US} us")
    return q


def find_controller(v1_root: Path = V1_ROOT, v2_roots=V2_ROOTS) -> tuple[str, Path]:
    """("v1", root) or ("v2", root) for the first writable cpu controller, else CgroupUnavailable."""
    if (v1_root / "cpu.cfs_quota_us").exists() and os.access(v1_root, os.W_OK):
        return "v1", v1_root
    for root in v2_roots:
        controllers = root / "cgroup.controllers"
        if controllers.exists() and "cpu" in controllers.read_text().split() and os.access(root, os.W_OK):
            subtree = root / "cgroup.subtree_control"
            if "cpu" not in subtree.read_text().split():
                try:
                    subtree.write_text("+cpu")
                except OSError as exc:
                    raise CgroupUnavailable(f"cannot enable the cpu controller in {subtree}: {exc}") from exc
            return "v2", root
    raise CgroupUnavailable(f"no writable cgroup cpu controller (looked at {v1_root} and "
                            f"{', '.join(map(str, v2_roots))}; needs root)")


class CpuShare:
    """A cgroup limiting its members to ``mb``'s CPU share; create with :meth:`create`."""

    def __init__(self, mb: int, *, period_us: int = PERIOD_US, kind: str, root: Path, name: str | None = None):
        self.mb, self.period_us, self.quota_us = mb, period_us, quota_us(mb, period_us)
        self.kind, self.path = kind, root / (name or f"kindling-bench-{os.getpid()}-{mb}mb")
        self._procs = str(self.path / "cgroup.procs").encode()

    @classmethod
    def create(cls, mb: int, *, period_us: int = PERIOD_US, v1_root: Path = V1_ROOT, v2_roots=V2_ROOTS,
               name: str | None = None) -> CpuShare:
        kind, root = find_controller(v1_root, v2_roots)
        share = cls(mb, period_us=period_us, kind=kind, root=root, name=name)
        try:
            share.path.mkdir(exist_ok=True)
            if kind == "v1":
                # period first: the quota is checked against it
                (share.path / "cpu.cfs_period_us").write_text(str(period_us))
                (share.path / "cpu.cfs_quota_us").write_text(str(share.quota_us))
            else:
                (share.path / "cpu.max").write_text(f"{share.quota_us} {period_us}")
        except OSError as exc:
            share.remove()
            raise CgroupUnavailable(f"cannot set up {share.path}: {exc}") from exc
        return share

    def describe(self) -> str:
        return (f"cgroup {self.kind} {self.path}: {self.quota_us} us per {self.period_us} us "
                f"({self.quota_us / self.period_us:.3f} CPU)")

    def join(self) -> None:
        """Move the calling process into the group (runs in the child, between fork and exec)."""
        fd = os.open(self._procs, os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)

    def remove(self) -> None:
        """Delete the group (its members must have exited; retried briefly while the kernel reaps them)."""
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)
        self.path.rmdir()
