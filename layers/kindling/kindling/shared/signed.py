"""Signed jobs at the edges: the key ring read from a secret, and the workers' check.

Off unless a deployment names a signing secret (``KINDLING_SIGNING_SECRET``, set from the
template's ``SigningSecretArn``). Then producers sign every message
(:func:`kindling.core.jobsig.sign`) and workers record a message that is unsigned or badly signed
``rejected`` without running it. Nothing here is imported when signing is off.

The key set is read at first use and kept for the container's life, re-read at most every
``max_age`` seconds so that rotation reaches warm workers, and at once (at most every
``min_refresh`` seconds) when a message names a key id this worker does not know yet: a
producer that started signing with a new key is not refused for long, and a flood of
made-up key ids costs at most one read per ``min_refresh``. A re-read that fails keeps the
keys already known; a worker that has never read them hands its batch back (nothing is
rejected because Secrets Manager was unreachable).
"""

from __future__ import annotations

from time import monotonic

from kindling.core import jobsig

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from kindling.core.batch import Delivery

MAX_AGE_S = 300.0
MIN_REFRESH_S = 30.0
FIRST_RETRY_S = 1.0


class Keyring:
    """The key set of one secret, read at first use and refreshed within bounds.

    Args:
        secret: the secret's ARN or name (see :mod:`kindling.drivers.secrets`).
        fetch: ``fetch(secret, deadline) -> str``, the secret's value (default: kindling's
            own client; a boto3 producer passes one built on its session).
    """

    def __init__(self, secret: str, *, fetch: Callable[[str, float | None], str] | None = None,
                 max_age: float = MAX_AGE_S, min_refresh: float = MIN_REFRESH_S, clock=monotonic):
        if not secret:
            raise ValueError("Keyring needs a secret ARN or name")
        self.secret = secret
        self._fetch = fetch or _read
        self.max_age = max_age
        self.min_refresh = min_refresh
        self._clock = clock
        self._current: str | None = None
        self._keys: dict[str, bytes] = {}
        self._loaded_at: float | None = None
        self._tried_at: float = 0.0
        self._failure: Exception | None = None
        self.reads = 0

    def load(self, deadline: float | None = None, *, force: bool = False) -> None:
        """Read the key set if never read, stale, or ``force``d (within ``min_refresh``).

        Raises (:class:`kindling.drivers.secrets.SecretUnavailable`, :class:`jobsig.KeySetError`)
        only if no key set was ever read; later a failed re-read keeps the old keys."""
        now = self._clock()
        if self._loaded_at is None and self._failure is not None and now - self._tried_at < FIRST_RETRY_S:
            raise self._failure  # never read: try again soon, but not on every batch of a busy loop
        if self._loaded_at is not None:
            stale = now - self._loaded_at >= self.max_age
            if not (stale or force) or now - self._tried_at < self.min_refresh:
                return
        self._tried_at = now
        try:
            self.reads += 1
            current, keys = jobsig.parse_keys(self._fetch(self.secret, deadline))
        except Exception as exc:
            if self._loaded_at is None:
                self._failure = exc
                raise
            return  # keep the keys already known; try again after min_refresh
        self._current, self._keys, self._loaded_at, self._failure = current, keys, now, None

    def keys(self) -> dict[str, bytes]:
        self.load()
        return self._keys

    def current(self) -> tuple[str, bytes]:
        """The key id and key producers sign with now."""
        self.load()
        return self._current, self._keys[self._current]  # type: ignore[index,return-value]

    def sign(self, destination: str, body: bytes | str) -> str:
        key_id, key = self.current()
        return jobsig.sign(key_id, key, destination, body)


def _read(secret: str, deadline: float | None) -> str:
    from kindling.drivers import secrets

    return secrets.read(secret, deadline=deadline)


def boto3_fetch(session) -> Callable[[str, float | None], str]:
    """A ``fetch`` for producers that use boto3 (its credentials chain, its endpoint settings)."""
    def fetch(secret: str, deadline: float | None) -> str:
        return session.client("secretsmanager").get_secret_value(SecretId=secret)["SecretString"]

    return fetch


class Verifier:
    """The runner's check of each delivery's signature (``Runner(verifier=...)``)."""

    def __init__(self, keyring: Keyring):
        self.keyring = keyring

    def prepare(self, deadline: float | None = None) -> str | None:
        """Before a batch: the keys are at hand (``None``), or why not (the batch goes back)."""
        try:
            self.keyring.load(deadline)
        except Exception as exc:  # noqa: BLE001 - any failure to read the keys defers the batch
            return f"signing keys unavailable: {type(exc).__name__}: {exc}"[:500]
        return None

    def check(self, d: Delivery) -> str | None:
        """Why ``d`` is not validly signed for where it was read from, or ``None``."""
        if not d.source:
            return "signing is on, but the message's destination is unknown"
        keys = self.keyring._keys
        key_id = jobsig.key_id_of(d.signature)
        if key_id is not None and key_id not in keys:  # maybe rotated in since the last read
            self.keyring.load(force=True)
            keys = self.keyring._keys
        return jobsig.verify(keys, d.source, d.body, d.signature)


def from_env(environ=None) -> Verifier | None:
    """The worker's verifier when ``KINDLING_SIGNING_SECRET`` names a secret, else ``None``."""
    from kindling.shared import config

    secret = config.signing_secret(environ)
    return Verifier(Keyring(secret)) if secret else None
