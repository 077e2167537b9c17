"""Which proxy a connection goes through, read from the environment as botocore reads it.

``HTTPS_PROXY`` for https endpoints, ``HTTP_PROXY`` for http ones (the lowercase spellings
win, even empty, as in urllib's ``getproxies``), except for hosts ``NO_PROXY`` names: ``*``,
a host, or a domain (``example.com`` and ``.example.com`` both cover ``a.example.com``), with
or without a port, an IPv6 address in brackets (``[::1]``), as
``urllib.request.proxy_bypass_environment`` matches them. A proxy URL with a user and a
password sends ``Proxy-Authorization``; one with a user alone sends none (botocore's rule). An https
endpoint is reached through an HTTP CONNECT tunnel (TLS end to end, as urllib3 does); an
http one by sending the request to the proxy with the absolute URL as its target.

Imported only when one of the proxy variables is set.
"""

import os

from kindling.core.errors import ConfigurationError, masked_url
from kindling.drivers.aws.url import DEFAULT_PORTS, Url

# The variables read, lowercase first (it wins, as in urllib's getproxies).
VARIABLES = ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY")


class Proxy:
    """An http:// proxy: where to connect, and the Proxy-Authorization header if it has a user."""

    __slots__ = ("host", "port", "authorization", "url")

    def __init__(self, url: str) -> None:
        if "://" not in url:
            url = f"http://{url}"  # "127.0.0.1:3128", as urllib3 reads it
        try:
            parts = Url(url)
        except ValueError:  # a port that is not one
            parts = None
        if parts is None or parts.scheme != "http" or not parts.hostname:
            raise ConfigurationError(f"unsupported proxy {masked_url(url)!r}: kindling speaks to http:// proxies "
                                     "(CONNECT for https), with a host and a port")
        self.url, self.host, self.port = url, parts.hostname, parts.port or 80
        self.authorization: str | None = None
        netloc = url.split("://", 1)[1].split("/", 1)[0]
        if "@" in netloc:
            import base64
            from urllib.parse import unquote

            userinfo = netloc.rpartition("@")[0]
            user, _, password = userinfo.partition(":")
            if user and password:  # as botocore: a user without a password sends no header
                raw = f"{unquote(user)}:{unquote(password)}".encode()
                self.authorization = "Basic " + base64.b64encode(raw).decode("ascii")

    def __repr__(self) -> str:  # never the password
        return f"Proxy({self.host!r}, {self.port})"


def check_environment() -> None:
    """Refuse a proxy setting kindling does not support, naming its variable, the URL's
    credentials masked (:class:`~kindling.core.errors.ConfigurationError`): called where a worker
    is built (the Lambda handler's init, ``kindling worker``), so it is refused once, at
    start, and never in the middle of a batch."""
    env = os.environ
    for name in VARIABLES:
        value = env.get(name)
        if value:
            try:
                Proxy(value)
            except ConfigurationError as exc:
                raise ConfigurationError(f"{name}: {exc}") from None


def _env(name: str) -> str:
    """urllib's getproxies_environment: the lowercase variable when it is set, even empty
    (then the setting is off), else the uppercase one."""
    env = os.environ
    lower = env.get(name.lower())
    return lower if lower is not None else env.get(name.upper()) or ""


def bypass(host: str, port: int | None, no_proxy: str) -> bool:
    """Whether ``no_proxy`` (NO_PROXY's value) exempts ``host`` (``port``: None where the URL
    names none): urllib's proxy_bypass_environment over the URL's host and port as written,
    an IPv6 address in its brackets."""
    if no_proxy == "*":
        return True
    host = host.lower()
    if ":" in host:
        host = f"[{host}]"
    with_port = f"{host}:{port}" if port is not None else host
    for name in no_proxy.split(","):
        name = name.strip().lstrip(".").lower()
        if not name:
            continue
        if name in (host, with_port):
            return True
        if host.endswith("." + name) or with_port.endswith("." + name):
            return True
    return False


def proxy_for(scheme: str, host: str, port: int | None = None) -> Proxy | None:
    """The proxy for a connection to ``scheme://host:port``, or None to connect directly. The
    scheme's default port counts as no port (as kindling writes its URLs)."""
    url = _env(f"{scheme}_proxy")
    if not url:
        return None
    if port == DEFAULT_PORTS.get(scheme):
        port = None
    if bypass(host, port, _env("no_proxy")):
        return None
    return Proxy(url)
