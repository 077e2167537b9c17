"""Child-side snippets of the cold-start scenario (each runs in a fresh interpreter).

The parent passes the SQS event in env KINDLING_BENCH_EVENT as a Python literal, read with
``eval``: in Lambda the runtime has decoded the event before the handler runs, so no child
pays for importing json (~8 ms with the re module it pulls in) on the handler's account.
The child prints ``DONE <time.time()>`` right after the handler returned (the result is
durably recorded by then: the handler writes it synchronously) and exits.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SYSTEMS = Path(__file__).resolve().parent

_TAIL = (
    "import time as _t; print('DONE', repr(_t.time()), flush=True)"
)


def kindling_cmd(py: str, layer: str) -> list[str]:
    """kindling: python -S with functions/worker and the layer on sys.path, as in Lambda."""
    funcdir = str(ROOT / "functions/worker")
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
    """Floor: bare interpreter (-S) + one PutItem through kindling.aws.JsonClient (stdlib SigV4)."""
    code = (
        f"import sys; sys.path[:0] = [{layer!r}]; import os\n"
        "from kindling.aws import JsonClient\n"
        "from kindling.codec import loads\n"
        "job = loads(eval(os.environ['KINDLING_BENCH_EVENT'])['Records'][0]['body'])\n"
        "JsonClient('dynamodb', 'DynamoDB_20120810').call('PutItem', {'TableName': os.environ['KINDLING_TABLE'],"
        " 'Item': {'id': {'S': job['id']}, 'task': {'S': job['task']}, 'status': {'S': 'succeeded'}}})\n"
        + _TAIL
    )
    return [py, "-S", "-c", code]
