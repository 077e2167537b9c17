"""A worker restored from a SnapStart snapshot shares no socket and no random state.

The restore is emulated: a process initializes as Lambda's init would (the worker made,
a DynamoDB call and a Valkey command on kept-alive connections, ``random`` imported), then
forks; each child keeps its parent's pid, as a restored environment keeps the snapshot's,
and runs the after-restore hooks registered with a fake ``snapshot_restore_py`` (the
managed runtime's module) before it works. Each child then talks over connections of its
own and draws jitter of its own.
"""

from __future__ import annotations

import json
import socketserver
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.valkey

ROOT = Path(__file__).resolve().parents[2]

FAKE_RUNTIME = '''
"""The managed runtime's module, as far as kindling uses it."""
after_restore = []

def register_after_restore(func, *args, **kwargs):
    after_restore.append((func, args, kwargs))
    return func

def register_before_snapshot(func, *args, **kwargs):
    return func

def restore():
    for func, args, kwargs in after_restore:
        func(*args, **kwargs)
'''

SCENARIO = """
import os, sys
sys.path[:0] = [{fake!r}, {layer!r}]
os.environ.update(AWS_LAMBDA_INITIALIZATION_TYPE="snap-start", AWS_ENDPOINT_URL={endpoint!r},
                  AWS_ACCESS_KEY_ID="k", AWS_SECRET_ACCESS_KEY="s", AWS_REGION="us-east-1", KINDLING_TABLE="t")
from kindling.triggers.sqs.handler import LambdaWorker
worker = LambdaWorker()  # the init a snapshot is taken of
import snapshot_restore_py
from kindling.drivers import aws
from kindling.shared.valkey.connection import connect
import random

valkey = connect({valkey_url!r})
def connections():
    return [aws.dynamodb().call("DescribeTable", {{}})["connection"], valkey.execute_command("CLIENT", "ID")]

print(len(snapshot_restore_py.after_restore), *connections(), flush=True)
snapshot = os.getpid()
for child in range(2):
    pid = os.fork()
    if pid == 0:
        os.getpid = lambda: snapshot  # a restored environment keeps the snapshot's pid
        snapshot_restore_py.restore()
        print(*connections(), random.random(), flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
"""


class CountingAws(socketserver.StreamRequestHandler):
    """Answers every request with the number of the connection it came on (keep-alive)."""

    def handle(self):
        with self.server.lock:
            self.server.count += 1
            number = self.server.count
        while True:
            length = 0
            line = self.rfile.readline()
            if not line:
                return
            while line not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
                line = self.rfile.readline()
            self.rfile.read(length)
            body = json.dumps({"connection": number}).encode()
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


@pytest.fixture
def aws_endpoint():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), CountingAws)
    server.daemon_threads = True
    server.count, server.lock = 0, threading.Lock()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_restored_workers_open_their_own_connections_and_draw_their_own_jitter(
        valkey_layers_python, valkey_url, aws_endpoint, tmp_path):
    (tmp_path / "snapshot_restore_py.py").write_text(FAKE_RUNTIME)
    code = SCENARIO.format(fake=str(tmp_path), layer=str(valkey_layers_python), endpoint=aws_endpoint,
                           valkey_url=valkey_url)
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    init, *children = [line.split() for line in out.stdout.splitlines()]
    hooks, dynamodb, valkey = init
    assert hooks == "1"
    assert len(children) == 2
    assert len({dynamodb} | {c[0] for c in children}) == 3  # three DynamoDB connections, not one
    assert len({valkey} | {c[1] for c in children}) == 3  # and three Valkey connections
    assert children[0][2] != children[1][2]  # random, reseeded: each its own jitter
