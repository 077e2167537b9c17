"""Pydantic models as a task's arguments and result: a task annotated with a model receives
a validated instance, ``.delay(model)`` sends its JSON, a returned model is recorded as
JSON and read back as the model on request; a body that does not validate is ``rejected``
(never run, never retried). pydantic is loaded only where a task's module loads it."""

from __future__ import annotations

import json

from kindling.core import codec
from kindling.core.envelope import encode_job, new_job
from kindling.core.registry import Registry
from kindling.tools.testing import eager
from pydantic import BaseModel


class Order(BaseModel):
    id: int
    sku: str
    qty: int = 1


class Receipt(BaseModel):
    order_id: int
    total: float


def registry_tasks(r: Registry) -> None:
    """This module's tasks, on the fresh registry the shared ``reg`` fixture gives each test."""
    r.seen = []

    @r.task(name="shop.place")
    def place(order: Order, note: str = "") -> Receipt:
        r.seen.append(order)
        return Receipt(order_id=order.id, total=order.qty * 2.5)

    @r.task(name="shop.by_keyword")
    def by_keyword(*, order: Order | None = None) -> int:
        r.seen.append(order)
        return 0 if order is None else order.qty


def test_a_model_argument_is_sent_as_its_json():
    body = json.loads(encode_job(new_job("shop.place", [Order(id=1, sku="ab")])))
    assert body["args"] == [{"id": 1, "sku": "ab", "qty": 1}]


def test_a_task_annotated_with_a_model_receives_a_validated_instance(reg):
    with eager():
        handle = reg.get("shop.place").delay(Order(id=7, sku="x", qty=4))
        assert handle.status() == "succeeded"
    assert reg.seen == [Order(id=7, sku="x", qty=4)]
    assert type(reg.seen[0]) is Order


def test_a_dict_sent_by_a_producer_without_the_model_is_validated_into_it(reg):
    with eager():
        reg.get("shop.place").delay({"id": "7", "sku": "x"})  # "7" coerces as pydantic would
        reg.get("shop.by_keyword").delay(order={"id": 3, "sku": "y", "qty": 2})
    assert reg.seen == [Order(id=7, sku="x"), Order(id=3, sku="y", qty=2)]


def test_an_optional_model_left_out_stays_none(reg):
    with eager():
        assert reg.get("shop.by_keyword").delay().result() == 0
    assert reg.seen == [None]


def test_a_returned_model_is_recorded_as_json_and_read_back_as_the_model(reg):
    with eager() as jobs:
        handle = reg.get("shop.place").delay(Order(id=7, sku="x", qty=4))
        assert json.loads(jobs.records[handle.id]["result"]) == {"order_id": 7, "total": 10.0}
        assert handle.result() == {"order_id": 7, "total": 10.0}
        assert handle.result(model=Receipt) == Receipt(order_id=7, total=10.0)


def test_the_sqs_clients_result_reads_back_the_model_too(monkeypatch):
    from kindling.producer.client import Client

    client = Client(queue_url="https://sqs.invalid/q", table="t")
    monkeypatch.setattr(client, "record", lambda job_id: {"status": "succeeded",
                                                          "result": '{"order_id": 7, "total": 10.0}'})
    assert client.result("j", timeout=1, model=Receipt) == Receipt(order_id=7, total=10.0)


def test_arguments_that_do_not_validate_are_rejected_not_retried(reg):
    with eager() as jobs:
        handle = reg.get("shop.place").delay({"id": "not a number", "sku": "x"})
        record = jobs.records[handle.id]
    assert record["status"] == "rejected"
    assert record["error"]["type"] == "InvalidJob"
    assert "order" in record["error"]["message"] and "id" in record["error"]["message"]
    assert reg.seen == []


def test_the_codec_writes_a_model_nested_in_a_value():
    assert codec.loads(codec.dumps({"orders": [Order(id=1, sku="a")]})) == {"orders": [{"id": 1, "sku": "a", "qty": 1}]}


def test_celerys_pydantic_option_is_accepted():
    r = Registry()

    @r.task(name="shop.celery_style", pydantic=True)
    def place(order: Order) -> int:
        return order.qty

    with eager():
        assert place.delay({"id": 1, "sku": "a", "qty": 5}).result() == 5


def test_the_typed_handle_accepts_the_model_and_reads_the_result_as_one(tmp_path, mypy):
    import textwrap

    (tmp_path / "shop_tasks.py").write_text(textwrap.dedent('''
        from pydantic import BaseModel

        from kindling import task


        class Order(BaseModel):
            id: int


        @task(pydantic=True)
        def place(order: Order) -> int:
            return order.id


        handle = place.delay(Order(id=1))
        handle.result(timeout=5, model=Order)
        place.delay("not an order")
    '''))
    done = mypy(tmp_path / "shop_tasks.py")
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in errors] == ["18"], done.stdout
