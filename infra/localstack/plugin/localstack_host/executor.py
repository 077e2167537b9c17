"""A LocalStack Lambda runtime executor that runs each execution environment as a local
process instead of a Docker container (Python runtimes, Zip packages).

Select it with LAMBDA_RUNTIME_EXECUTOR=local. Configuration (environment of LocalStack):
  LAMBDA_LOCAL_EXECUTOR_PYTHON_3_13=/path/to/python3.13   interpreter per runtime
      (python3.12 -> ..._PYTHON_3_12); a plain interpreter with what Lambda provides (boto3),
      never LocalStack's own.
  LAMBDA_LOCAL_EXECUTOR_INHERIT_ENV=PATH,LANG            variables passed on from LocalStack's
      environment to the functions (everything else comes from LocalStack, as on Lambda).
"""

import json
import logging
import os
import select
import shutil
import subprocess
import sys
import threading
import time
from collections import deque
from concurrent.futures import Future
from pathlib import Path

from localstack import config
from localstack.aws.api.lambda_ import PackageType
from localstack.services.lambda_.invocation.executor_endpoint import (
    ExecutorEndpoint,
    StatusErrorException,
)
from localstack.services.lambda_.invocation.lambda_models import FunctionVersion, InvocationResult
from localstack.services.lambda_.invocation.runtime_executor import (
    LambdaRuntimeException,
    RuntimeExecutor,
)

LOG = logging.getLogger(__name__)
BOOTSTRAP = Path(__file__).with_name("bootstrap.py")
HOST = "127.0.0.1"
_checked_interpreters: dict[str, str] = {}


def interpreter_for(runtime: str) -> str:
    """The configured interpreter for a python runtime, checked once to be that version."""
    if not runtime or not runtime.startswith("python"):
        raise LambdaRuntimeException(
            f"The local runtime executor runs Python functions only, not runtime {runtime!r}"
        )
    version = runtime.removeprefix("python")
    variable = "LAMBDA_LOCAL_EXECUTOR_PYTHON_" + version.replace(".", "_")
    python = os.environ.get(variable, "")
    if not python:
        raise LambdaRuntimeException(f"No interpreter for {runtime}: set {variable}")
    if _checked_interpreters.get(python) != version:
        try:
            out = subprocess.run(
                [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError) as e:
            raise LambdaRuntimeException(f"{variable}={python} does not run: {e}") from e
        if out != version:
            raise LambdaRuntimeException(f"{variable}={python} is Python {out}, not {version}")
        _checked_interpreters[python] = version
    return python


def layer_paths(function_version: FunctionVersion) -> list[str]:
    """sys.path entries of the function's layers, as /opt/python... would give them on Lambda
    (all layers extracted into one /opt, later layers overwriting earlier ones)."""
    python = function_version.config.runtime  # e.g. python3.13
    site, plain = [], []
    for layer in reversed(function_version.config.layers):
        if not layer.code:
            continue
        root = layer.code.get_unzipped_code_location()
        site.append(root / "python" / "lib" / python / "site-packages")
        plain.append(root / "python")
    return [str(p) for p in site + plain if p.is_dir()]


class LocalRuntimeExecutor(RuntimeExecutor):
    def __init__(self, id: str, function_version: FunctionVersion) -> None:
        super().__init__(id=id, function_version=function_version)
        self.executor_endpoint = ExecutorEndpoint(self.id)
        self.process: subprocess.Popen | None = None
        self.output: deque[str] = deque(maxlen=2000)
        self.tmp_dir = Path(config.dirs.tmp) / "lambda-envs" / self.id
        self.request_id: str | None = None

    def start(self, env_vars: dict[str, str]) -> None:
        self.executor_endpoint.start()
        fv = self.function_version
        python = interpreter_for(fv.config.runtime)
        code_dir = str(fv.config.code.get_unzipped_code_location())
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        inherit = os.environ.get("LAMBDA_LOCAL_EXECUTOR_INHERIT_ENV", "PATH,LANG").split(",")
        env = {name: os.environ[name] for name in inherit if name in os.environ}
        env.update({key: str(value) for key, value in env_vars.items()})
        env.update(
            LAMBDA_TASK_ROOT=code_dir,
            LAMBDA_RUNTIME_DIR=str(BOOTSTRAP.parent),
            PATH=f"{Path(python).parent}:{env.get('PATH', '/usr/local/bin:/usr/bin:/bin')}",
            TMPDIR=str(self.tmp_dir),
            PYTHONDONTWRITEBYTECODE="1",  # /var/task and /opt are read-only on Lambda
            PYTHONUNBUFFERED="1",
        )
        argv = [python, str(BOOTSTRAP)]
        for path in layer_paths(fv):
            argv += ["--layer", path]
        self._spawn_args = (argv, env, code_dir)
        self._spawn()

    def _spawn(self) -> None:
        """Start the runtime process and wait until it reports ready (or fails to)."""
        argv, env, code_dir = self._spawn_args
        env = dict(env, _LOCAL_EXECUTOR_SPAWN_NS=str(time.time_ns()))
        port_read, port_write = os.pipe()
        try:
            self.process = process = subprocess.Popen(
                [*argv, "--port-fd", str(port_write)],
                cwd=code_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                pass_fds=(port_write,),
                text=True,
                errors="replace",
            )
        finally:
            os.close(port_write)
        threading.Thread(
            target=self._pump_output, args=(process,), name=f"lambda-local-{self.id}", daemon=True
        ).start()
        try:
            port = self._read_port(port_read)
        finally:
            os.close(port_read)
        self.executor_endpoint.container_address = HOST
        self.executor_endpoint.container_port = port
        self.executor_endpoint.wait_for_startup()

    def _read_port(self, fd: int) -> int:
        data = b""
        deadline = time.monotonic() + config.LAMBDA_RUNTIME_ENVIRONMENT_TIMEOUT
        while not data.endswith(b"\n") and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.1)[0]:
                chunk = os.read(fd, 64)
                if not chunk:
                    break
                data += chunk
        if not data.endswith(b"\n"):
            self.process.kill()
            raise LambdaRuntimeException(
                f"Lambda process for {self.function_version.qualified_arn} did not start: "
                f"{self.get_logs()[-2000:]}"
            )
        return int(data)

    def _pump_output(self, process: subprocess.Popen) -> None:
        """Keep the process output for get_logs(); notice the process exiting."""
        for line in process.stdout:
            self.output.append(line)
            LOG.debug("[lambda %s] %s", self.id, line.rstrip("\n"))
        code = process.wait()
        if process is not self.process:
            return
        error = {
            "errorType": "Runtime.ExitError",
            "errorMessage": f"RequestId: {self.request_id} Error: Runtime exited with error: "
            f"exit status {code}",
        }
        endpoint = self.executor_endpoint
        if endpoint.startup_future and not endpoint.startup_future.done():
            error["errorMessage"] = f"Runtime exited with status {code} before it was ready"
            endpoint.startup_future.set_exception(
                StatusErrorException("Environment startup failed", json.dumps(error).encode())
            )
        elif endpoint.invocation_future and not endpoint.invocation_future.done():
            endpoint.invocation_future.set_result(
                InvocationResult(self.request_id, json.dumps(error).encode(), True, self.get_logs())
            )

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.process.kill()
        try:
            self.executor_endpoint.shutdown()
        except Exception as e:
            LOG.debug("Error shutting down executor endpoint %s: %s", self.id, e)
        shutil.rmtree(self.tmp_dir, ignore_errors=True)

    def get_address(self) -> str:
        return HOST

    def get_endpoint_from_executor(self) -> str:
        return HOST

    def get_runtime_endpoint(self) -> str:
        port = config.GATEWAY_LISTEN[0].port
        return f"http://{HOST}:{port}{self.executor_endpoint.get_endpoint_prefix()}"

    def invoke(self, payload: dict[str, str]) -> InvocationResult:
        if not self.process:
            raise LambdaRuntimeException(f"Lambda environment {self.id} was not started")
        if self.process.poll() is not None:
            # The runtime died (os._exit, a crash, the guard below): start a fresh one, as
            # Lambda's init restarts the runtime in the same sandbox.
            LOG.debug("Restarting the Lambda process of environment %s", self.id)
            self.executor_endpoint.startup_future = Future()
            self._spawn()
        self.request_id = payload.get("invoke-id")
        # The bootstrap enforces the function timeout; this only catches a process so stuck
        # that it cannot (the killed process is then reported as Runtime.ExitError).
        guard = threading.Timer(self.function_version.config.timeout + 5, self.process.kill)
        guard.start()
        try:
            return self.executor_endpoint.invoke(payload)
        finally:
            guard.cancel()

    def get_logs(self) -> str:
        return "".join(self.output)

    @classmethod
    def prepare_version(cls, function_version: FunctionVersion) -> None:
        if function_version.config.package_type != PackageType.Zip:
            raise LambdaRuntimeException("The local runtime executor runs Zip packages only")
        interpreter_for(function_version.config.runtime)
        if function_version.config.code:
            function_version.config.code.prepare_for_execution()
        # LocalStack attaches layers to the version but only its Docker executor (Pro) mounts
        # them: unzip them here, the environment puts their python/ dirs on sys.path.
        for layer in function_version.config.layers:
            if layer.code:
                layer.code.prepare_for_execution()

    @classmethod
    def cleanup_version(cls, function_version: FunctionVersion) -> None:
        pass

    @classmethod
    def validate_environment(cls) -> bool:
        if sys.platform != "linux" and sys.platform != "darwin":
            LOG.warning("The local Lambda runtime executor needs a POSIX system")
            return False
        return True
