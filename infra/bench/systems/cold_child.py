"""Child-side snippets of the cold-start scenario (each runs in a fresh interpreter).

The parent passes the SQS event in env KINDLING_BENCH_EVENT as a Python literal, read with
``eval``: in Lambda the runtime has decoded the event before the handler runs, so no child
pays for importing json (~8 ms with the re module it pulls in) on the handler's account.
The child prints ``DONE <time.time()>`` right after the handler returned (the result is
durably recorded by then: the handler writes it synchronously) and exits.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SYSTEMS = Path(__file__).resolve().parent

_TAIL = (
    "import time as _t; print('DONE', repr(_t.time()), flush=True)"
)


def function_dir() -> str:
    """The worker function as built (run.py builds it, with its bytecode, as sam build does),
    else the source."""
    return os.environ.get("KINDLING_BENCH_FUNCTION") or str(ROOT / "functions/worker")


def kindling_cmd(py: str, layer: str) -> list[str]:
    """kindling: python -S with functions/worker and the layer on sys.path, as in Lambda."""
    funcdir = function_dir()
    code = (
        f"import sys; sys.path[:0] = [{funcdir!r}, {layer!r}]; import app, os\n"
        "r = app.handler(eval(os.environ['KINDLING_BENCH_EVENT']), None)\n"
        "assert not r['batchItemFailures'], r\n" + _TAIL
    )
    return [py, "-S", "-c", code]


def powertools_cmd(py: str) -> list[str]:
    """boto3 + Powertools handler, with site-packages (that is where boto3/powertools live)."""
    code = (
        f"import sys; sys.path.insert(0, {str(SYSTEMS)!r}); import powertools_handler as h, os\n"
        "class Ctx:\n aws_request_id = 'bench'\n def get_remaining_time_in_millis(self): return 60000\n"
        "r = h.handler(eval(os.environ['KINDLING_BENCH_EVENT']), Ctx())\n"
        "assert not r['batchItemFailures'], r\n" + _TAIL
    )
    return [py, "-c", code]


def floor_cmd(py: str, layer: str) -> list[str]:
    """Floor: bare interpreter (-S) + one PutItem through kindling.drivers.aws.JsonClient (stdlib SigV4)."""
    code = (
        f"import sys; sys.path[:0] = [{layer!r}]; import os\n"
        "from kindling.drivers.aws import JsonClient\n"
        "from kindling.core.codec import loads\n"
        "job = loads(eval(os.environ['KINDLING_BENCH_EVENT'])['Records'][0]['body'])\n"
        "JsonClient('dynamodb', 'DynamoDB_20120810').call('PutItem', {'TableName': os.environ['KINDLING_TABLE'],"
        " 'Item': {'id': {'S': job['id']}, 'task': {'S': job['task']}, 'status': {'S': 'succeeded'}}})\n"
        + _TAIL
    )
    return [py, "-S", "-c", code]


def drain_cmd(py: str, layer: str) -> list[str]:
    """kindling's Valkey drain: the same handler as :func:`kindling_cmd`, given a drain event.

    A drain runs until the stream is empty (then a blocking read and the handshake), so the
    child prints ``DONE`` when its first batch is recorded: right after the stream worker's
    ``process`` returns (records written, entries acknowledged), the moment the SQS handler
    would have returned.
    """
    funcdir = function_dir()
    code = (
        f"import sys; sys.path[:0] = [{funcdir!r}, {layer!r}]; import app, os\n"
        "import time as _t\n"
        "from kindling.triggers.valkey import worker as _w\n"
        "_process = _w.StreamWorker.process\n"
        "def _first(self, *a, _seen=[], **k):\n"
        " out = _process(self, *a, **k)\n"
        " if not _seen:\n"
        "  _seen.append(1); print('DONE', repr(_t.time()), flush=True)\n"
        " return out\n"
        "_w.StreamWorker.process = _first\n"
        "r = app.handler(eval(os.environ['KINDLING_BENCH_EVENT']), None)\n"
        "assert r['processed'] == 1 and r['ended'] == 'empty', r\n"
    )
    return [py, "-S", "-c", code]


def write_only_cmd(py: str, layer: str) -> list[str]:
    """:func:`kindling_cmd` on a job of a task declared ``skip_succeeded=False``: the runner
    makes no duplicate check, so its first batch is one write (the floor's one call)."""
    funcdir = function_dir()
    code = (
        f"import sys; sys.path[:0] = [{funcdir!r}, {layer!r}]; import app, os\n"
        "from kindling import task\n"
        "task(name='noop_write_only', skip_succeeded=False)(lambda: None)\n"
        "r = app.handler(eval(os.environ['KINDLING_BENCH_EVENT']), None)\n"
        "assert not r['batchItemFailures'], r\n" + _TAIL
    )
    return [py, "-S", "-c", code]


def round_trip_cmd(py: str, layer: str, calls: int = 5) -> list[str]:
    """One DynamoDB round trip on an open connection: as the floor (one PutItem, which opens
    it), then ``calls`` BatchGetItem requests shaped as the runner's duplicate check (one key,
    consistent, projected); prints ``RTT <median ms>``."""
    code = (
        f"import sys; sys.path[:0] = [{layer!r}]; import os, time\n"
        "from kindling.drivers.aws import JsonClient\n"
        "from kindling.core.codec import loads\n"
        "job = loads(eval(os.environ['KINDLING_BENCH_EVENT'])['Records'][0]['body'])\n"
        "table = os.environ['KINDLING_TABLE']\n"
        "c = JsonClient('dynamodb', 'DynamoDB_20120810')\n"
        "c.call('PutItem', {'TableName': table,"
        " 'Item': {'id': {'S': job['id']}, 'task': {'S': job['task']}, 'status': {'S': 'succeeded'}}})\n"
        "read = {'RequestItems': {table: {'Keys': [{'id': {'S': job['id']}}], 'ProjectionExpression': '#i, #s, #a',"
        " 'ExpressionAttributeNames': {'#i': 'id', '#s': 'status', '#a': 'attempts'}, 'ConsistentRead': True}}}\n"
        "took = []\n"
        f"for _ in range({calls}):\n"
        " t0 = time.perf_counter(); c.call('BatchGetItem', read); took.append((time.perf_counter() - t0) * 1000)\n"
        "print('RTT', sorted(took)[len(took) // 2], flush=True)\n" + _TAIL
    )
    return [py, "-S", "-c", code]
