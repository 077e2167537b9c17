"""The stream producer's async form when its pipeline raises: each awaiter hears its own
job's outcome, uncertain (the reply was lost after the XADDs went out) or failed (nothing
went out), named by its own id. A fake client: no sockets."""

from __future__ import annotations

import asyncio

import pytest
from kindling.core.errors import EnqueueError, EnqueueUncertain


class Lost(ConnectionError):
    def __init__(self, maybe_ran: bool):
        super().__init__("connection lost" if maybe_ran else "connection refused")
        self.maybe_ran = maybe_ran


class FakeClient:
    def __init__(self, maybe_ran: bool):
        self.maybe_ran = maybe_ran
        self.pipelines = 0

    def pipeline(self, transaction: bool = True):
        self.pipelines += 1
        client = self

        class Pipe:
            def xadd(self, *args, **kwargs):
                pass

            def execute(self, raise_on_error: bool = True):
                raise Lost(client.maybe_ran)

        return Pipe()


@pytest.fixture
def producer_with(monkeypatch):
    from kindling.core import codec
    from kindling.producer.valkey import StreamProducer

    monkeypatch.setattr(codec, "use_orjson", lambda: True)  # keep this process's codec as it is
    monkeypatch.delenv("KINDLING_WORKER_FUNCTION", raising=False)
    return lambda client: StreamProducer("redis://127.0.0.1:1/0", client=client, reader=False, signing="")


@pytest.mark.parametrize(("maybe_ran", "error"), [(True, EnqueueUncertain), (False, EnqueueError)])
def test_each_awaiter_of_a_batch_whose_pipeline_raised_hears_its_own_job(producer_with, maybe_ran, error):
    client = FakeClient(maybe_ran)
    producer = producer_with(client)

    async def main():
        return await asyncio.gather(*(producer.aenqueue("echo", i) for i in range(5)), return_exceptions=True)

    outcomes = asyncio.run(main())
    assert client.pipelines == 1
    assert [type(o) for o in outcomes] == [error] * 5
    named = [set(o.unknown if maybe_ran else o.failed) for o in outcomes]
    assert all(len(ids) == 1 for ids in named) and len(set.union(*named)) == 5  # each its own job
