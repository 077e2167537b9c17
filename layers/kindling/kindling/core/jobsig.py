"""Signed jobs, the pure part: the MAC over a message, its wire form, and the key set's format.

A signed message carries ``v1:<key id>:<MAC>`` beside its body (never inside it, so the
body is signed as the exact bytes sent, with no canonical re-encoding): in the SQS message
attribute :data:`ATTRIBUTE`, or the stream entry's field ``sig``
(:data:`kindling.core.valkey.keys.SIG_FIELD`). The MAC is HMAC-SHA256 (base64) under the key
named by the key id, over::

    b"kindling-job-v1\\n" + key id + b"\\n" + destination + b"\\n" + body

The destination binds a signature to where the producer sent the message: a queue
(``sqs:<account>:<queue name>``) or a stream (``valkey:<stream key>``). A message signed
for one team's queue is refused on another queue that trusts the same key. The key id is
inside the MAC too, so a signature cannot be relabelled with another id.

What a signature does not bind: the time (a message captured from the queue can be sent to
the same queue again; its job id makes the copy a duplicate of a finished job) and the
sender among holders of the key (anyone holding a key can sign anything).

The key set is a JSON object, kept as one Secrets Manager secret::

    {"current": "2026-11", "keys": {"2026-11": "<base64, 32 bytes>", "2026-05": "<base64>"}}

Producers sign with ``current``; workers accept any key in ``keys``. Rotation: add the new
key, wait for workers to reload (:mod:`kindling.shared.signed`), make it ``current``, and drop the
old one once no message signed with it is left.
"""

from __future__ import annotations

from binascii import Error as _Base64Error
from binascii import a2b_base64, b2a_base64

from kindling.core.digest import hmac_sha256
from kindling.core.envelope import SIGNATURE_ATTRIBUTE

try:
    from _operator import _compare_digest as compare_digest  # what hmac.compare_digest falls back to
except ImportError:  # pragma: no cover
    from hmac import compare_digest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

ATTRIBUTE = SIGNATURE_ATTRIBUTE
"""The SQS message attribute holding a message's signature (:data:`kindling.core.envelope.SIGNATURE_ATTRIBUTE`)."""
VERSION = "v1"
MIN_KEY_BYTES = 16
_KEY_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


class KeySetError(ValueError):
    """The key set (the secret's value) is not what :func:`parse_keys` reads."""


def check_key_id(key_id: str) -> str:
    if not (isinstance(key_id, str) and 0 < len(key_id) <= 64 and set(key_id) <= _KEY_ID_CHARS):
        raise KeySetError(f"key id must be 1-64 characters of A-Z a-z 0-9 . _ -, got {key_id!r}")
    return key_id


def sqs_destination(queue: str) -> str:
    """The destination of a queue, from its URL (``.../<account>/<name>``) or its ARN
    (``arn:aws:sqs:<region>:<account>:<name>``): both name the same queue the same way."""
    if queue.startswith("arn:"):
        parts = queue.split(":")
        if len(parts) != 6 or not parts[4] or not parts[5]:
            raise ValueError(f"not an SQS queue ARN: {queue!r}")
        account, name = parts[4], parts[5]
    else:
        parts = queue.split("?", 1)[0].rstrip("/").split("/")
        if len(parts) < 5 or not parts[-2] or not parts[-1]:
            raise ValueError(f"not an SQS queue URL (…/<account>/<name>): {queue!r}")
        account, name = parts[-2], parts[-1]
    return f"sqs:{account}:{name}"


def stream_destination(stream: str | bytes) -> str:
    return "valkey:" + (stream.decode() if isinstance(stream, bytes) else stream)


def mac(key: bytes, key_id: str, destination: str, body: bytes) -> bytes:
    """HMAC-SHA256 of the signed bytes: the version, key id and destination, then the body."""
    return hmac_sha256(key, f"kindling-job-{VERSION}\n{key_id}\n{destination}\n".encode(), body)


def sign(key_id: str, key: bytes, destination: str, body: bytes | str) -> str:
    """The signature of ``body`` sent to ``destination``: ``v1:<key id>:<MAC base64>``."""
    data = body.encode() if isinstance(body, str) else bytes(body)
    return f"{VERSION}:{key_id}:{b2a_base64(mac(key, key_id, destination, data), newline=False).decode()}"


def key_id_of(signature: str | bytes | None) -> str | None:
    """The key id a signature names, or ``None`` when it is not a v1 signature at all."""
    if isinstance(signature, bytes | bytearray):
        signature = bytes(signature).decode("utf-8", "replace")
    if not signature or not isinstance(signature, str):
        return None
    parts = signature.split(":")
    return parts[1] if len(parts) == 3 and parts[0] == VERSION and parts[1] else None


def verify(keys: Mapping[str, bytes], destination: str, body: bytes | str, signature: str | bytes | None) -> str | None:
    """Why the message is not validly signed for ``destination``, or ``None`` if it is."""
    if signature is None or signature in ("", b""):
        return "unsigned message (signing is on: a job needs a signature)"
    if isinstance(signature, bytes | bytearray):
        signature = bytes(signature).decode("utf-8", "replace")
    parts = signature.split(":") if isinstance(signature, str) else []
    if len(parts) != 3 or parts[0] != VERSION:
        return f"malformed signature (not {VERSION}:<key id>:<MAC>)"
    key_id, given = parts[1], parts[2]
    key = keys.get(key_id)
    if key is None:
        return f"signature under an unknown key id {key_id[:64]!r}"
    try:
        expected = a2b_base64(given.encode("ascii"), strict_mode=True)
    except (_Base64Error, UnicodeEncodeError, ValueError):
        return "malformed signature (the MAC is not base64)"
    data = body.encode() if isinstance(body, str) else bytes(body)
    if not compare_digest(mac(key, key_id, destination, data), expected):
        return f"bad signature under key id {key_id!r} for {destination} (body altered, wrong key, or " \
               "signed for another destination)"
    return None


def parse_keys(secret: str | bytes) -> tuple[str, dict[str, bytes]]:
    """``(current key id, {key id: key})`` from the secret's JSON; :class:`KeySetError` if
    it is not a key set (never echoing key material)."""
    from kindling.core import codec

    try:
        value = codec.loads(secret)
    except ValueError:
        raise KeySetError("the signing secret is not JSON") from None
    if not isinstance(value, dict) or not isinstance(value.get("keys"), dict) or not value["keys"]:
        raise KeySetError('the signing secret must be {"current": <key id>, "keys": {<key id>: <base64 key>, ...}}')
    keys: dict[str, bytes] = {}
    for key_id, encoded in value["keys"].items():
        check_key_id(key_id)
        try:
            key = a2b_base64(encoded.encode("ascii"), strict_mode=True) if isinstance(encoded, str) else b""
        except (_Base64Error, UnicodeEncodeError, ValueError):
            raise KeySetError(f"key {key_id!r} is not base64") from None
        if len(key) < MIN_KEY_BYTES:
            raise KeySetError(f"key {key_id!r} is shorter than {MIN_KEY_BYTES} bytes (32 recommended)")
        keys[key_id] = key
    current = value.get("current")
    if current not in keys:
        raise KeySetError(f"the signing secret's current key id {current!r} is not one of its keys")
    return current, keys
