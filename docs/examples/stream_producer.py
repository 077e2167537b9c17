import os

from kindling.valkey import StreamProducer

url = os.environ.get("KINDLING_VALKEY_URL", "redis://127.0.0.1:6390/0")
producer = StreamProducer(url)                              # rediss:// and AUTH work too
producer.enqueue("tasks.resize", "a.png")
producer.enqueue_many([("noop", [], {})] * 10_000)          # pipelined: 500 XADDs per round trip
