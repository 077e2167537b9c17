"""A call whose arguments cannot bind to its task fails at the sender with a TypeError, as
Celery's ``.delay()`` does, instead of being sent and recorded ``rejected`` by a worker."""

from types import SimpleNamespace

import pytest
from kindling import chain, group
from kindling.core.errors import InvalidJob
from kindling.core.registry import Registry
from kindling.producer import dispatch


class Recorder:
    def __init__(self):
        self.sent = []

    def send(self, call):
        self.sent.append(call)
        return SimpleNamespace(id=call.job_id or "job-1")

    def enqueue_many(self, calls):
        return [self.send(call) for call in calls]


@pytest.fixture
def sent():
    recorder = Recorder()
    dispatch.set_producer(recorder)
    yield recorder.sent
    dispatch.set_producer(None)


@pytest.fixture
def tasks():
    reg = Registry()

    @reg.task(name="add")
    def add(a, b):
        return a + b

    @reg.task(name="total")
    def total(values, *, currency):
        return values

    class Greeter:
        def greet(self, name):
            return name

    reg.task(name="greet")(Greeter().greet)
    return reg


BAD_CALLS = [((1, 2, 3), {}), ((1,), {}), ((), {}), ((1, 2), {"c": 3}), ((1,), {"a": 1})]


@pytest.mark.parametrize("args, kwargs", BAD_CALLS)
def test_delay_and_apply_async_refuse_arguments_the_task_cannot_take(tasks, sent, args, kwargs):
    add = tasks.get("add")
    with pytest.raises(TypeError, match="bad arguments for task 'add'"):
        add.delay(*args, **kwargs)
    with pytest.raises(TypeError, match="bad arguments for task 'add'"):
        add.apply_async(args, kwargs)
    assert sent == []


def test_good_arguments_are_sent(tasks, sent):
    tasks.get("add").delay(1, b=2)
    tasks.get("add").apply_async([1, 2])
    tasks.get("greet").delay("ada")  # a bound method: self is not an argument to send
    assert [(c.args, c.kwargs) for c in sent] == [([1], {"b": 2}), ([1, 2], {}), (["ada"], {})]


def test_a_bound_method_task_takes_its_arguments_without_self(tasks):
    greet = tasks.get("greet")
    greet.check_arguments(["ada"], {})  # the worker's check
    with pytest.raises(InvalidJob, match="bad arguments for task 'greet'"):
        greet.check_arguments(["ada", "lovelace"], {})


def test_the_producer_check_is_the_worker_check(tasks):
    """The same rule on both sides: the worker's InvalidJob is a TypeError too, with the
    same message."""
    add = tasks.get("add")
    with pytest.raises(TypeError) as at_sender:
        add.check_call([1, 2, 3], {})
    with pytest.raises(InvalidJob) as at_worker:
        add.check_arguments([1, 2, 3], {})
    assert str(at_sender.value) == str(at_worker.value)


def test_a_signature_refuses_arguments_that_bind_in_no_position(tasks):
    add = tasks.get("add")
    add.s(1)  # a chain step: the previous result comes first
    add.s(1, 2)
    with pytest.raises(TypeError, match="bad arguments for task 'add'"):
        add.s(1, 2, 3)
    with pytest.raises(TypeError, match="bad arguments for task 'add'"):
        add.s(c=1)
    with pytest.raises(TypeError, match="bad arguments for task 'add'"):
        add.s()  # one value before it is all a chain or a chord ever adds


def test_canvases_check_each_call_where_it_runs(tasks, sent):
    add, total = tasks.get("add"), tasks.get("total")
    with pytest.raises(TypeError, match="bad arguments for task 'add'"):
        add.s(1).delay()  # sent alone, nothing comes before it
    with pytest.raises(TypeError, match="bad arguments for task 'add'"):
        chain(add.s(1), add.s(2)).delay()  # the first step gets no previous result
    with pytest.raises(TypeError, match="bad arguments for task 'add'"):
        chain(add.s(1, 2), add.s(2, 3)).delay()  # a later step does
    with pytest.raises(TypeError, match="bad arguments for task 'add'"):
        group([add.s(1, 2), add.s(1)]).delay()
    with pytest.raises(TypeError, match="bad arguments for task 'total'"):
        group([add.s(1, 2)]).then(total.s()).delay()  # currency is missing
    assert sent == []
    chain(add.s(1, 2), add.s(3)).delay()
    group([add.s(1, 2), add.s(3, 4)]).then(total.s(currency="EUR")).delay()
    assert len(sent) == 3


@pytest.mark.service  # a moto server: to move to tests/service
def test_a_client_refuses_a_task_call_that_cannot_bind_before_sending(tasks, moto_endpoint):
    from kindling.producer.client import Call, Client

    client = Client(queue_url=moto_endpoint + "/000000000000/never-used", table="unused")
    with pytest.raises(TypeError, match="bad arguments for task 'add'"):
        client.enqueue(tasks.get("add"), 1, 2, 3)
    with pytest.raises(TypeError, match="bad arguments for task 'add'"):
        client.enqueue_many([Call(tasks.get("add"), [1], {"c": 2})])


def test_a_stream_producer_refuses_a_task_call_that_cannot_bind_before_sending(tasks, monkeypatch):
    from kindling.core import codec
    from kindling.producer.valkey import StreamProducer

    monkeypatch.setattr(codec, "use_orjson", lambda: True)  # keep this process's codec as it is

    class Unreachable:
        def __getattr__(self, name):
            raise AssertionError(f"nothing may be sent ({name})")

    producer = StreamProducer("redis://127.0.0.1:1/0", client=Unreachable())
    with pytest.raises(TypeError, match="bad arguments for task 'add'"):
        producer.enqueue(tasks.get("add"), 1)
