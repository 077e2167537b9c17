"""The conformance tasks that take and return pydantic models (kindling.core.models), apart
from scenario_tasks.py so that a worker without pydantic (the deployed stack's) runs the rest."""

from __future__ import annotations

from conformance.scenario_tasks import task
from pydantic import BaseModel


class Order(BaseModel):
    id: int
    qty: int = 1


class Receipt(BaseModel):
    order_id: int
    total: int
    received: str


@task(name="c.model")
def place_order(order: Order) -> Receipt:
    """Takes a pydantic model and returns one: what it received says whether it was validated."""
    return Receipt(order_id=order.id, total=order.qty * 5, received=type(order).__name__)
