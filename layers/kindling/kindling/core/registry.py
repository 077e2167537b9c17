"""Task registration: ``@task`` turns a function into a named, runnable :class:`Task`.

Example::

    from kindling import task

    @task
    def resize(key: str, width: int = 256) -> str: ...

    @task(name="emails.send", timeout=30, max_attempts=5)
    async def send_email(to: str, body: str) -> None: ...

A decorated function stays callable as before (``resize("a.png")`` runs it inline); the
worker looks it up by name when a job for it arrives. Its handle sends jobs, named as
Celery names them (:mod:`kindling.producer.dispatch` says where they go, or runs them eagerly)::

    resize.delay("a.png", width=64)                       # -> a handle: .status(), .result()
    resize.apply_async(["a.png"], {"width": 64}, countdown=60, job_id="a-png")
    chain(fetch.s("a.png"), resize.s(width=64)).delay()     # kindling.producer.canvas

The type of ``delay`` follows the function's signature (``registry.pyi``, read by type
checkers only: the worker never imports :mod:`typing`).
"""

from __future__ import annotations

import sys

from kindling.core.errors import InvalidJob, TaskDefinitionError
from kindling.core.policy import MAX_ATTEMPTS, MAX_TASK_LENGTH, MAX_TIMEOUT_S

TYPE_CHECKING = False  # importing typing would cost the cold path a few milliseconds
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

_OPTIONS = ("name", "timeout", "max_attempts", "skip_succeeded", "retry_on", "no_retry_on", "backoff", "schedule",
            "redact", "queue", "on_success", "on_failure", "on_dead", "results", "ignore_result", "pydantic",
            "rate_limit")
HOOKS = ("on_success", "on_failure", "on_dead")


class Task:
    """A registered task: the function plus the options the runner reads.

    Attributes:
        name: the name jobs use to refer to it (default: ``module.qualname``).
        fn: the function itself.
        is_async: whether ``fn`` is a coroutine function (runs on the event loop).
        timeout: seconds one run may take; ``None`` means the worker's default.
        max_attempts: deliveries before the job is recorded ``dead``; ``None`` means the
            queue's setting (SQS: the redrive policy's maxReceiveCount).
        skip_succeeded: when ``True`` (the default), a duplicate delivery of a job already
            recorded ``succeeded`` is acknowledged without running the task again.
        retry_on: if given, only these exception types are retried; any other failure
            records the job ``dead`` at once.
        no_retry_on: exception types never retried (the job is ``dead`` at once).
        backoff: a :class:`kindling.core.policy.Backoff` for this task's retry delays.
        schedule: ``rate(...)`` or ``cron(...)``: run it periodically, with no arguments
            (:mod:`kindling.core.schedules`).
        redact: for tasks that handle personal data: its result, error messages and
            message bodies never reach a record or a log line (a SHA-256 and a size only).
        queue: the named queue its jobs go to unless a send names another
            (:mod:`kindling.core.routing`); ``None`` means the default queue.
        on_success, on_failure, on_dead: hooks called ``hook(job, error)`` once its
            outcome is recorded (:mod:`kindling.engine.hooks`), before the registry's own.
        results: which outcomes get a record (:data:`kindling.core.policy.RESULTS_POLICIES`):
            ``"all"``, ``"failures"`` (no record for a success) or ``"none"`` (only ``dead``
            and ``rejected``); ``None`` means the deployment's (``KINDLING_RESULTS_POLICY``).
            Anything but ``"all"`` skips the duplicate check. Celery's ``ignore_result=True``
            is taken as ``results="none"`` (and ``False`` as ``"all"``).
        rate_limit: ``"100/m"``, ``"10/s"``, ``"5/h"``: runs started per period across every
            worker; jobs over it are handed back unrun (:mod:`kindling.core.ratelimit`).
        pydantic: validate arguments annotated with pydantic models even if no module has
            loaded pydantic yet (Celery's option; otherwise found by itself:
            :mod:`kindling.core.models`).
    """

    __slots__ = ("name", "fn", "is_async", "timeout", "max_attempts", "skip_succeeded", "registry", "retry_on",
                 "no_retry_on", "backoff", "schedule", "redact", "queue", "on_success", "on_failure", "on_dead",
                 "results", "pydantic", "_models", "rate_limit")

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        timeout: float | None = None,
        max_attempts: int | None = None,
        skip_succeeded: bool = True,
        retry_on: tuple | None = None,
        no_retry_on: tuple = (),
        backoff=None,
        schedule: str | None = None,
        redact: bool = False,
        queue: str | None = None,
        on_success: Callable[..., Any] | None = None,
        on_failure: Callable[..., Any] | None = None,
        on_dead: Callable[..., Any] | None = None,
        results: str | None = None,
        ignore_result: bool | None = None,
        pydantic: bool = False,
        rate_limit: str | None = None,
    ):
        if not callable(fn):
            raise TaskDefinitionError(f"@task needs a function, got {fn!r}")
        if name is not None and (not isinstance(name, str) or not 0 < len(name) <= MAX_TASK_LENGTH):
            raise TaskDefinitionError(f"task name must be a string of 1-{MAX_TASK_LENGTH} characters, got {name!r:.80}")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_TIMEOUT_S
        ):
            raise TaskDefinitionError(
                f"timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}, got {timeout!r}")
        if max_attempts is not None and (
            isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or not 1 <= max_attempts <= MAX_ATTEMPTS
        ):
            raise TaskDefinitionError(f"max_attempts must be an integer from 1 to {MAX_ATTEMPTS}, got {max_attempts!r}")
        if not isinstance(skip_succeeded, bool):
            raise TaskDefinitionError(f"skip_succeeded must be True or False, got {skip_succeeded!r}")
        if not isinstance(pydantic, bool):
            raise TaskDefinitionError(f"pydantic must be True or False, got {pydantic!r}")
        if not isinstance(redact, bool):
            raise TaskDefinitionError(f"redact must be True or False, got {redact!r}")
        if queue is not None:
            from kindling.core.routing import check_name  # only modules that route

            if check_name(queue):
                raise TaskDefinitionError(f"queue: {check_name(queue)}")
        for option, hook in (("on_success", on_success), ("on_failure", on_failure), ("on_dead", on_dead)):
            if hook is not None and not callable(hook):
                raise TaskDefinitionError(f"{option} must be a function of (job, error), got {hook!r:.80}")
        results = _results_option(results, ignore_result)
        retry_on = _exception_types("retry_on", retry_on) if retry_on is not None else None
        no_retry_on = _exception_types("no_retry_on", no_retry_on)
        if backoff is not None and type(backoff).__name__ != "Backoff":
            raise TaskDefinitionError(f"backoff must be a kindling.core.policy.Backoff, got {backoff!r}")
        parsed = None
        if schedule is not None:
            from kindling.core.schedules import ScheduleError, parse  # only modules that declare one

            try:
                parsed = parse(schedule)
            except ScheduleError as exc:
                raise TaskDefinitionError(f"schedule {exc}") from None
        self.fn = fn
        self.name = name or f"{fn.__module__}.{fn.__qualname__}"
        if len(self.name) > MAX_TASK_LENGTH:
            raise TaskDefinitionError(f"task name {self.name[:80]!r}... is longer than {MAX_TASK_LENGTH} characters")
        # CO_COROUTINE (0x80) on the code object: avoids importing inspect/asyncio here.
        code = getattr(fn, "__code__", None)
        self.is_async = bool(code is not None and code.co_flags & 0x80)
        self.timeout = float(timeout) if timeout is not None else None
        self.max_attempts = max_attempts
        self.skip_succeeded = skip_succeeded
        self.retry_on = retry_on
        self.no_retry_on = no_retry_on
        self.backoff = backoff
        self.schedule = parsed
        self.redact = redact
        self.queue = queue
        self.on_success, self.on_failure, self.on_dead = on_success, on_failure, on_dead
        self.results = results
        self.pydantic = pydantic
        self.rate_limit = None
        if rate_limit is not None:
            from kindling.core.ratelimit import parse  # only modules with a rate-limited task

            self.rate_limit = parse(rate_limit)
        self._models: object = _UNRESOLVED  # kindling.core.models.Params or None, found at the first job
        self.registry: Registry | None = None  # set when registered
        if parsed is not None and _binding_problem(fn, [], {}):
            raise TaskDefinitionError(f"scheduled task {self.name!r} must run with no arguments: "
                                      f"{_binding_problem(fn, [], {})}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the function inline, as Celery does, with a job context of its own for
        :func:`kindling.current_job` (``id`` ``None``, first attempt: Celery's ``self.request``
        on a direct call). Nothing is recorded."""
        if self.is_async:
            return _direct_async(self, args, kwargs)
        from kindling.core.batch import reset_current_job, set_current_job

        token = set_current_job(self._direct_context())
        try:
            return self.fn(*args, **kwargs)
        finally:
            reset_current_job(token)

    def _direct_context(self):
        from kindling.core.batch import JobContext
        from kindling.core.policy import DEFAULT_MAX_ATTEMPTS

        return JobContext(None, self.name, 1, self.max_attempts or DEFAULT_MAX_ATTEMPTS, None)

    def delay(self, *args: Any, **kwargs: Any):
        """Send a job running this task with these arguments; return its handle."""
        return self.apply_async(args, kwargs)

    async def adelay(self, *args: Any, **kwargs: Any):
        """``await`` form of :meth:`delay`: concurrent awaits share the producer's batches
        (:mod:`kindling.producer.coalesce`); returns once this job was accepted by the queue."""
        return await self.aapply_async(args, kwargs)

    async def aapply_async(self, args=(), kwargs=None, *, countdown: int = 0, job_id: str | None = None,
                           max_attempts: int | None = None, timeout: float | None = None, queue: str | None = None):
        """``await`` form of :meth:`apply_async` (see :meth:`adelay`)."""
        from kindling.core.envelope import Call
        from kindling.producer import dispatch

        args, kwargs = list(args), dict(kwargs or {})
        self.check_call(args, kwargs)
        call = Call(self, args, kwargs, delay=countdown, job_id=job_id,
                    max_attempts=max_attempts, timeout=timeout, queue=queue)
        return await dispatch.asend(call)

    def s(self, *args: Any, **kwargs: Any):
        """A signature of this call, for chains and groups (:mod:`kindling.producer.canvas`).

        Raises ``TypeError`` for arguments that bind neither alone nor after the one value
        a chain step or a chord's callback gets first; the canvas checks the position it
        is sent in."""
        from kindling.producer.canvas import Signature

        self.check_call(args, kwargs, leading=(0, 1))
        return Signature(self, args, kwargs)

    def si(self, *args: Any, **kwargs: Any):
        """An immutable signature (Celery's ``.si()``): in a chain or as a chord's callback it
        runs with these arguments only, never the previous result or the members' results."""
        from kindling.producer.canvas import Signature

        self.check_call(args, kwargs)
        return Signature(self, args, kwargs, immutable=True)

    def apply_async(self, args=(), kwargs=None, *, countdown: int = 0, job_id: str | None = None,
                    max_attempts: int | None = None, timeout: float | None = None, queue: str | None = None,
                    eta=None):
        """Send a job with options: ``countdown`` seconds before it may run (or ``eta``, an
        aware ``datetime`` it may run from: Celery's), a ``job_id`` of your own (a second
        send of the same id runs once), attempts and time limit, and a named ``queue`` over
        the task's own."""
        if eta is not None:
            if countdown:
                raise ValueError("give countdown or eta, not both")
            from datetime import UTC, datetime  # only sends with an eta

            if eta.tzinfo is None:  # naive: UTC, as Celery's default timezone reads it
                eta = eta.replace(tzinfo=UTC)
            # Whole seconds, rounded up: a job never runs before its eta.
            countdown = max(0, -int(-(eta - datetime.now(UTC)).total_seconds() // 1))
        from kindling.core.envelope import Call
        from kindling.producer import dispatch

        args, kwargs = list(args), dict(kwargs or {})
        self.check_call(args, kwargs)  # here, like Celery, not as a worker's "rejected" later
        call = Call(self, args, kwargs, delay=countdown, job_id=job_id,
                    max_attempts=max_attempts, timeout=timeout, queue=queue)
        return dispatch.send(call, self.registry or default_registry)

    def __repr__(self) -> str:
        return f"<Task {self.name}>"

    def check_arguments(self, args: list, kwargs: dict) -> None:
        """Raise :class:`InvalidJob` unless ``fn(*args, **kwargs)`` would bind (the worker's
        check, before a run; the job is recorded ``rejected``). Arguments annotated with a
        pydantic model are validated into it here, in place (:mod:`kindling.core.models`)."""
        problem = _binding_problem(self.fn, args, kwargs)
        if problem:
            raise InvalidJob(f"bad arguments for task {self.name!r}: {problem}", task=self.name)
        models = self._models
        if models is _UNRESOLVED:
            # No model can be annotated where no module loaded pydantic: plain workers skip it.
            models = None
            if self.pydantic or "pydantic" in sys.modules:
                from kindling.core.models import params

                models = params(self.fn)
            self._models = models
        if models is not None:
            from kindling.core.models import validate

            validate(self.name, models, args, kwargs)  # type: ignore[arg-type]

    def check_call(self, args: list | tuple, kwargs: dict, *, leading: tuple[int, ...] = (0,)) -> None:
        """Raise ``TypeError`` unless ``fn(*args, **kwargs)`` would bind: the sender's check,
        by the worker's rule (:meth:`check_arguments`), so a call is refused where it is made.

        ``leading``: how many values the worker may put before ``args`` (a chain step gets
        the previous result first, a chord's callback the members' results); the call must
        bind for one of them."""
        problems = [_binding_problem(self.fn, [None] * n + list(args), kwargs) for n in leading]
        if all(problems):
            first = "" if leading[0] == 0 else " (counting the result the call gets first)"
            raise TypeError(f"bad arguments for task {self.name!r}: {problems[0]}{first}")


def _results_option(results: str | None, ignore_result: bool | None) -> str | None:
    """``results=``, or Celery's ``ignore_result`` as its alias; ``None``: the deployment's."""
    from kindling.core.policy import RESULTS_ALL, RESULTS_NONE, check_results

    if ignore_result is not None:
        if not isinstance(ignore_result, bool):
            raise TaskDefinitionError(f"ignore_result must be True or False, got {ignore_result!r}")
        alias = RESULTS_NONE if ignore_result else RESULTS_ALL
        if results is not None and results != alias:
            raise TaskDefinitionError(f"ignore_result={ignore_result} means results={alias!r}; "
                                      f"it contradicts results={results!r}")
        return alias
    if results is None:
        return None
    try:
        return check_results(results)
    except ValueError as exc:
        raise TaskDefinitionError(str(exc)) from None
_UNRESOLVED = object()


async def _direct_async(task: Task, args: tuple, kwargs: dict) -> Any:
    from kindling.core.batch import reset_current_job, set_current_job

    token = set_current_job(task._direct_context())
    try:
        return await task.fn(*args, **kwargs)
    finally:
        reset_current_job(token)


def _exception_types(option: str, value) -> tuple:
    types = value if isinstance(value, tuple) else (value,)
    if not all(isinstance(t, type) and issubclass(t, BaseException) for t in types):
        raise TaskDefinitionError(f"{option} takes exception classes, got {value!r}")
    return types


def _binding_problem(fn: Callable[..., Any], args: list, kwargs: dict) -> str | None:
    """Why ``fn(*args, **kwargs)`` would not bind, or ``None`` if it would.

    Reads the code object of a plain function, as ``inspect.Signature.bind`` would, so the
    first job does not pay ~7 ms to import inspect. Other callables go through inspect.
    """
    func = getattr(fn, "__func__", None)
    if func is not None and hasattr(func, "__code__"):  # a bound method: self is bound already
        fn, args = func, [fn.__self__, *args]  # type: ignore[attr-defined]
    code = getattr(fn, "__code__", None)
    if code is None or not hasattr(fn, "__defaults__"):
        import inspect

        try:
            inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as exc:
            return str(exc)
        except ValueError:  # no signature to read: let the call decide
            pass
        return None
    n_pos, n_posonly, n_kwonly = code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount
    names = code.co_varnames
    positional, kwonly = names[:n_pos], names[n_pos : n_pos + n_kwonly]
    var_args, var_kwargs = code.co_flags & 0x04, code.co_flags & 0x08
    if len(args) > n_pos and not var_args:
        return f"takes {n_pos} positional argument(s) but {len(args)} were given"
    bound = set(positional[: len(args)])
    for key in kwargs:
        if key in kwonly or key in positional[n_posonly:]:
            if key in bound:
                return f"multiple values for argument {key!r}"
            bound.add(key)
        elif key in positional:  # positional-only, named as a keyword
            if not var_kwargs:
                return f"positional-only argument {key!r} passed as a keyword"
        elif not var_kwargs:
            return f"unexpected keyword argument {key!r}"
    n_defaults = len(fn.__defaults__ or ())
    kwdefaults = fn.__kwdefaults__ or {}
    required = [*positional[: n_pos - n_defaults], *(k for k in kwonly if k not in kwdefaults)]
    missing = [name for name in required if name not in bound]
    if missing:
        return f"missing required argument(s): {', '.join(map(repr, missing))}"
    return None


class Registry:
    """Tasks by name. Most programs use the module-level default through :func:`task`."""

    def __init__(self) -> None:
        self._tasks: dict[str, Task] = {}
        self.hooks: dict[str, list[Callable[..., Any]]] = {name: [] for name in HOOKS}
        # Whether any hook is set: the runner loads kindling.engine.hooks only then.
        self.hooked = False

    def task(self, fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        """Register ``fn`` as a task; usable as ``@task`` or ``@task(name=..., timeout=...)``."""
        unknown = sorted(set(options) - set(_OPTIONS))
        if unknown:
            raise TaskDefinitionError(
                f"unknown task option(s) {', '.join(unknown)}; valid: {', '.join(_OPTIONS)}"
            )

        def register(f: Callable[..., Any]) -> Task:
            t = f if isinstance(f, Task) else Task(f, **options)
            existing = self._tasks.get(t.name)
            if existing is not None and existing.fn is not t.fn:
                raise TaskDefinitionError(f"a different task is already registered as {t.name!r}")
            self._tasks[t.name] = t
            if t.on_success or t.on_failure or t.on_dead:
                self.hooked = True
            if t.registry is None:
                t.registry = self
            return t

        return register(fn) if fn is not None else register

    def on_success(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Call ``fn(job, None)`` for every job of this registry's tasks recorded ``succeeded``
        (:mod:`kindling.engine.hooks`); usable as a decorator."""
        return self._hook("on_success", fn)

    def on_failure(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Call ``fn(job, error)`` for every run that raised, retried or not."""
        return self._hook("on_failure", fn)

    def on_dead(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Call ``fn(job, error)`` once a job is recorded ``dead`` (``error``: ``None`` when it
        died unrun, out of deliveries)."""
        return self._hook("on_dead", fn)

    def _hook(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fn):
            raise TaskDefinitionError(f"{name} takes a function of (job, error), got {fn!r:.80}")
        self.hooks[name].append(fn)
        self.hooked = True
        return fn

    def get(self, name: str) -> Task:
        """Return the task called ``name``, or raise :class:`InvalidJob` (unknown task)."""
        try:
            return self._tasks[name]
        except KeyError:
            raise InvalidJob(f"unknown task {name!r}", task=name) from None

    def find(self, name: str) -> Task | None:
        """The task called ``name``, or ``None`` if this registry has none."""
        return self._tasks.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tasks

    def __iter__(self) -> Iterator[Task]:
        """The tasks, in the order they were registered."""
        return iter(list(self._tasks.values()))  # a copy: registering while iterating is allowed

    def __len__(self) -> int:
        return len(self._tasks)


default_registry = Registry()
task = default_registry.task
on_success = default_registry.on_success
on_failure = default_registry.on_failure
on_dead = default_registry.on_dead
