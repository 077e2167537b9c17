"""Periodic tasks: ``@task(schedule="rate(5 minutes)")`` or ``schedule="cron(0 12 * * ? *)"``.

One design for AWS and the local cloud: template.yaml has a single ``rate(1 minute)``
ticker rule (``PeriodicTasks=true``) that invokes the worker with ``{"kindling": "tick"}``;
the worker evaluates the schedules its code declares and enqueues what fell due in the
minute that just ended. Declaring a schedule in code is then the whole change: nothing in
the template drifts from it, and EventBridge Scheduler (which LocalStack stores but never
fires) is not needed. EventBridge rules fire at one-minute granularity, up to a minute
late or (on LocalStack) early, and a constant input carries no time, so the worker reads
its own clock.

Once per fire time: each fire's job id is derived from the task and the fire time
(``sched.<task>.<epoch ms>``). Every tick enqueues the fires of its minute and of the
minute before, so an early, late or lost tick loses nothing, and the second enqueue of a
fire is skipped by the batch's duplicate check (it runs twice only if the first run is
still going a minute later). Two ticks lost in a row skip those fires; they are not
caught up.

Expressions follow EventBridge: ``rate(N minute|minutes|hour|hours|day|days)`` fires on
multiples of N units since the epoch (UTC); ``cron(minutes hours day-of-month month
day-of-week year)`` with ``*``, ``?``, lists, ranges and ``/`` steps, months and weekdays
by number or name (weekdays 1-7 = SUN-SAT). ``L``, ``W`` and ``#`` are refused clearly.
"""

from __future__ import annotations

import time

from kindling.core.policy import ID_CHARS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Protocol, TypeVar

    class Scheduled(Protocol):
        """What a tick reads of a task (:class:`kindling.core.registry.Task`, whose registry
        imports this module when a task declares a schedule)."""

        @property
        def name(self) -> str: ...
        @property
        def schedule(self) -> Schedule | None: ...

    T = TypeVar("T", bound=Scheduled)

__all__ = ["Schedule", "due", "parse", "tick_job_id"]

MINUTE_MS = 60_000
_PLAIN_NAME_MAX = 100  # the room a job id has for a name beside "sched." and a fire time
_READABLE_PREFIX = 60  # of a folded name, beside its digest
_UNITS = {"minute": 1, "minutes": 1, "hour": 60, "hours": 60, "day": 1440, "days": 1440}
_MONTHS = {"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6, "JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10,
           "NOV": 11, "DEC": 12}
_DAYS = {"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}


class ScheduleError(ValueError):
    """A schedule expression kindling cannot read."""


class Schedule:
    """A parsed expression; :meth:`fires` lists its fire times in a window."""

    __slots__ = ("expression", "every_min", "fields")

    def __init__(self, expression: str, every_min: int | None, fields: tuple | None):
        self.expression, self.every_min, self.fields = expression, every_min, fields

    def fires(self, start_ms: int, end_ms: int) -> list[int]:
        """Fire times (epoch ms, whole minutes) in ``[start_ms, end_ms)``."""
        first = -(-start_ms // MINUTE_MS)
        last = -(-end_ms // MINUTE_MS)
        out = []
        for minute in range(first, last):
            if self._fires_at(minute):
                out.append(minute * MINUTE_MS)
        return out

    def _fires_at(self, minute: int) -> bool:
        if self.every_min is not None:
            return minute % self.every_min == 0
        minutes, hours, days, months, weekdays, years = self.fields  # type: ignore[misc]
        t = time.gmtime(minute * 60)
        if t.tm_min not in minutes or t.tm_hour not in hours or t.tm_mon not in months:
            return False
        if years is not None and t.tm_year not in years:
            return False
        weekday = (t.tm_wday + 1) % 7 + 1  # gmtime: Monday 0; EventBridge: Sunday 1
        # One of day-of-month and day-of-week is "?" in EventBridge: the other decides.
        return (days is None or t.tm_mday in days) and (weekdays is None or weekday in weekdays)

    def __repr__(self) -> str:
        return f"Schedule({self.expression!r})"


def parse(expression: str) -> Schedule:
    """Read ``rate(...)`` or ``cron(...)``; raises :class:`ScheduleError` with the reason."""
    text = expression.strip() if isinstance(expression, str) else ""
    if text.startswith("rate(") and text.endswith(")"):
        parts = text[5:-1].split()
        if len(parts) != 2 or not parts[0].isdigit() or parts[1] not in _UNITS or int(parts[0]) < 1:
            raise ScheduleError(f"{expression!r}: rate takes a positive whole number and minute(s), hour(s) or day(s)")
        return Schedule(text, int(parts[0]) * _UNITS[parts[1]], None)
    if text.startswith("cron(") and text.endswith(")"):
        parts = text[5:-1].split()
        if len(parts) != 6:
            raise ScheduleError(f"{expression!r}: cron takes six fields (minutes hours day-of-month month "
                                "day-of-week year)")
        minutes, hours, dom, month, dow, year = parts
        if (dom == "?") == (dow == "?"):
            raise ScheduleError(f"{expression!r}: exactly one of day-of-month and day-of-week must be '?'")
        fields = (_field(minutes, 0, 59, {}, expression), _field(hours, 0, 23, {}, expression),
                  None if dom == "?" else _field(dom, 1, 31, {}, expression),
                  _field(month, 1, 12, _MONTHS, expression),
                  None if dow == "?" else _field(dow, 1, 7, _DAYS, expression),
                  None if year == "*" else _field(year, 1970, 2199, {}, expression))
        return Schedule(text, None, fields)
    raise ScheduleError(f"{expression!r}: a schedule is rate(...) or cron(...)")


def _field(text: str, low: int, high: int, names: dict[str, int], expression: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        span, _, step_text = part.partition("/")
        if any(c in span for c in "LW#"):
            raise ScheduleError(f"{expression!r}: L, W and # are not supported")
        if span in ("*", "?"):
            start, end = low, high
        elif "-" in span:
            a, _, b = span.partition("-")
            start, end = _value(a, names, expression), _value(b, names, expression)
        else:
            start = _value(span, names, expression)
            end = high if step_text else start
        step = int(step_text) if step_text.isdigit() and int(step_text) > 0 else None
        if step_text and step is None:
            raise ScheduleError(f"{expression!r}: bad step {step_text!r}")
        if not low <= start <= end <= high:
            raise ScheduleError(f"{expression!r}: {part!r} is outside {low}-{high}")
        values.update(range(start, end + 1, step or 1))
    return frozenset(values)


def _value(text: str, names: dict[str, int], expression: str) -> int:
    if text.upper() in names:
        return names[text.upper()]
    if not text.isdigit():
        raise ScheduleError(f"{expression!r}: {text!r} is not a number or a name")
    return int(text)


def tick_job_id(task: str, fire_ms: int) -> str:
    """The job id of one fire: the same for every tick that sees it, and different for every
    other task name (a collision would make one schedule's fire a duplicate of another's).

    A name made only of job-id characters is kept as it is (``sched.<name>.<ms>``, the
    ms has no dot, so the name can be read back). Any other name (folded characters, or too
    long) becomes ``sched:<readable prefix>.<sha-256 of the name>.<ms>``: the ``sched:`` start
    keeps the two forms apart, and the digest keeps folded names apart."""
    if len(task) <= _PLAIN_NAME_MAX and all(c in ID_CHARS for c in task):
        return f"sched.{task}.{fire_ms}"
    from kindling.core.digest import sha256_hex  # only names that need folding pay for it

    readable = "".join(c if c in ID_CHARS else "_" for c in task[:_READABLE_PREFIX])
    digest = sha256_hex(task)[:32]
    return f"sched:{readable}.{digest}.{fire_ms}"


def due(registry: Iterable[T], now_ms: int) -> list[tuple[T, int]]:
    """The (task, fire time) pairs of this minute and the one before: every fire is seen by
    two ticks, so one tick early, late or missing loses nothing (the job id dedupes)."""
    minute_start = now_ms - now_ms % MINUTE_MS
    pairs = []
    for t in _scheduled(registry):
        for fire in t.schedule.fires(minute_start - MINUTE_MS, minute_start + 1):  # type: ignore[union-attr]
            pairs.append((t, fire))
    return pairs


def _scheduled(registry: Iterable[T]) -> Iterable[T]:
    return [t for t in registry if t.schedule is not None]
