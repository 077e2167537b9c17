"""The workers the harness starts and watches, with their stderr in a file instead of a pipe.

The harness samples a running worker (its memory, the results it writes) and never reads
its output while it runs. Into a pipe, a worker that writes more than the pipe holds
(64 KiB: a log line per job or per batch) blocks on that write for good, and the run with
it. A temporary file takes all of it; its end is read only when the worker fails.
"""

from __future__ import annotations

import subprocess
import tempfile


def popen(cmd: list[str], **kwargs) -> subprocess.Popen:
    """``subprocess.Popen(cmd, **kwargs)`` with stderr going to a temporary file (see :func:`stderr_tail`)."""
    err = tempfile.TemporaryFile()  # noqa: SIM115 - it outlives this call, closed with the Popen
    try:
        proc = subprocess.Popen(cmd, stderr=err, **kwargs)
    except BaseException:
        err.close()
        raise
    proc.err_file = err  # type: ignore[attr-defined]  # closed with the Popen object
    return proc


def stderr_tail(proc: subprocess.Popen, limit: int = 2000) -> str:
    """The last ``limit`` characters the worker wrote to stderr so far."""
    err = proc.err_file  # type: ignore[attr-defined]
    err.seek(0)
    return err.read().decode(errors="replace")[-limit:]
