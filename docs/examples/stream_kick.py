import os

from kindling.valkey import StreamProducer

url = os.environ["KINDLING_VALKEY_URL"]
calls = [("tasks.resize", ["a.png"], {})]

producer = StreamProducer(url, function_name="<WorkerFunctionName>")   # or KINDLING_WORKER_FUNCTION
producer.enqueue_many(calls)     # XADDs, then SET {<stream>}:kick NX in the same round trip
