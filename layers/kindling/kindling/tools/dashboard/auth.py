"""Who may use the dashboard: a token, or an authenticating proxy in front.

Token mode (the default). The token is ``KINDLING_DASHBOARD_TOKEN`` or ``--token``; without
one the server makes one at start (``secrets.token_urlsafe``) and prints the login URL. A
browser logs in once on ``/login`` and gets a session cookie (``HttpOnly``,
``SameSite=Strict``, the token's HMAC, not the token); scripts and Prometheus send
``Authorization: Bearer <token>``. Compared in constant time.

Proxy mode (``--trust-header NAME`` / ``KINDLING_DASHBOARD_TRUST_HEADER``): a proxy that
authenticates (oauth2-proxy, an ALB with OIDC, nginx ``auth_request``) sets the header
``NAME`` to the user; a request without it is refused. Only when enabled explicitly: a
header is trusted only if nothing but the proxy can reach the server (bind it to loopback
or a private interface the proxy alone reaches), since anyone else could send it too.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

__all__ = ["Auth", "COOKIE"]

COOKIE = "kindling_dashboard"


class Auth:
    """``check(headers)``: the user a request is from (``"token"`` or the proxy's header), or
    ``None``. ``generated`` says the token was made at start (print it)."""

    def __init__(self, *, token: str | None = None, trust_header: str | None = None):
        self.trust_header = trust_header or None
        self.generated = not token and not self.trust_header
        self.token = token or (None if self.trust_header else secrets.token_urlsafe(24))
        self._session = (hmac.new(self.token.encode(), b"kindling dashboard session", hashlib.sha256).hexdigest()
                         if self.token else None)

    @property
    def mode(self) -> str:
        return "proxy" if self.trust_header else "token"

    def check(self, headers) -> str | None:
        if self.trust_header:
            user = (headers.get(self.trust_header) or "").strip()
            return user or None
        auth = headers.get("Authorization") or ""
        if auth.startswith("Bearer ") and hmac.compare_digest(auth[7:].strip().encode(), self.token.encode()):
            return "token"
        for part in (headers.get("Cookie") or "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE and hmac.compare_digest(value.encode(), self._session.encode()):
                return "token"
        return None

    def login(self, given: str) -> str | None:
        """The session cookie's value for a right token, else ``None``."""
        if self.token and hmac.compare_digest(given.strip().encode(), self.token.encode()):
            return self._session
        return None
