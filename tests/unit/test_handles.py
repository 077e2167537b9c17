"""Task handles (delay, apply_async), where they send, eager mode, and their static types."""

import textwrap
from pathlib import Path

import pytest
from kindling.core.errors import JobFailed
from kindling.core.registry import Registry
from kindling.producer import dispatch
from kindling.tools.testing import eager

ROOT = Path(__file__).resolve().parents[2]


def registry_tasks(r: Registry) -> None:
    """This module's tasks, on the fresh registry the shared ``reg`` fixture gives each test."""

    @r.task(name="resize")
    def resize(key: str, width: int = 256) -> str:
        return f"thumbs/{width}/{key}"

    @r.task(name="boom")
    def boom() -> None:
        raise ValueError("no thumbnails today")

    @r.task(name="ahello")
    async def ahello(name: str) -> str:
        return f"hello {name}"

    r.resize, r.boom, r.ahello = resize, boom, ahello


class Recorder:
    def __init__(self):
        self.calls = []

    def send(self, call):
        self.calls.append(call)
        return "handle"


@pytest.fixture
def recorder():
    producer = Recorder()
    dispatch.set_producer(producer)
    yield producer
    dispatch.set_producer(None)


def test_delay_and_apply_async_send_calls_named_as_celery_names_them(reg, recorder):
    assert reg.resize.delay("a.png", width=64) == "handle"
    reg.resize.apply_async(["b.png"], {"width": 32}, countdown=60, job_id="b-png", max_attempts=5, timeout=10)
    first, second = recorder.calls
    assert (first.task, first.args, first.kwargs, first.delay) == (reg.resize, ["a.png"], {"width": 64}, 0)
    assert (second.args, second.kwargs, second.delay, second.job_id) == (["b.png"], {"width": 32}, 60, "b-png")
    assert (second.max_attempts, second.timeout) == (5, 10)


def test_eager_mode_runs_jobs_inline_through_the_runner(reg, recorder):
    with eager() as jobs:
        handle = reg.resize.delay("a.png", width=64)
        assert handle.result() == "thumbs/64/a.png" and handle.status() == "succeeded"
        assert jobs.records[handle.id]["attempts"] == 1
        assert reg.ahello.delay("ada").result() == "hello ada"
        failed = reg.boom.delay()
        with pytest.raises(JobFailed, match="no thumbnails today"):
            failed.result()
        assert failed.status() == "dead"  # every attempt ran, as on the workers
        assert jobs.records[failed.id]["attempts"] == 3
        with pytest.raises(TypeError, match="not JSON-serializable"):
            reg.resize.delay(object())
    assert recorder.calls == []  # nothing was sent anywhere


def test_eager_mode_refuses_bad_arguments_at_the_call_as_every_sender_does(reg):
    with eager() as jobs:
        with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
            reg.resize.delay("a.png", colour="red")
        assert jobs.records == {}  # nothing ran, nothing was recorded


def test_kindling_eager_turns_it_on_for_the_process(reg, recorder, monkeypatch):
    monkeypatch.setenv("KINDLING_EAGER", "1")
    assert reg.resize.delay("c.png").result() == "thumbs/256/c.png"
    assert recorder.calls == []


@pytest.mark.slow
def test_a_type_checker_flags_wrong_arguments_at_the_call_site(tmp_path, mypy):
    """registry.pyi types delay() with the function's ParamSpec (mypy, from the dev extras)."""
    (tmp_path / "app_tasks.py").write_text(textwrap.dedent('''
        from kindling import task


        @task
        def resize(key: str, width: int = 256) -> str:
            return key


        @task(name="emails.send", timeout=30)
        async def send_email(to: str, body: str) -> None:
            return None


        resize.delay("a.png", width=64)
        resize.apply_async(["a.png"], {"width": 64}, countdown=60, job_id="a-png")
        send_email.delay("ada@example.com", body="hi")
        resize.delay(1)
        resize.delay("a.png", height=3)
        send_email.delay("ada@example.com")
    '''))
    done = mypy(tmp_path / "app_tasks.py")
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in errors] == ["18", "19", "20"], done.stdout
    assert 'incompatible type "int"; expected "str"' in errors[0]
    assert 'Unexpected keyword argument "height"' in errors[1]
    # An async task's delay() is overloaded (its handle gives what the coroutine returns):
    # mypy names no single missing argument, but the call is refused all the same.
    assert 'No overload variant of "delay" of "Task" matches argument type "str"' in errors[2]


@pytest.mark.slow
def test_a_handles_result_has_the_return_type_of_its_task(tmp_path, mypy):
    """registry.pyi and handles.pyi carry the task's return type to every handle's result():
    delay, apply_async and their await forms, a Client's or a stream producer's enqueue of a
    Task, eager mode's; an async task's handle returns what its coroutine returns."""
    source = textwrap.dedent('''
        from typing import Any, assert_type

        from kindling import Client, task
        from kindling.producer.handles import JobHandle
        from kindling.tools.testing import eager
        from kindling.valkey import StreamProducer


        @task
        def resize(key: str, width: int = 256) -> str:
            return key


        @task(name="emails.send")
        async def send_email(to: str, body: str) -> int:
            return 1


        assert_type(resize.delay("a.png").result(), str)
        assert_type(resize.delay("a.png").result(timeout=5), str)
        assert_type(resize.apply_async(["a.png"], countdown=60).result(), str)
        assert_type(send_email.delay("ada@example.com", body="hi").result(), int)
        assert_type(send_email.apply_async(["ada@example.com", "hi"]).result(), int)


        async def sends() -> None:
            assert_type((await resize.adelay("a.png")).result(), str)
            assert_type((await resize.aapply_async(["a.png"])).result(), str)
            assert_type((await send_email.adelay("ada@example.com", "hi")).result(), int)
            client = Client(queue_url="q", table="t")
            assert_type((await client.aenqueue(resize, "a.png")).result(), str)


        client = Client(queue_url="q", table="t")
        assert_type(client.enqueue(resize, "a.png", width=64).result(), str)
        assert_type(client.enqueue("resize", "a.png").result(), Any)
        handle: JobHandle[str] = client.enqueue(resize, "a.png")
        producer = StreamProducer("valkey://127.0.0.1:6379/0")
        assert_type(producer.enqueue(resize, "a.png").result(), str)
        with eager() as jobs:
            assert_type(jobs.enqueue(resize, "a.png").result(), str)
        client.enqueue(resize, 3)
    ''')
    (tmp_path / "app_tasks.py").write_text(source)
    done = mypy(tmp_path / "app_tasks.py")
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    wrong = source.splitlines().index("client.enqueue(resize, 3)") + 1  # a str is wanted: the one error
    assert [int(line.split(":")[1]) for line in errors] == [wrong], done.stdout
    assert 'No overload variant of "enqueue" of "Client" matches argument types "Task[[str, int], str]", "int"' \
        in errors[0], done.stdout
