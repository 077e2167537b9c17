"""``kindling dashboard``: a local web page over the results table.

The standard library's ``ThreadingHTTPServer`` serves one static page (``static/index.html``:
hand-drawn SVG charts, no framework, nothing fetched from elsewhere) and a small JSON API
the page polls for live refresh:

=====================================  =====================================================
``GET /api/meta``                      the statuses to filter by (status.py's), who you are
``GET /api/summary?window=3600``       counts by status and task over time, throughput, per
                                       task p50/p95/p99 of duration and queue wait, backlog
                                       and DLQ depth over time (:mod:`.aggregate`, :mod:`.series`)
``GET /api/search?task=&status=&...``  jobs by task, status, time range and error text, a
                                       page at a time (``next`` token) (:mod:`.search`)
``GET /api/job/<id>``                  one job: record, arguments' preview, generations,
                                       chain or chord (:mod:`.data`)
``GET /api/chord/<id>``                a chord by its handle's id: members and callback
``GET /api/lookup?id=``                what an id is: a job or a chord
``POST /api/job/<id>/retry``           ``kindling jobs retry`` (:func:`kindling.tools.ops.revive.retry_job`)
``POST /api/chord/<id>/retry``         retry each dead member (each reopens the chord)
``POST /api/login``                    the token for a session cookie
``GET /metrics``                       Prometheus text format (:mod:`.prometheus`)
=====================================  =====================================================

Every path but the page itself and the login needs authentication (:mod:`.auth`): a
token (made and printed at start when none is configured) or, when enabled explicitly, the
header an authenticating proxy sets. It binds 127.0.0.1 by default. Requests whose ``Host``
is not the address it serves are refused (DNS rebinding), and every POST must carry the
page's own header and no foreign ``Origin`` (cross-site requests).
"""

from __future__ import annotations

import sys
import threading
import time
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from kindling.core import codec
from kindling.tools.ops import OpsError, Stack

__all__ = ["serve", "make_server"]

STATIC = Path(__file__).parent / "static"
POST_HEADER = "X-Kindling-Dashboard"
RETRY_HEADER = POST_HEADER
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
WINDOWS = (900, 3600, 21600, 86400, 604800)
MIN_REFRESH_S = 1.0  # refreshes closer than this (several tabs) share one read of the table


def make_server(stack: Stack, *, host: str = "127.0.0.1", port: int = 8080, tasks: list[str] = (),
                token: str | None = None, trust_header: str | None = None, sample_backlog: bool = True):
    """The dashboard's server, bound but not yet serving (``serve_forever``); port 0 picks one.

    Its ``auth`` (:class:`.auth.Auth`) holds the token (``auth.token``; made now if none is
    given and no ``trust_header``), its ``sampler`` the backlog series."""
    from kindling.core.records import CHORD_PREFIX
    from kindling.core.status import CHORD_STATUSES, DEAD, REJECTED
    from kindling.tools.dashboard import data, prometheus, search
    from kindling.tools.dashboard.aggregate import Aggregator
    from kindling.tools.dashboard.auth import COOKIE, Auth
    from kindling.tools.dashboard.fresh import Fresh
    from kindling.tools.dashboard.series import BacklogSampler

    known_tasks = list(tasks)
    auth = Auth(token=token, trust_header=trust_header)
    sampler = BacklogSampler(stack)
    if sample_backlog:
        sampler.start()
    aggregators: dict[int, Aggregator] = {}
    refreshed: dict[int, float] = {}
    running: set[int] = set()
    guard = threading.Lock()
    from concurrent.futures import ThreadPoolExecutor

    readers = ThreadPoolExecutor(max_workers=8, thread_name_prefix="kindling-dashboard-search")

    def _refresh(window: int) -> None:
        try:
            aggregators[window].refresh()
            refreshed[window] = time.monotonic()
        finally:
            with guard:
                running.discard(window)

    def summary(window: int) -> dict:
        """The window's summary from its aggregate: read in the request the first time, then
        served as it stands while a background thread brings it up to date (stale while
        revalidating: a poll never waits for the table, and ``as_of`` says how fresh it is)."""
        window = min(WINDOWS, key=lambda w: abs(w - window))  # one aggregator per window the page offers
        with guard:
            agg = aggregators.get(window)
            if agg is None:
                agg = aggregators[window] = Aggregator(stack, window_s=window, tasks=known_tasks)
            first = window not in refreshed
            due = not first and window not in running and time.monotonic() - refreshed[window] >= MIN_REFRESH_S
            if due:
                running.add(window)
        if first:
            with agg.first_lock:
                if window not in refreshed:
                    agg.refresh()
                    refreshed[window] = time.monotonic()
        elif due:
            threading.Thread(target=_refresh, args=(window,), daemon=True).start()
        out = agg.summary()
        if not sampler.samples and not sample_backlog:
            sampler.sample()
        out["backlog"] = sampler.latest
        out["backlog_series"] = sampler.series(out["since"])
        return out

    searches = Fresh(MIN_REFRESH_S)

    def find(query: dict) -> dict:
        """A search page; without ``since``/``until`` the window's (``window``, seconds back
        from now), so that the page's polls ask the same question and share its answer."""
        asked = tuple(sorted((k, v) for k, v in query.items() if v))

        def read() -> dict:
            now = int(time.time() * 1000)
            until = int(query["until"]) if query.get("until") else now + 60_000
            since = int(query["since"]) if query.get("since") else now - int(query.get("window") or 3600) * 1000
            tasks_known = sorted(set(known_tasks) | {t for a in aggregators.values() for t in a.tasks})
            return search.search(
                stack, task=query.get("task") or None, status=query.get("status") or None,
                error=query.get("error") or None, since_ms=since, until_ms=until,
                page_size=int(query.get("page_size", 50)), token=query.get("token") or None,
                tasks=tasks_known, pool=readers)

        return searches.get(asked, read)

    class Handler(BaseHTTPRequestHandler):
        server_version = "kindling-dashboard"

        def log_message(self, fmt, *args):  # one short line per request on stderr
            sys.stderr.write(f"dashboard: {self.command} {self.path.split('?')[0]} "
                             f"{args[1] if len(args) > 1 else ''}\n")

        def _host_ok(self) -> bool:
            if host not in LOOPBACK:
                return True  # bound to a public address on purpose: the proxy in front checks
            name = (self.headers.get("Host") or "").rsplit(":", 1)[0]
            return name in LOOPBACK

        def _send(self, status: int, body: bytes, kind: str, extra: dict | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                                                        "script-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def _json(self, value, status: int = 200, extra: dict | None = None) -> None:
            self._send(status, codec.dumps(value).encode(), "application/json", extra)

        def _error(self, status: int, message: str) -> None:
            self._json({"error": message}, status)

        def _user(self) -> str | None:
            return auth.check(self.headers)

        def do_GET(self):  # noqa: N802 - http.server's naming
            if not self._host_ok():
                return self._error(HTTPStatus.FORBIDDEN, "unexpected Host header")
            url = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(url.query))
            if url.path in ("/", "/index.html", "/login"):
                return self._send(200, (STATIC / "index.html").read_bytes(), "text/html; charset=utf-8")
            user = self._user()
            if user is None:
                return self._error(HTTPStatus.UNAUTHORIZED, "log in: the dashboard's token (printed at its start)"
                                   if auth.mode == "token" else f"no {auth.trust_header} header from the proxy")
            try:
                if url.path == "/api/meta":
                    return self._json({"statuses": list(search.STATUSES), "chord_statuses": sorted(CHORD_STATUSES),
                                       "tasks": known_tasks, "auth": auth.mode, "user": user,
                                       "windows": list(WINDOWS)})
                if url.path == "/api/summary":
                    return self._json(summary(int(query.get("window", 3600))))
                if url.path == "/api/search":
                    return self._json(find(query))
                if url.path == "/api/lookup":
                    found = data.lookup(stack, query.get("id", ""))
                    return self._json(found) if found else self._error(404, f"no job or chord {query.get('id')!r}")
                if url.path.startswith("/api/job/"):
                    job_id = urllib.parse.unquote(url.path[len("/api/job/"):])
                    record = data.job(stack, job_id)
                    return self._json(record) if record else self._error(404, f"no record of job {job_id}")
                if url.path.startswith("/api/chord/"):
                    chord_id = urllib.parse.unquote(url.path[len("/api/chord/"):])
                    found = data.chord(stack, chord_id)
                    return self._json(found) if found else self._error(404, f"no chord {chord_id}")
                if url.path == "/metrics":
                    text = prometheus.render(summary(int(query.get("window", 3600))), sampler.latest)
                    return self._send(200, text.encode(), prometheus.CONTENT_TYPE)
            except (OpsError, ValueError, KeyError) as exc:
                return self._error(400, str(exc))
            except Exception as exc:  # noqa: BLE001 - AWS errors: shown on the page, the server goes on
                code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code")
                if code == "ValidationException":  # a page token from elsewhere, a filter DynamoDB refuses
                    return self._error(400, f"DynamoDB refused the query: {exc}")
                return self._error(502, f"{type(exc).__name__}: {exc}")
            return self._error(404, "not found")

        def do_POST(self):  # noqa: N802
            if not self._host_ok():
                return self._error(HTTPStatus.FORBIDDEN, "unexpected Host header")
            origin = self.headers.get("Origin")
            if self.headers.get(POST_HEADER) != "1" or (origin and urllib.parse.urlsplit(origin).netloc
                                                         != self.headers.get("Host")):
                return self._error(HTTPStatus.FORBIDDEN, "cross-site request refused")
            url = urllib.parse.urlsplit(self.path)
            if url.path == "/api/login":
                length = min(int(self.headers.get("Content-Length") or 0), 4096)
                try:
                    given = str(codec.loads(self.rfile.read(length) or b"{}").get("token", ""))
                except (ValueError, AttributeError):
                    given = ""
                session = auth.login(given)
                if session is None:
                    return self._error(HTTPStatus.UNAUTHORIZED, "wrong token")
                return self._json({"ok": True}, extra={
                    "Set-Cookie": f"{COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/"})
            if self._user() is None:
                return self._error(HTTPStatus.UNAUTHORIZED, "log in first")
            from kindling.tools.ops.revive import retry_job

            try:
                if url.path.startswith("/api/job/") and url.path.endswith("/retry"):
                    job_id = urllib.parse.unquote(url.path[len("/api/job/"):-len("/retry")])
                    if job_id.startswith(CHORD_PREFIX):
                        return self._error(HTTPStatus.CONFLICT, "a chord is not a job: retry it from its chord page "
                                                                "(its dead members are sent again)")
                    return self._json(retry_job(stack, job_id))
                if url.path.startswith("/api/chord/") and url.path.endswith("/retry"):
                    chord_id = urllib.parse.unquote(url.path[len("/api/chord/"):-len("/retry")])
                    found = data.chord(stack, chord_id)
                    if found is None:
                        return self._error(404, f"no chord {chord_id}")
                    dead = [m["id"] for m in found["members"] if m.get("status") in (DEAD, REJECTED)]
                    if not dead:
                        return self._error(HTTPStatus.CONFLICT, f"chord {chord_id} is {found['status']} and has no "
                                                                "dead member to retry")
                    return self._json({"chord": chord_id, "retried": [retry_job(stack, i) for i in dead]})
            except OpsError as exc:
                return self._error(HTTPStatus.CONFLICT, str(exc))
            except Exception as exc:  # noqa: BLE001
                return self._error(502, f"{type(exc).__name__}: {exc}")
            return self._error(404, "not found")

    try:
        server = ThreadingHTTPServer((host, port), Handler)
    except OSError as exc:  # a port in use: say which (--port), not just errno's words
        sampler.stop()
        readers.shutdown(wait=False)
        raise OSError(exc.errno, f"{host}:{port} cannot be bound for the dashboard: {exc.strerror}") from None
    server.daemon_threads = True
    server.auth, server.sampler, server.aggregators = auth, sampler, aggregators
    return server


def serve(stack: Stack, *, host: str = "127.0.0.1", port: int = 8080, tasks: list[str] = (),
          token: str | None = None, trust_header: str | None = None) -> int:
    """Serve until interrupted (Ctrl-C)."""
    _ = stack.dynamodb  # fail now, not on the first request, without a table
    server = make_server(stack, host=host, port=port, tasks=tasks, token=token, trust_header=trust_header)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{server.server_address[1]}/"
    print(f"kindling dashboard on {url} (table {stack.table}; Ctrl-C stops)", flush=True)
    if server.auth.mode == "proxy":
        print(f"trusting the {trust_header} header: only an authenticating proxy may reach this address", flush=True)
    elif server.auth.generated:
        print(f"login token (made now; set KINDLING_DASHBOARD_TOKEN to keep one): {server.auth.token}\n"
              f"log in: {url}login#token={server.auth.token}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.sampler.stop()
        server.server_close()
    return 0
