"""A small client for Toxiproxy's HTTP API (standard library only), for the chaos tests.

    api = Toxiproxy("http://127.0.0.1:8474")
    ddb = api.create("ddb", listen="127.0.0.1:21001", upstream="127.0.0.1:4566")
    with ddb.toxic("latency", latency=300, jitter=100):
        ...                        # every reply through the proxy now waits 300 +- 100 ms
    ddb.disable()                  # existing connections closed, new ones refused
    ddb.enable()
    ddb.delete()

Toxics and their attributes (https://github.com/Shopify/toxiproxy#toxics); ``stream`` is
``downstream`` (server to client, the default) or ``upstream``; ``toxicity`` is the share
of connections it applies to:

    latency     latency, jitter (ms)          every chunk of data is delayed
    bandwidth   rate (KB/s)                   data trickles through
    slow_close  delay (ms)                    the close is delayed
    timeout     timeout (ms)                  data is dropped; the connection is closed after
                                              ``timeout``, or held until the toxic is removed (0)
    reset_peer  timeout (ms)                  TCP RST once data flows (after ``timeout``)
    limit_data  bytes                         the connection is closed after that many bytes
    slicer      average_size, size_variation, delay (us)
"""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request

TOXICS = {
    "latency": {"latency", "jitter"},
    "bandwidth": {"rate"},
    "slow_close": {"delay"},
    "timeout": {"timeout"},
    "reset_peer": {"timeout"},
    "limit_data": {"bytes"},
    "slicer": {"average_size", "size_variation", "delay"},
}


class ToxiproxyError(Exception):
    """The API answered with an error status (``status``, ``body``) or could not be reached."""

    def __init__(self, message: str, status: int | None = None, body: str = ""):
        super().__init__(message)
        self.status = status
        self.body = body


class Toxiproxy:
    """The API of one toxiproxy server."""

    def __init__(self, url: str = "http://127.0.0.1:8474", timeout: float = 5.0):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def request(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            text = exc.read().decode("utf-8", "replace")
            raise ToxiproxyError(f"{method} {path}: HTTP {exc.code}: {text.strip()}", exc.code, text) from None
        except OSError as exc:
            raise ToxiproxyError(f"{method} {path}: {exc}") from exc
        return json.loads(raw) if raw.strip() else None

    def version(self) -> str:
        return self.request("GET", "/version")["version"]

    def ready(self) -> bool:
        try:
            self.version()
        except ToxiproxyError:
            return False
        return True

    def proxies(self) -> dict[str, dict]:
        return self.request("GET", "/proxies")

    def create(self, name: str, listen: str, upstream: str, *, enabled: bool = True,
               replace: bool = True) -> Proxy:
        """A proxy listening on ``listen`` (``host:port``) forwarding to ``upstream``; with
        ``replace`` an existing proxy of that name is deleted first."""
        if replace and name in self.proxies():
            self.request("DELETE", f"/proxies/{name}")
        info = self.request("POST", "/proxies",
                            {"name": name, "listen": listen, "upstream": upstream, "enabled": enabled})
        return Proxy(self, info)

    def get(self, name: str) -> Proxy:
        return Proxy(self, self.request("GET", f"/proxies/{name}"))

    def reset(self) -> None:
        """Every proxy enabled, every toxic removed."""
        self.request("POST", "/reset")


class Proxy:
    """One proxy; ``listen`` is its ``host:port``."""

    def __init__(self, api: Toxiproxy, info: dict):
        self.api = api
        self.name = info["name"]
        self.listen = info["listen"]
        self.upstream = info["upstream"]
        self._toxic_seq = 0

    def __repr__(self) -> str:
        return f"Proxy({self.name!r}, {self.listen} -> {self.upstream})"

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])

    def info(self) -> dict:
        return self.api.request("GET", f"/proxies/{self.name}")

    # -- enable / disable

    def enable(self) -> None:
        self.api.request("PATCH", f"/proxies/{self.name}", {"enabled": True})

    def disable(self) -> None:
        """Close every connection through the proxy and refuse new ones."""
        self.api.request("PATCH", f"/proxies/{self.name}", {"enabled": False})

    @contextlib.contextmanager
    def disabled(self):
        self.disable()
        try:
            yield self
        finally:
            self.enable()

    def delete(self) -> None:
        self.api.request("DELETE", f"/proxies/{self.name}")

    # -- toxics

    def add_toxic(self, kind: str, *, name: str | None = None, stream: str = "downstream",
                  toxicity: float = 1.0, **attributes) -> str:
        """Add a toxic; returns its name (default: ``<kind>_<stream>_<n>``)."""
        if kind not in TOXICS:
            raise ValueError(f"unknown toxic {kind!r}; known: {', '.join(sorted(TOXICS))}")
        unknown = set(attributes) - TOXICS[kind]
        if unknown:
            raise ValueError(f"toxic {kind!r} has no attribute(s) {sorted(unknown)}; it takes {sorted(TOXICS[kind])}")
        if stream not in ("downstream", "upstream"):
            raise ValueError(f"stream must be 'downstream' or 'upstream', not {stream!r}")
        if name is None:
            self._toxic_seq += 1
            name = f"{kind}_{stream}_{self._toxic_seq}"
        self.api.request("POST", f"/proxies/{self.name}/toxics",
                         {"name": name, "type": kind, "stream": stream, "toxicity": toxicity,
                          "attributes": attributes})
        return name

    def remove_toxic(self, name: str) -> None:
        self.api.request("DELETE", f"/proxies/{self.name}/toxics/{name}")

    def toxics(self) -> list[dict]:
        return self.api.request("GET", f"/proxies/{self.name}/toxics")

    def clear(self) -> None:
        """Remove every toxic and enable the proxy."""
        for toxic in self.toxics():
            self.remove_toxic(toxic["name"])
        self.enable()

    @contextlib.contextmanager
    def toxic(self, kind: str, **options):
        """The toxic for the duration of the ``with`` block."""
        name = self.add_toxic(kind, **options)
        try:
            yield name
        finally:
            self.remove_toxic(name)

    # -- the toxics by name

    def latency(self, ms: int, jitter: int = 0, **options) -> str:
        return self.add_toxic("latency", latency=ms, jitter=jitter, **options)

    def bandwidth(self, kb_per_s: int, **options) -> str:
        return self.add_toxic("bandwidth", rate=kb_per_s, **options)

    def slow_close(self, delay_ms: int, **options) -> str:
        return self.add_toxic("slow_close", delay=delay_ms, **options)

    def timeout(self, ms: int = 0, **options) -> str:
        return self.add_toxic("timeout", timeout=ms, **options)

    def reset_peer(self, after_ms: int = 0, **options) -> str:
        return self.add_toxic("reset_peer", timeout=after_ms, **options)

    def limit_data(self, n_bytes: int, **options) -> str:
        return self.add_toxic("limit_data", bytes=n_bytes, **options)
