"""``kindling dashboard``: a local web page over the results table.

The standard library's ``ThreadingHTTPServer`` serves one static page (``static/index.html``:
hand-drawn SVG charts, no framework, nothing fetched from elsewhere) and a small JSON API
the page polls for live refresh:

==================================  ========================================================
``GET /api/summary?window=3600``    counts by status and task over time, throughput, p50 and
                                    p99 of duration and queue wait, backlog (:mod:`.data`)
``GET /api/failures?limit=20``      the latest dead, failed and rejected jobs with tracebacks
``GET /api/job/<id>``               one job's record and earlier generations
``POST /api/job/<id>/retry``        ``kindling jobs retry`` (:func:`kindling.ops.revive.retry_job`)
==================================  ========================================================

Everything is read through the ``by_status`` and ``by_task`` indexes. It binds 127.0.0.1
by default and has no login of its own: expose it through an SSH tunnel or a reverse proxy
that authenticates (docs/operations.md, "The dashboard"). Requests whose ``Host`` is not the address it
serves are refused (DNS rebinding), and a retry must carry the page's own header and no
foreign ``Origin`` (cross-site requests).
"""

from __future__ import annotations

import sys
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from kindling import codec
from kindling.ops import OpsError, Stack

__all__ = ["serve", "make_server"]

STATIC = Path(__file__).parent / "static"
RETRY_HEADER = "X-Kindling-Dashboard"
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def make_server(stack: Stack, *, host: str = "127.0.0.1", port: int = 8080,
                tasks: list[str] = ()) -> ThreadingHTTPServer:
    """The dashboard's server, bound but not yet serving (``serve_forever``); port 0 picks one."""
    from kindling.dashboard import data

    known_tasks = list(tasks)

    class Handler(BaseHTTPRequestHandler):
        server_version = "kindling-dashboard"

        def log_message(self, fmt, *args):  # one short line per request on stderr
            sys.stderr.write(f"dashboard: {self.command} {self.path} {args[1] if len(args) > 1 else ''}\n")

        def _host_ok(self) -> bool:
            if host not in LOOPBACK:
                return True  # bound to a public address on purpose: the proxy in front checks
            name = (self.headers.get("Host") or "").rsplit(":", 1)[0]
            return name in LOOPBACK

        def _send(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                                                        "script-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, value, status: int = 200) -> None:
            self._send(status, codec.dumps(value).encode(), "application/json")

        def _error(self, status: int, message: str) -> None:
            self._json({"error": message}, status)

        def do_GET(self):  # noqa: N802 - http.server's naming
            if not self._host_ok():
                return self._error(HTTPStatus.FORBIDDEN, "unexpected Host header")
            url = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(url.query))
            try:
                if url.path in ("/", "/index.html"):
                    return self._send(200, (STATIC / "index.html").read_bytes(), "text/html; charset=utf-8")
                if url.path == "/api/summary":
                    window = min(max(int(query.get("window", 3600)), 60), 14 * 86_400)
                    return self._json(data.summary(stack, known_tasks, window_s=window))
                if url.path == "/api/failures":
                    return self._json(data.failures(stack, limit=min(int(query.get("limit", 20)), 200)))
                if url.path.startswith("/api/job/"):
                    job_id = urllib.parse.unquote(url.path[len("/api/job/"):])
                    record = data.job(stack, job_id)
                    return self._json(record) if record else self._error(404, f"no record of job {job_id}")
            except (OpsError, ValueError) as exc:
                return self._error(400, str(exc))
            except Exception as exc:  # noqa: BLE001 - AWS errors: shown on the page, the server goes on
                return self._error(502, f"{type(exc).__name__}: {exc}")
            return self._error(404, "not found")

        def do_POST(self):  # noqa: N802
            if not self._host_ok():
                return self._error(HTTPStatus.FORBIDDEN, "unexpected Host header")
            origin = self.headers.get("Origin")
            if self.headers.get(RETRY_HEADER) != "1" or (origin and urllib.parse.urlsplit(origin).netloc
                                                          != self.headers.get("Host")):
                return self._error(HTTPStatus.FORBIDDEN, "cross-site request refused")
            url = urllib.parse.urlsplit(self.path)
            if not (url.path.startswith("/api/job/") and url.path.endswith("/retry")):
                return self._error(404, "not found")
            from kindling.ops.revive import retry_job

            job_id = urllib.parse.unquote(url.path[len("/api/job/"):-len("/retry")])
            try:
                return self._json(retry_job(stack, job_id))
            except OpsError as exc:
                return self._error(HTTPStatus.CONFLICT, str(exc))
            except Exception as exc:  # noqa: BLE001
                return self._error(502, f"{type(exc).__name__}: {exc}")

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def serve(stack: Stack, *, host: str = "127.0.0.1", port: int = 8080, tasks: list[str] = ()) -> int:
    """Serve until interrupted (Ctrl-C)."""
    _ = stack.dynamodb  # fail now, not on the first request, without a table
    server = make_server(stack, host=host, port=port, tasks=tasks)
    shown = f"[{host}]" if ":" in host else host
    print(f"kindling dashboard on http://{shown}:{server.server_address[1]}/ (table {stack.table}; Ctrl-C stops)",
          flush=True)
    if host not in LOOPBACK:
        print("warning: bound beyond loopback with no login; put it behind an authenticating proxy", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
