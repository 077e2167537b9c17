"""Chains and groups: jobs that feed each other, and a callback after a group.

Example::

    from kindling import chain, group

    # fetch's result is add_tax's first argument, add_tax's is notify's.
    handle = chain(fetch.s("order-1"), add_tax.s(rate=0.2), notify.s()).delay()
    handle.result(timeout=60)            # notify's result (raises JobFailed if a step died)

    # A chord: total runs once, with [price("a"), price("b"), ...] in the order given.
    handle = group([price.s(k) for k in keys]).then(total.s(currency="EUR")).delay()
    handle.result(timeout=60)            # total's result; JobFailed if a member died

``task.s(*args, **kwargs)`` is a :class:`Signature` (a call not sent yet); ``a.s() | b.s()``
is ``chain(a.s(), b.s())``. Jobs go where task handles send theirs
(:mod:`kindling.producer.dispatch`: a Client from the environment, a Valkey producer, or eager mode).

The rules the worker applies (:mod:`kindling.engine.followups`):

* a chain step runs only after the one before it succeeded, with that result prepended to
  its positional arguments; a step that dies ends the chain;
* a group's members run in parallel; the callback runs once, after every member has
  succeeded, with their results as a list in the order of the group. A member that ends
  ``dead`` (or ``rejected``, or revoked) fails the chord: the callback never runs and the
  chord's record (``chord#<id>`` in the results table) says ``dead``, naming the member
  (until an operator revives that member: ``kindling jobs retry`` reopens the chord);
* every id is known when the canvas is sent: members are ``<chord id>.<index>``, the
  callback ``<chord id>.then``, each chain step :func:`kindling.core.envelope.next_id` of the
  one before. So a follow-up enqueued twice runs once.

Limits (envelope version 2): a chain holds at most 101 signatures, a chord id at most 100
characters, and a chain step or a callback is one task call (not itself a group).
"""

from __future__ import annotations

from kindling.core.envelope import MAX_CHAIN_LENGTH, check_chord_id, member_id, next_id
from kindling.producer import dispatch
from kindling.producer.handles import ChainHandle, GroupHandle  # where they live; imported from here too

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from kindling.core.registry import Registry, Task

__all__ = ["ChainHandle", "GroupHandle", "Signature", "chain", "chord", "group"]

MAX_CHAIN = MAX_CHAIN_LENGTH + 1  # the first job and the calls its envelope's chain holds
MAX_GROUP = 1000
"""Members of one group. The envelope takes up to 10,000, but the completing member collects
every result (a read per 100, a fetch per result kept in S3) within its batch's time."""


class Signature:
    """A task call not sent yet: ``task.s(*args, **kwargs)``. ``sig.set(timeout=30)`` adds
    per-job options; ``sig.delay()`` sends it as a plain job."""

    __slots__ = ("task", "args", "kwargs", "max_attempts", "timeout", "immutable")

    def __init__(self, task: Task | str, args: Iterable[Any] = (), kwargs: dict | None = None, *,
                 max_attempts: int | None = None, timeout: float | None = None, immutable: bool = False):
        from kindling.core.registry import Task

        if not isinstance(task, Task | str):
            raise TypeError(f"a signature needs a task or a task name, got {task!r:.80}")
        self.task, self.args, self.kwargs = task, list(args), dict(kwargs or {})
        self.max_attempts, self.timeout = max_attempts, timeout
        self.immutable = immutable  # task.si(): given no result before its arguments

    @property
    def name(self) -> str:
        return self.task if isinstance(self.task, str) else self.task.name

    def set(self, *, max_attempts: int | None = None, timeout: float | None = None) -> Signature:
        """A copy with these per-job options."""
        return Signature(self.task, self.args, self.kwargs,
                         max_attempts=self.max_attempts if max_attempts is None else max_attempts,
                         timeout=self.timeout if timeout is None else timeout, immutable=self.immutable)

    def call_object(self) -> dict:
        """The envelope's call object: ``{"task", "args", "kwargs"}`` and any options."""
        obj: dict = {"task": self.name, "args": self.args, "kwargs": self.kwargs}
        if self.max_attempts is not None:
            obj["max_attempts"] = self.max_attempts
        if self.timeout is not None:
            obj["timeout"] = self.timeout
        if self.immutable:
            obj["immutable"] = True
        return obj

    def delay(self):
        """Send this call as a plain job; return its handle."""
        _check_call(self)
        return dispatch.send(self._call(), _registry(self))

    def __or__(self, other: Signature | chain) -> chain:
        return chain(self, *(other.steps if isinstance(other, chain) else (other,)))

    def __repr__(self) -> str:
        return f"{self.name}.s(*{self.args!r}, **{self.kwargs!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Signature) and self.call_object() == other.call_object()

    def _call(self, **options):
        from kindling.core.envelope import Call

        return Call(self.task, self.args, self.kwargs, max_attempts=self.max_attempts, timeout=self.timeout,
                    **options)


def _check_call(sig: Signature, leading: int = 0) -> None:
    """``TypeError`` unless the call binds where it is sent (a task known by name only is
    checked by the worker)."""
    if not isinstance(sig.task, str):
        sig.task.check_call(sig.args, sig.kwargs, leading=(0 if sig.immutable else leading,))


class chain:
    """Signatures run one after another, each result the next one's first argument."""

    def __init__(self, *steps: Signature):
        if len(steps) == 1 and not isinstance(steps[0], Signature) and hasattr(steps[0], "__iter__"):
            steps = tuple(steps[0])  # type: ignore[arg-type]
        _check_signatures("chain", steps)
        if len(steps) > MAX_CHAIN:
            raise ValueError(f"a chain holds at most {MAX_CHAIN} signatures, got {len(steps)}")
        self.steps = tuple(steps)

    def __or__(self, other: Signature | chain) -> chain:
        return chain(*self.steps, *(other.steps if isinstance(other, chain) else (other,)))

    def apply_async(self, *, job_id: str | None = None, countdown: int = 0) -> ChainHandle:
        """Send the first step, carrying the rest; ``job_id`` names the first step's job,
        ``countdown`` holds it back (the later steps run as each one before them succeeds)."""
        for i, step in enumerate(self.steps):
            _check_call(step, leading=1 if i else 0)  # each step after the first gets a result first
        first, rest = self.steps[0], [s.call_object() for s in self.steps[1:]]
        handle = dispatch.send(first._call(job_id=job_id, chain=rest or None, delay=countdown), _registry(first))
        ids = [handle.id]
        for _ in rest:
            ids.append(next_id(ids[-1]))
        return ChainHandle(ids, dispatch.reader(), [s.name for s in self.steps])

    def delay(self) -> ChainHandle:
        return self.apply_async()

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.steps))


class group:
    """Signatures run in parallel; ``.then(sig)`` makes it a chord."""

    def __init__(self, members: Iterable[Signature]):
        members = tuple(members)
        _check_signatures("group", members, empty=True)  # Celery's empty group: results []
        for member in members:
            _check_recorded(member, "a group's member")
        if len(members) > MAX_GROUP:
            raise ValueError(f"a group holds at most {MAX_GROUP} signatures, got {len(members)}")
        self.members = members

    def then(self, callback: Signature) -> chord:
        """The chord: ``callback`` runs once every member has succeeded."""
        return chord(self, callback)

    def apply_async(self, *, group_id: str | None = None, countdown: int = 0) -> GroupHandle:
        return chord(self, None).apply_async(chord_id=group_id, countdown=countdown)

    def delay(self) -> GroupHandle:
        return self.apply_async()


class chord:
    """A group and the callback that runs once with all its results (``group(...).then(...)``)."""

    def __init__(self, members: group | Iterable[Signature], callback: Signature | None):
        self.group = members if isinstance(members, group) else group(members)
        if callback is not None and not isinstance(callback, Signature):
            raise TypeError(f"a chord's callback is a signature (task.s(...)), got {callback!r:.80}")
        if callback is not None:
            _check_recorded(callback, "a chord's callback")
        self.callback = callback

    def apply_async(self, *, chord_id: str | None = None, countdown: int = 0) -> GroupHandle:
        """Send every member in one go; ``chord_id`` (at most 100 characters) names the chord,
        its members (``<id>.<index>``) and its callback (``<id>.then``); ``countdown`` holds
        the members back. With no members the callback is sent at once, with ``[]`` (Celery's
        empty chord); an empty group sends nothing and its result is ``[]``."""
        from kindling.core.envelope import new_job_id

        cid = check_chord_id(chord_id if chord_id is not None else new_job_id())
        for member in self.group.members:
            _check_call(member)
        if self.callback is not None:
            _check_call(self.callback, leading=1)  # the members' results come first
        then = self.callback.call_object() if self.callback is not None else None
        members = self.group.members
        if not members:
            if self.callback is not None:
                from kindling.core.envelope import Call, callback_id

                cb = self.callback
                args = cb.args if cb.immutable else [[], *cb.args]
                dispatch.send(Call(cb.task, args, cb.kwargs, max_attempts=cb.max_attempts, timeout=cb.timeout,
                                   job_id=callback_id(cid), delay=countdown), _registry(cb))
            return GroupHandle(cid, 0, then is not None, dispatch.reader())
        calls = [s._call(job_id=member_id(cid, i), parent={"id": cid, "index": i, "size": len(members), "then": then},
                         delay=countdown)
                 for i, s in enumerate(members)]
        dispatch.send_many(calls, _registry(members[0]))
        return GroupHandle(cid, len(members), then is not None, dispatch.reader())

    def delay(self) -> GroupHandle:
        return self.apply_async()


def _check_signatures(kind: str, steps: tuple, *, empty: bool = False) -> None:
    if not steps and not empty:
        raise ValueError(f"a {kind} needs at least one signature")
    for s in steps:
        if not isinstance(s, Signature):
            raise TypeError(f"a {kind} takes signatures (task.s(...)), got {s!r:.80}")


def _check_recorded(sig: Signature, role: str) -> None:
    """A chord is built from records: its members' results are read from them, and its claim
    tells a sent callback by the callback's record. So neither may be declared to keep less
    than every outcome (the worker records them all whatever the deployment's policy)."""
    from kindling.core.policy import RESULTS_ALL

    results = None if isinstance(sig.task, str) else sig.task.results
    if results not in (None, RESULTS_ALL):
        raise ValueError(f"{role} must record its success, but task {sig.name!r} is declared results={results!r}: "
                         "a chord reads its members' results from their records and tells a sent callback by its "
                         "record (declare it results='all', or send it outside the chord)")


def _registry(sig: Signature) -> Registry:
    from kindling.core.registry import Task, default_registry

    return (sig.task.registry if isinstance(sig.task, Task) else None) or default_registry
