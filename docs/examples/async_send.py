import asyncio

from kindling import Client

client = Client()   # KINDLING_QUEUE_URL from the environment


async def view(request_id: int) -> str:               # one web request enqueues one job
    handle = await client.aenqueue("tasks.resize", f"{request_id}.png")
    return handle.id                                   # SQS has accepted it when the await returns


async def main() -> None:
    ids = await asyncio.gather(*(view(i) for i in range(100)))   # 10 SendMessageBatch calls, not 100
    print(len(set(ids)))


asyncio.run(main())
