from pydantic import BaseModel

from kindling import task


class Order(BaseModel):
    id: int
    qty: int = 1


class Receipt(BaseModel):
    order_id: int
    total: float


@task
def place(order: Order) -> Receipt:           # receives a validated Order
    return Receipt(order_id=order.id, total=order.qty * 2.5)


handle = place.delay(Order(id=7, qty=4))      # sends the model's JSON
assert handle.result(model=Receipt) == Receipt(order_id=7, total=10.0)
assert place.delay({"id": "oops"}).status() == "rejected"   # never run, never retried
