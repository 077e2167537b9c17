"""Pydantic models as a task's arguments and result (Celery's ``pydantic=True``, built in).

A parameter annotated with a model (or a type that holds one: ``Order | None``,
``list[Order]``) receives a validated instance: the worker validates what the job carries
(the model's JSON, or a dict from a producer without the model) before the run, and a
value that does not validate makes the job ``rejected`` at admission, never run and never
retried, as any argument that does not fit its task is. Parameters without a model are
passed as they arrive. Sending a model writes its JSON, and a returned model is recorded
as its JSON (:mod:`kindling.core.codec`); :func:`as_model` reads a result back as a model
(``handle.result(model=Receipt)``).

Only a task whose module loaded pydantic (or that asks with ``pydantic=True``) gets here:
:meth:`kindling.core.registry.Task.check_arguments` imports this module once pydantic is in
``sys.modules``, so a worker of plain tasks imports neither.
"""

from __future__ import annotations

from kindling.core.errors import InvalidJob

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["Params", "params", "validate", "as_model"]


class Params:
    """The parameters of one function whose annotations hold a model: by position (the
    positional parameters) and by name, each with its pydantic ``TypeAdapter``."""

    __slots__ = ("positional", "by_name")

    def __init__(self, positional: tuple[str, ...], by_name: dict[str, Any]):
        self.positional, self.by_name = positional, by_name


def params(fn: Callable[..., Any]) -> Params | None:
    """The model parameters of ``fn``, or ``None`` when it has none.

    Annotations are resolved as ``typing.get_type_hints`` resolves them (strings under
    ``from __future__ import annotations`` included), at the first job, when every name they
    use is defined."""
    import typing

    from pydantic import TypeAdapter

    target = getattr(fn, "__func__", fn)
    code = getattr(target, "__code__", None)
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # noqa: BLE001 - a name only a type checker sees: no model to validate against
        return None
    by_name = {name: TypeAdapter(hint) for name, hint in hints.items() if name != "return" and _holds_model(hint)}
    if not by_name:
        return None
    positional = code.co_varnames[: code.co_argcount] if code is not None else ()
    if positional and getattr(fn, "__self__", None) is not None:  # a bound method: self is not sent
        positional = positional[1:]
    return Params(tuple(positional), by_name)


def _holds_model(hint: object, depth: int = 0) -> bool:
    import typing

    from pydantic import BaseModel

    if isinstance(hint, type) and issubclass(hint, BaseModel):
        return True
    return depth < 8 and any(_holds_model(arg, depth + 1) for arg in typing.get_args(hint))


def validate(task: str, found: Params, args: list, kwargs: dict) -> None:
    """Validate the model arguments of a job for ``task`` in place; raise :class:`InvalidJob`
    (the job is ``rejected``) naming the argument and what does not validate."""
    from pydantic import ValidationError

    for i, name in enumerate(found.positional[: len(args)]):
        adapter = found.by_name.get(name)
        if adapter is not None:
            try:
                args[i] = adapter.validate_python(args[i])
            except ValidationError as exc:
                raise InvalidJob(_reason(task, name, exc), task=task) from None
    for name, value in kwargs.items():
        adapter = found.by_name.get(name)
        if adapter is not None:
            try:
                kwargs[name] = adapter.validate_python(value)
            except ValidationError as exc:
                raise InvalidJob(_reason(task, name, exc), task=task) from None


def _reason(task: str, name: str, exc: Exception) -> str:
    errors = exc.errors(include_url=False)  # type: ignore[attr-defined]
    said = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(value)'}: {e['msg']}" for e in errors[:5])
    return f"argument {name!r} of task {task!r} does not validate: {said}"[:1000]


def as_model(model: Any, value: object) -> Any:
    """``value`` (a result as read back from JSON) validated as ``model``: a model class, or
    any type pydantic validates (``list[Receipt]``)."""
    validate_as = getattr(model, "model_validate", None)
    if validate_as is not None:
        return validate_as(value)
    from pydantic import TypeAdapter

    return TypeAdapter(model).validate_python(value)
