"""Temporary credentials as values: when they expire, and when to fetch them again.

Pure: no I/O, no imports beyond the C core, so every source (container endpoint, web
identity, instance metadata, credential_process) shares one rule.
"""

# botocore's RefreshableCredentials: from 15 minutes before expiry a refresh is tried and
# the old credentials kept if it fails; from 10 minutes, a refresh must succeed.
ADVISORY_REFRESH = 15 * 60.0
MANDATORY_REFRESH = 10 * 60.0


class Credentials:
    """One set of credentials, where they came from, and when they expire (epoch seconds, None
    for keys that do not). ``live``: the source caches and refreshes them itself (the
    container endpoint, botocore), so it is asked again on every call; ``fetch``: how the
    chain gets them again."""

    __slots__ = ("access_key", "secret_key", "token", "expires_at", "source", "live", "fetch")

    def __init__(self, access_key: str, secret_key: str, token: str | None = None, *,
                 expires_at: float | None = None, source: str = "", live: bool = False) -> None:
        self.access_key, self.secret_key, self.token = access_key, secret_key, token or None
        self.expires_at, self.source, self.live = expires_at, source, live
        self.fetch = None

    def as_tuple(self) -> tuple[str, str, str | None]:
        return self.access_key, self.secret_key, self.token

    def __repr__(self) -> str:  # never the keys
        return f"Credentials(source={self.source!r}, expires_at={self.expires_at!r})"


def refresh_due(expires_at: float | None, now: float, *, advisory: float = ADVISORY_REFRESH,
                mandatory: float = MANDATORY_REFRESH) -> str:
    """"fresh", "advisory" (refresh, keeping these if that fails) or "mandatory" (they must be
    replaced) for credentials expiring at ``expires_at`` (None: never), at time ``now``."""
    if expires_at is None:
        return "fresh"
    left = expires_at - now
    if left <= mandatory:
        return "mandatory"
    if left <= advisory:
        return "advisory"
    return "fresh"


def parse_utc(stamp: str) -> float:
    """Seconds since the epoch for "YYYY-MM-DDTHH:MM:SS[.fff]Z" (UTC), without importing
    _strptime/calendar/datetime: on SnapStart functions this runs on every cold start."""
    year, month, day = int(stamp[0:4]), int(stamp[5:7]), int(stamp[8:10])
    hour, minute, second = int(stamp[11:13]), int(stamp[14:16]), int(stamp[17:19])
    # days_from_civil (H. Hinnant): days since 1970-01-01 in the proleptic Gregorian calendar
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    days = era * 146097 + day_of_era - 719468
    return days * 86400.0 + hour * 3600 + minute * 60 + second
