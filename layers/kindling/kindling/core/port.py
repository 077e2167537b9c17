"""The trigger's contract: deliveries in, outcomes settled, follow-ups sent.

A trigger is what carries jobs to the runner and its verdicts back: an SQS queue
(:class:`kindling.triggers.sqs.port.SqsPort`, for the Lambda handler and the local loop) or
a Valkey stream's consumer group (:class:`kindling.triggers.valkey.consumer.StreamConsumer`,
for the stream worker and the Lambda drain). Each keeps this one shape, so every trigger's
round reads the same::

    deliveries = port.fetch(wait_ms)
    outcomes = runner.run(deliveries, send=port.send)   # every rule about a job is the runner's
    port.settle(outcomes, deliveries)

A port judges no job: what each outcome's status asks of it is in :mod:`kindling.core.batch`,
and a batch that breaks the runner is the runner's to contain
(:mod:`kindling.engine.contain`). A port may take more than the contract gives, each extra
with a default (a deadline, batches settled with the next read); ``tests/unit`` holds that
both do.

Typing only on the worker's path: nothing a batch runs imports this module.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from kindling.core.batch import Delivery, Outcome
    from kindling.core.envelope import Job

__all__ = ["TriggerPort"]


@runtime_checkable
class TriggerPort(Protocol):
    """One trigger's I/O around the runner (see the module's docstring)."""

    def fetch(self, wait_ms: int | None) -> list[Delivery]:
        """The next deliveries, waiting up to ``wait_ms`` for some (``None``: not at all);
        ``[]`` when there are none. Each carries what settling it needs (its receipt)."""
        ...

    def settle(self, outcomes: Sequence[Outcome], deliveries: Sequence[Delivery]) -> object:
        """Acknowledge, hand back, delay or move each delivery as its outcome's status asks."""
        ...

    def send(self, jobs: list[Job]) -> None:
        """Enqueue jobs where this trigger reads them (a chain's next step, a chord's
        callback); raises unless every one was taken."""
        ...
