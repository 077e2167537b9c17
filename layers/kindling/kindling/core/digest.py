"""SHA-256 and HMAC-SHA256: one implementation for kindling's signatures, SigV4 and digests.

``_sha2`` is CPython's built-in HACL* SHA-256 (3.12+; ``_sha256`` on 3.11): importing ``hashlib`` (or ``hmac``,
which imports it) would load OpenSSL's libcrypto, milliseconds a cold start does not need.
HMAC is RFC 2104 over it, as ``hmac.new(key, msg, sha256).digest()`` computes it.
"""

from __future__ import annotations

try:  # HACL* SHA-256, built into CPython 3.12+
    from _sha2 import sha256
except ImportError:
    try:  # CPython 3.11's own built-in SHA-256 (Lambda's python3.11)
        from _sha256 import sha256
    except ImportError:  # pragma: no cover - a build without either
        from hashlib import sha256

__all__ = ["hmac_sha256", "sha256", "sha256_hex"]

_BLOCK = 64  # SHA-256's block size, in bytes
_IPAD = bytes(b ^ 0x36 for b in range(256))
_OPAD = bytes(b ^ 0x5C for b in range(256))


def hmac_sha256(key: bytes, *parts: bytes) -> bytes:
    """HMAC-SHA256 of the concatenation of ``parts`` (fed in turn: no copy of a large body)."""
    if len(key) > _BLOCK:
        key = sha256(key).digest()
    key = key.ljust(_BLOCK, b"\0")
    inner = sha256(key.translate(_IPAD))
    for part in parts:
        inner.update(part)
    return sha256(key.translate(_OPAD) + inner.digest()).digest()


def sha256_hex(data: bytes | str) -> str:
    """The SHA-256 of ``data`` (text as UTF-8, lone surrogates kept) in hex."""
    return sha256(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)).hexdigest()
