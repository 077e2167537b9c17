import pytest
from kindling.core.errors import InvalidJob, TaskDefinitionError
from kindling.core.registry import Registry


def test_task_keeps_the_function_callable_and_reads_options():
    reg = Registry()

    @reg.task(name="resize", timeout=30, max_attempts=5, skip_succeeded=False)
    def resize(key, width=256):
        return key, width

    assert resize("a.png") == ("a.png", 256)
    t = reg.get("resize")
    assert (t.name, t.timeout, t.max_attempts, t.skip_succeeded, t.is_async) == ("resize", 30.0, 5, False, False)


def test_async_functions_are_recognised_and_default_names_are_qualified():
    reg = Registry()

    @reg.task
    async def fetch(url):
        return url

    assert fetch.is_async
    assert fetch.name.endswith("test_async_functions_are_recognised_and_default_names_are_qualified.<locals>.fetch")


@pytest.mark.parametrize(
    "options, message",
    [
        ({"retries": 3}, "unknown task option(s) retries"),
        ({"timeout": 0}, "timeout must be a number of seconds above 0"),
        ({"timeout": "5"}, "timeout must be a number of seconds above 0"),
        ({"max_attempts": 0}, "max_attempts must be an integer from 1 to 1000"),
        ({"max_attempts": True}, "max_attempts must be an integer from 1 to 1000"),
        ({"skip_succeeded": "yes"}, "skip_succeeded must be True or False"),
        ({"name": ""}, "task name must be a string of 1-200 characters"),
    ],
)
def test_bad_options_fail_at_definition_time(options, message):
    with pytest.raises(TaskDefinitionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Registry().task(**options)(lambda: None)


def test_two_different_functions_cannot_share_a_name():
    reg = Registry()
    reg.task(name="x")(lambda: 1)
    with pytest.raises(TaskDefinitionError, match="already registered"):
        reg.task(name="x")(lambda: 2)


def test_unknown_task_is_an_invalid_job():
    with pytest.raises(InvalidJob, match="unknown task 'nope'"):
        Registry().get("nope")


def f_plain(a, b=2): ...
def f_star(a, *args, c, d=4, **kwargs): ...
def f_posonly(a, b, /, c=3): ...
def f_posonly_kw(a, /, **kwargs): ...
def f_kwonly(*, x): ...
def f_none(): ...


CALLS = [
    ((), {}), ((1,), {}), ((1, 2), {}), ((1, 2, 3), {}), ((), {"a": 1}), ((1,), {"a": 1}),
    ((1,), {"b": 2}), ((1,), {"c": 3}), ((1, 2), {"c": 3}), ((), {"x": 1}), ((1,), {"x": 1}),
    ((1, 2, 3, 4), {"c": 1, "z": 2}), ((), {"a": 1, "b": 2}), ((1,), {"z": 1}),
]


@pytest.mark.parametrize("fn", [f_plain, f_star, f_posonly, f_posonly_kw, f_kwonly, f_none])
@pytest.mark.parametrize("args, kwargs", CALLS)
def test_argument_check_agrees_with_calling_the_function(fn, args, kwargs):
    """The binder accepts exactly the calls Python accepts (these functions do nothing)."""
    reg = Registry()
    t = reg.task(name="t")(fn)
    try:
        fn(*args, **kwargs)
        expected_ok = True
    except TypeError:
        expected_ok = False
    if expected_ok:
        t.check_arguments(list(args), dict(kwargs))
    else:
        with pytest.raises(InvalidJob, match="bad arguments for task 't'"):
            t.check_arguments(list(args), dict(kwargs))


def test_a_registry_finds_a_task_by_name_and_lists_its_tasks_in_order():
    reg = Registry()

    @reg.task
    def b(): ...

    @reg.task(name="a")
    def other(): ...

    assert reg.find("a") is other and reg.find(b.name) is b
    assert reg.find("missing") is None  # no exception: "a task this worker does not run" is an answer
    assert list(reg) == [b, other]  # registration order
    assert len(reg) == 2


def test_no_module_reads_a_registrys_private_table():
    """Other modules look tasks up through find() and iteration: the table's shape is the
    registry's own."""
    import ast
    from pathlib import Path

    import kindling

    package = Path(kindling.__file__).parent
    reads = [f"{p.relative_to(package)}:{n.lineno}" for p in sorted(package.rglob("*.py")) if p.name != "registry.py"
             for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.Attribute) and n.attr == "_tasks"]
    assert reads == []
