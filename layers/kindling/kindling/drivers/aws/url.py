"""URLs as SigV4 and HTTP/1.1 need them: parsing, percent-encoding, canonical path and query.

Stand-ins for urllib.parse (``urlsplit``, ``quote``) and ipaddress, which import re and
more on the cold path; property tests hold them to the standard library's results.
"""

from _socket import AF_INET, AF_INET6, inet_pton

DEFAULT_PORTS = {"http": 80, "https": 443}

# Percent-encoding as urllib.parse.quote: unreserved characters (RFC 3986) stay as they are.
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")


def quote(text: str, safe: str = "/") -> str:
    """urllib.parse.quote(text, safe) for str input (UTF-8, uppercase hex)."""
    keep = _UNRESERVED | frozenset(safe.encode("ascii"))
    return "".join(chr(b) if b in keep else f"%{b:02X}" for b in text.encode("utf-8"))


class Url:
    """The parts of an http(s) URL this package needs, as urllib.parse.urlsplit reads them."""

    __slots__ = ("scheme", "hostname", "port", "path", "query")

    def __init__(self, url: str) -> None:
        scheme, sep, rest = url.partition("://")
        if not sep:
            scheme, rest = "", url
        self.scheme = scheme.lower()
        rest = rest.partition("#")[0]
        cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
        netloc, rest = rest[:cut], rest[cut:]
        self.path, _, self.query = rest.partition("?")
        hostport = netloc.rpartition("@")[2]
        if hostport.startswith("["):  # IPv6 literal
            host, _, port = hostport[1:].partition("]")
            port = port[1:] if port.startswith(":") else ""
        else:
            host, _, port = hostport.partition(":")
        self.hostname = host.lower() or None
        if port and not (port.isdigit() and int(port) <= 65535):
            from kindling.core.errors import masked_url

            raise ValueError(f"invalid port in URL {masked_url(url)!r}")
        self.port = int(port) if port else None


def canonical_path(path: str) -> str:
    """RFC 3986 dot-segment removal plus collapsing of repeated slashes, then URI-encode.

    ``path`` is the wire form (already percent-encoded), so this encodes it a second
    time, as SigV4 requires for every service except S3 (botocore does the same).
    """
    if not path:
        return "/"
    segments: list[str] = []
    for segment in path.split("/"):
        if segment and segment != ".":
            if segment == "..":
                if segments:
                    segments.pop()
            else:
                segments.append(segment)
    normalized = "/".join(segments)
    if path[0] == "/":
        normalized = "/" + normalized
    if path[-1] == "/" and segments:
        normalized += "/"
    return quote(normalized, safe="/~")


def canonical_query(query: str) -> str:
    """Sort the wire-form query's parameters by (name, value); no re-encoding, as botocore."""
    if not query:
        return ""
    pairs = sorted(pair.partition("=")[::2] for pair in query.split("&"))
    return "&".join(f"{name}={value}" for name, value in pairs)


def host_header(scheme: str, hostname: str | None, port: int | None) -> str:
    """The Host header for a URL's parts: IPv6 literals bracketed, the scheme's default port left out."""
    host = hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if port is not None and port != DEFAULT_PORTS.get(scheme):
        host = f"{host}:{port}"
    return host


def is_loopback(host: str) -> bool:
    """``ipaddress.ip_address(host).is_loopback``, False for what is not an IP address.

    127.0.0.0/8, ::1 and 127.0.0.0/8 mapped into IPv6 (::ffff:127.x.y.z); an IPv6 scope
    ("::1%lo") is allowed, as ipaddress allows it. inet_pton is as strict as ipaddress
    about the text (four decimal octets, no leading zeros).
    """
    if "/" in host:
        return False
    try:
        if ":" not in host:
            return inet_pton(AF_INET, host)[0] == 127
        address, sep, scope = host.partition("%")
        if sep and (not scope or "%" in scope):
            return False
        packed = inet_pton(AF_INET6, address)
    except (OSError, ValueError):  # not an address; ValueError: a NUL character
        return False
    if packed[:12] == b"\0" * 10 + b"\xff\xff":  # IPv4-mapped
        return packed[12] == 127
    return packed == b"\0" * 15 + b"\1"
