"""Runtime for one local Lambda execution environment (Python runtimes).

Started by the `local` runtime executor with the function's interpreter, in the unzipped
code directory and with the environment LocalStack prepared. Standard library only, and
only light modules, so that the init it reports is mostly the function's own imports.

Protocol (the one LocalStack's Lambda init speaks, see executor_endpoint.py):
  - report our listening port on the pipe given by --port-fd (the executor connects to it);
  - import the handler, then POST {endpoint}/status/{id}/ready, or /status/{id}/error;
  - serve POST /invoke ({"invoke-id", "invoked-function-arn", "payload", "trace-id"}):
    answer 202, run the handler, POST {endpoint}/invocations/{rid}/logs and then
    /response or /error.
On a timeout (or an exit requested by the handler) the error is reported and the process
re-executes itself, keeping its listening socket: the next invocation gets a fresh init,
as on Lambda.
"""

import json
import logging
import os
import socket
import sys
import threading
import time

_T0 = time.perf_counter()
_ENV = dict(os.environ)  # the environment to re-init with, before the handler changes it
_OUT = sys.stdout


def _args(argv):
    opts = {"layer": []}
    it = iter(argv)
    for key in it:
        name = key.lstrip("-").replace("-", "_")
        if name == "reinit":
            opts[name] = True
        elif name == "layer":
            opts["layer"].append(next(it))
        else:
            opts[name] = next(it)
    return opts


OPTS = _args(sys.argv[1:])
ENDPOINT = os.environ["LOCALSTACK_RUNTIME_ENDPOINT"]  # http://host:port/_localstack_lambda/<id>
RUNTIME_ID = os.environ["LOCALSTACK_RUNTIME_ID"]
TIMEOUT_S = float(os.environ.get("AWS_LAMBDA_FUNCTION_TIMEOUT", "3"))


def _post(path, body):
    """POST JSON to LocalStack; a raw socket keeps http.client/email out of the init."""
    rest = ENDPOINT.split("://", 1)[1]
    hostport, _, prefix = rest.partition("/")
    host, _, port = hostport.rpartition(":")
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    head = (
        f"POST /{prefix}{path} HTTP/1.1\r\nHost: {hostport}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        "Connection: close\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(head.encode() + data)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    status = reply.split(b" ", 2)[1:2]
    if not status or not status[0].startswith(b"2"):
        _OUT.write(f"local-runtime: POST {path} -> {reply[:200]!r}\n")


def _error_body(exc, error_type=None, message=None, skip=0):
    import traceback

    tb = exc.__traceback__
    for _ in range(skip):  # our own frames
        tb = tb.tb_next if tb and tb.tb_next else tb
    return {
        "errorMessage": message if message is not None else str(exc),
        "errorType": error_type or type(exc).__name__,
        "stackTrace": traceback.format_list(traceback.extract_tb(tb)),
    }


class _Tee:
    """sys.stdout/sys.stderr: to the process output and to the current invocation's log."""

    def __init__(self, stream):
        self._stream, self.capture = stream, None

    def write(self, text):
        if self.capture is not None:
            self.capture.append(text)
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _RequestIdFilter(logging.Filter):
    request_id = None

    def filter(self, record):
        record.aws_request_id = self.request_id
        return True


sys.stdout, sys.stderr = _Tee(sys.stdout), _Tee(sys.stderr)
_LOG_FILTER = _RequestIdFilter()
_log_handler = logging.StreamHandler(sys.stdout)
_log_handler.setFormatter(
    logging.Formatter(
        "[%(levelname)s]\t%(asctime)s.%(msecs)03dZ\t%(aws_request_id)s\t%(message)s",
        "%Y-%m-%dT%H:%M:%S",
    )
)
_log_handler.formatter.converter = time.gmtime
_log_handler.addFilter(_LOG_FILTER)
logging.getLogger().addHandler(_log_handler)


class LambdaContext:
    def __init__(self, request_id, arn, deadline):
        env = os.environ
        self.aws_request_id = request_id
        self.invoked_function_arn = arn
        self.function_name = env.get("AWS_LAMBDA_FUNCTION_NAME")
        self.function_version = env.get("AWS_LAMBDA_FUNCTION_VERSION")
        self.memory_limit_in_mb = int(env.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        self.log_group_name = env.get("AWS_LAMBDA_LOG_GROUP_NAME")
        self.log_stream_name = env.get("AWS_LAMBDA_LOG_STREAM_NAME")
        self.identity = self.client_context = None
        self._deadline = deadline

    def get_remaining_time_in_millis(self):
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _load_handler():
    """Import the handler as Lambda's Python runtime does; returns (handler, error body)."""
    spec = os.environ.get("_HANDLER", "")
    module_name, _, func_name = spec.rpartition(".")
    if not module_name or not func_name:
        return None, {"errorMessage": f"Bad handler '{spec}'", "errorType": "Runtime.MalformedHandlerName"}
    module_name = module_name.replace("/", ".")
    try:
        import importlib

        module = importlib.import_module(module_name)
    except ImportError as e:
        message = f"Unable to import module '{module_name}': {e}"
        return None, _error_body(e, "Runtime.ImportModuleError", message)
    except SyntaxError as e:
        message = f"Syntax error in module '{module_name}': {e}"
        return None, _error_body(e, "Runtime.UserCodeSyntaxError", message)
    except Exception as e:
        return None, _error_body(e)
    handler = getattr(module, func_name, None)
    if handler is None:
        return None, {
            "errorMessage": f"Handler '{func_name}' missing on module '{module_name}'",
            "errorType": "Runtime.HandlerNotFound",
        }
    return handler, None


def _reexec(listener):
    """Fresh interpreter, same pid, same listening socket (LocalStack keeps our address)."""
    sys.stdout.flush()
    listener.set_inheritable(True)
    env = dict(_ENV, _LOCAL_EXECUTOR_SPAWN_NS=str(time.time_ns()))
    argv = [sys.executable, os.path.abspath(__file__), "--listen-fd", str(listener.fileno()), "--reinit"]
    for layer in OPTS["layer"]:
        argv += ["--layer", layer]
    os.execve(sys.executable, argv, env)


class Invocation:
    def __init__(self, listener, request, init_ms):
        self.listener, self.rid = listener, request["invoke-id"]
        self.arn, self.payload = request["invoked-function-arn"], request.get("payload") or "null"
        self.trace_id, self.init_ms = request.get("trace-id"), init_ms
        self.lock, self.finished, self.logs = threading.Lock(), False, []

    def _finish(self, kind, body, restart=False):
        with self.lock:
            if self.finished:
                return False
            self.finished = True
        sys.stdout.capture = sys.stderr.capture = None
        ms = (time.monotonic() - self.start) * 1000
        rss = _max_rss_mb()
        init = f"\tInit Duration: {self.init_ms:.2f} ms" if self.init_ms is not None else ""
        memory = os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        tail = (
            f"END RequestId: {self.rid}\nREPORT RequestId: {self.rid}\tDuration: {ms:.2f} ms\t"
            f"Billed Duration: {int(ms) + 1} ms\tMemory Size: {memory} MB\t"
            f"Max Memory Used: {rss} MB{init}\n"
        )
        _OUT.write(tail)
        _OUT.flush()
        _post(f"/invocations/{self.rid}/logs", {"logs": "".join(self.logs) + tail})
        _post(f"/invocations/{self.rid}/{kind}", body)
        if restart:
            _reexec(self.listener)
        return True

    def on_timeout(self):
        msg = f"RequestId: {self.rid} Error: Task timed out after {TIMEOUT_S:.2f} seconds"
        self.logs.append(f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime())}Z {msg}\n")
        self._finish("error", {"errorType": "Sandbox.Timedout", "errorMessage": msg}, restart=True)

    def run(self, handler, init_error):
        self.start = time.monotonic()
        version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION")
        start_line = f"START RequestId: {self.rid} Version: {version}\n"
        _OUT.write(start_line)
        self.logs.append(start_line)
        sys.stdout.capture = sys.stderr.capture = self.logs
        if init_error is not None:
            self._finish("error", init_error)
            return
        if self.trace_id:
            os.environ["_X_AMZN_TRACE_ID"] = self.trace_id
        _LOG_FILTER.request_id = self.rid
        timer = threading.Timer(TIMEOUT_S, self.on_timeout)
        timer.daemon = True
        timer.start()
        context = LambdaContext(self.rid, self.arn, self.start + TIMEOUT_S)
        restart = False
        try:
            result = handler(json.loads(self.payload), context)
            try:
                kind, body = "response", json.dumps(result).encode()
            except (TypeError, ValueError) as e:
                kind, body = (
                    "error",
                    {"errorMessage": f"Unable to marshal response: {e}", "errorType": "Runtime.MarshalError"},
                )
        except Exception as e:
            kind, body = "error", _error_body(e, skip=1)
            print(
                f"[ERROR] {body['errorType']}: {body['errorMessage']}\n"
                f"Traceback (most recent call last):\n{''.join(body['stackTrace'])}",
                end="",
            )
        except BaseException as e:  # SystemExit, KeyboardInterrupt: the runtime exits on Lambda
            message = f"RequestId: {self.rid} Error: Runtime exited: {e!r}"
            kind, body, restart = "error", _error_body(e, "Runtime.ExitError", message, 1), True
        timer.cancel()
        self._finish(kind, body, restart)


def _max_rss_mb():
    # VmHWM, not getrusage: ru_maxrss survives exec and would count LocalStack's own memory
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def _read_request(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None, None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for line in lines[1:]:
        key, _, value = line.partition(":")
        if key.strip().lower() == "content-length":
            length = int(value)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return lines[0], body


def _watch_parent():
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(0)  # LocalStack is gone: do not outlive it


def main():
    task_root = os.environ.get("LAMBDA_TASK_ROOT", os.getcwd())
    # sys.path as on Lambda: code, then layers (later layers win, as in /opt), then the runtime.
    if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]
    sys.path[:0] = [task_root] + OPTS["layer"]
    if "listen_fd" in OPTS:
        listener = socket.socket(fileno=int(OPTS["listen_fd"]))
    else:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        with os.fdopen(int(OPTS["port_fd"]), "w") as port_pipe:
            port_pipe.write(f"{listener.getsockname()[1]}\n")
    threading.Thread(target=_watch_parent, daemon=True).start()

    handler, init_error = _load_handler()
    spawned = int(os.environ.get("_LOCAL_EXECUTOR_SPAWN_NS", "0"))
    init_ms = (time.time_ns() - spawned) / 1e6 if spawned else (time.perf_counter() - _T0) * 1000
    if not OPTS.get("reinit"):
        if init_error is not None:
            _OUT.write(f"[ERROR] {init_error['errorType']}: {init_error['errorMessage']}\n")
            _post(f"/status/{RUNTIME_ID}/error", init_error)
        else:
            _post(f"/status/{RUNTIME_ID}/ready", {})
    while True:
        conn, _ = listener.accept()
        with conn:
            request_line, body = _read_request(conn)
            if request_line is None:
                continue
            ok = request_line.startswith("POST /invoke ")
            status = b"202 Accepted" if ok else b"404 Not Found"
            conn.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        if ok:
            Invocation(listener, json.loads(body), init_ms).run(handler, init_error)
            init_ms = None


if __name__ == "__main__":
    main()
