# Types for checkers only: registry.py stays free of typing at run time (the worker's cold path).
from collections.abc import Callable, Coroutine, Iterable, Iterator
from datetime import datetime
from typing import Any, Generic, ParamSpec, Protocol, TypeVar, overload

from kindling.core.policy import Backoff
from kindling.core.ratelimit import RateLimit
from kindling.producer.canvas import Signature

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
R_co = TypeVar("R_co", covariant=True)
M = TypeVar("M")

# A hook: called with the job's context (kindling.core.batch.JobContext) and the error, if any.
Hook = Callable[[Any, BaseException | None], object]
H = TypeVar("H", bound=Hook)

# What delay() and its kin return (a kindling.producer.handles.JobHandle, or a producer's own):
# result() gives what the task's function returns (an async task's: what its coroutine returns).
class Handle(Protocol[R_co]):
    @property
    def id(self) -> str: ...
    @property
    def task(self) -> str: ...
    def status(self) -> str | None: ...
    @overload
    def result(self, timeout: float = ..., *, model: None = ...) -> R_co: ...
    @overload
    def result(self, timeout: float = ..., *, model: type[M]) -> M: ...
    @overload
    def result(self, timeout: float = ..., *, model: Any) -> Any: ...

class Task(Generic[P, R]):  # noqa: UP046 - one P and R shared with the decorator overloads below
    name: str
    fn: Callable[P, R]
    is_async: bool
    timeout: float | None
    max_attempts: int | None
    skip_succeeded: bool
    retry_on: tuple[type[BaseException], ...] | None
    no_retry_on: tuple[type[BaseException], ...]
    backoff: Backoff | None
    redact: bool
    queue: str | None
    on_success: Hook | None
    on_failure: Hook | None
    on_dead: Hook | None
    results: str | None
    pydantic: bool
    rate_limit: RateLimit | None
    registry: Registry | None
    def __init__(
        self,
        fn: Callable[P, R],
        *,
        name: str | None = ...,
        timeout: float | None = ...,
        max_attempts: int | None = ...,
        skip_succeeded: bool = ...,
        retry_on: type[BaseException] | tuple[type[BaseException], ...] | None = ...,
        no_retry_on: type[BaseException] | tuple[type[BaseException], ...] = ...,
        backoff: Backoff | None = ...,
        schedule: str | None = ...,
        redact: bool = ...,
        queue: str | None = ...,
        on_success: Hook | None = ...,
        on_failure: Hook | None = ...,
        on_dead: Hook | None = ...,
        results: str | None = ...,
        ignore_result: bool | None = ...,
        pydantic: bool = ...,
        rate_limit: str | int | None = ...,
    ) -> None: ...
    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...
    # An async task's R is the coroutine its function returns: its handles give what that
    # returns (overloads on self: the first matches async tasks, the second every task).
    @overload
    def delay(self: Task[P, Coroutine[Any, Any, T]], *args: P.args, **kwargs: P.kwargs) -> Handle[T]: ...
    @overload
    def delay(self, *args: P.args, **kwargs: P.kwargs) -> Handle[R]: ...
    @overload
    async def adelay(self: Task[P, Coroutine[Any, Any, T]], *args: P.args, **kwargs: P.kwargs) -> Handle[T]: ...
    @overload
    async def adelay(self, *args: P.args, **kwargs: P.kwargs) -> Handle[R]: ...
    @overload
    async def aapply_async(
        self: Task[P, Coroutine[Any, Any, T]],
        args: Iterable[Any] = ...,
        kwargs: dict[str, Any] | None = ...,
        *,
        countdown: int = ...,
        job_id: str | None = ...,
        max_attempts: int | None = ...,
        timeout: float | None = ...,
        queue: str | None = ...,
    ) -> Handle[T]: ...
    @overload
    async def aapply_async(
        self,
        args: Iterable[Any] = ...,
        kwargs: dict[str, Any] | None = ...,
        *,
        countdown: int = ...,
        job_id: str | None = ...,
        max_attempts: int | None = ...,
        timeout: float | None = ...,
        queue: str | None = ...,
    ) -> Handle[R]: ...
    def s(self, *args: P.args, **kwargs: P.kwargs) -> Signature: ...
    def si(self, *args: P.args, **kwargs: P.kwargs) -> Signature: ...
    @overload
    def apply_async(
        self: Task[P, Coroutine[Any, Any, T]],
        args: Iterable[Any] = ...,
        kwargs: dict[str, Any] | None = ...,
        *,
        countdown: int = ...,
        job_id: str | None = ...,
        max_attempts: int | None = ...,
        timeout: float | None = ...,
        queue: str | None = ...,
        eta: datetime | None = ...,
    ) -> Handle[T]: ...
    @overload
    def apply_async(
        self,
        args: Iterable[Any] = ...,
        kwargs: dict[str, Any] | None = ...,
        *,
        countdown: int = ...,
        job_id: str | None = ...,
        max_attempts: int | None = ...,
        timeout: float | None = ...,
        queue: str | None = ...,
        eta: datetime | None = ...,
    ) -> Handle[R]: ...
    def check_arguments(self, args: list[Any], kwargs: dict[str, Any]) -> None: ...
    def check_call(self, args: list[Any] | tuple[Any, ...], kwargs: dict[str, Any], *,
                   leading: tuple[int, ...] = ...) -> None: ...

class Registry:
    hooks: dict[str, list[Hook]]
    hooked: bool
    def __init__(self) -> None: ...
    def on_success(self, fn: H) -> H: ...
    def on_failure(self, fn: H) -> H: ...
    def on_dead(self, fn: H) -> H: ...
    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...
    @overload
    def task(
        self,
        *,
        name: str | None = ...,
        timeout: float | None = ...,
        max_attempts: int | None = ...,
        skip_succeeded: bool = ...,
        retry_on: type[BaseException] | tuple[type[BaseException], ...] | None = ...,
        no_retry_on: type[BaseException] | tuple[type[BaseException], ...] = ...,
        backoff: Backoff | None = ...,
        schedule: str | None = ...,
        redact: bool = ...,
        queue: str | None = ...,
        on_success: Hook | None = ...,
        on_failure: Hook | None = ...,
        on_dead: Hook | None = ...,
        results: str | None = ...,
        ignore_result: bool | None = ...,
        pydantic: bool = ...,
        rate_limit: str | int | None = ...,
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...
    def get(self, name: str) -> Task[..., Any]: ...
    def find(self, name: str) -> Task[..., Any] | None: ...
    def __contains__(self, name: object) -> bool: ...
    def __iter__(self) -> Iterator[Task[..., Any]]: ...
    def __len__(self) -> int: ...

default_registry: Registry

def on_success(fn: H) -> H: ...  # noqa: UP047
def on_failure(fn: H) -> H: ...  # noqa: UP047
def on_dead(fn: H) -> H: ...  # noqa: UP047

@overload
def task(fn: Callable[P, R], /) -> Task[P, R]: ...  # noqa: UP047 - as Registry.task, whose factory form needs module-level P
@overload
def task(
    *,
    name: str | None = ...,
    timeout: float | None = ...,
    max_attempts: int | None = ...,
    skip_succeeded: bool = ...,
    retry_on: type[BaseException] | tuple[type[BaseException], ...] | None = ...,
    no_retry_on: type[BaseException] | tuple[type[BaseException], ...] = ...,
    backoff: Backoff | None = ...,
    schedule: str | None = ...,
    redact: bool = ...,
    queue: str | None = ...,
    on_success: Hook | None = ...,
    on_failure: Hook | None = ...,
    on_dead: Hook | None = ...,
    results: str | None = ...,
    ignore_result: bool | None = ...,
    pydantic: bool = ...,
    rate_limit: str | int | None = ...,
) -> Callable[[Callable[P, R]], Task[P, R]]: ...
