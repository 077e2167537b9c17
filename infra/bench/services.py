"""What the benchmarks run against: LocalStack (DynamoDB, SQS, Lambda) and Valkey.

AWS is LocalStack on the host, installed and started by infra/localstack/ctl (a running
one is reused and left running); ``--aws moto`` uses a moto server instead, and
KINDLING_BENCH_ENDPOINT any other endpoint. Everything started here is stopped by
:meth:`Services.close` (only what we started).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCALSTACK_VERSION = "2026.3.0"
VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args[:3]} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


class Services:
    def __init__(self, log=print):
        self.log = log
        self.procs: list[subprocess.Popen] = []
        self.tmp = Path(tempfile.mkdtemp(prefix="kindling-bench-"))
        self.endpoint = ""
        self.endpoint_kind = ""
        self.valkey_url = ""
        self.valkey_kind = ""
        self._valkey_ctl_port: int | None = None
        self.table = "kindling-bench-results"
        self.queue_url = ""
        self.localstack = False
        self._stop_localstack = False

    # -- AWS (DynamoDB, SQS) -------------------------------------------------------------
    def start_aws(self, kind: str = "localstack") -> None:
        given = os.environ.get("KINDLING_BENCH_ENDPOINT")
        if given:
            self.endpoint, self.endpoint_kind = given, f"given endpoint {given} (KINDLING_BENCH_ENDPOINT)"
        elif kind == "moto":
            port = free_port()
            p = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                 stdout=subprocess.DEVNULL, stderr=(self.tmp / "moto.log").open("w"))
            self.procs.append(p)
            wait_port(port, 60, p)
            self.endpoint = f"http://127.0.0.1:{port}"
            self.endpoint_kind = f"moto server (separate process) at {self.endpoint}"
        else:
            self._start_localstack()
        self.localstack = kind == "localstack" and not given
        os.environ.update(self.aws_env())
        import boto3

        ddb = boto3.client("dynamodb")
        try:
            from kindling.tools.localcloud import results_table_schema

            ddb.create_table(TableName=self.table, BillingMode="PAY_PER_REQUEST",
                             **results_table_schema(ROOT / "template.yaml"))
            ddb.get_waiter("table_exists").wait(TableName=self.table)
        except ddb.exceptions.ResourceInUseException:
            pass
        sqs = boto3.client("sqs")
        self.queue_url = sqs.create_queue(QueueName="kindling-bench-jobs")["QueueUrl"]
        self.log(f"AWS endpoint: {self.endpoint_kind}; table {self.table}")

    def _start_localstack(self) -> None:
        ctl = str(ROOT / "infra/localstack/ctl")
        subprocess.run([ctl, "install"], check=True, stdout=subprocess.DEVNULL)
        if subprocess.run([ctl, "status"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
            subprocess.run([ctl, "start"], check=True, stdout=subprocess.DEVNULL)
            self._stop_localstack = True
        env_line = subprocess.run([ctl, "env"], check=True, capture_output=True, text=True).stdout
        self.endpoint = next(w.split("=", 1)[1] for w in env_line.split() if w.startswith("AWS_ENDPOINT_URL="))
        self.endpoint_kind = (f"LocalStack {LOCALSTACK_VERSION} on the host at {self.endpoint} "
                              "(DynamoDB Local in memory)")

    def aws_env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "KINDLING_TABLE": self.table,
        }

    # -- HTTPS in front of the AWS endpoint (the cold-start TLS variant) ----------------
    def start_tls(self) -> dict[str, str]:
        """A throwaway CA and a TLS proxy on 127.0.0.1 in front of the AWS endpoint (tls.py).

        Returns the children's environment: AWS_ENDPOINT_URL over https, and SSL_CERT_FILE and
        AWS_CA_BUNDLE naming a bundle of the system CAs plus the test CA.
        """
        from tls import make_pki

        pki = make_pki(self.tmp / "tls")
        port = free_port()
        upstream = self.endpoint.split("://", 1)[1].rstrip("/")
        p = subprocess.Popen([sys.executable, str(Path(__file__).with_name("tls.py")), "--cert", str(pki["cert"]),
                              "--key", str(pki["key"]), "--port", str(port), "--upstream", upstream],
                             stdout=subprocess.DEVNULL, stderr=(self.tmp / "tls-proxy.log").open("w"))
        self.procs.append(p)
        wait_port(port, 30, p)
        self.log(f"TLS proxy on https://127.0.0.1:{port} -> {upstream}; CA bundle {pki['bundle']} "
                 f"({pki['bundle'].stat().st_size:,} bytes)")
        return {"AWS_ENDPOINT_URL": f"https://127.0.0.1:{port}", "SSL_CERT_FILE": str(pki["bundle"]),
                "AWS_CA_BUNDLE": str(pki["bundle"])}

    # -- Valkey --------------------------------------------------------------------------
    def start_valkey(self) -> None:
        port = free_port()
        ctl = ROOT / "infra/valkey/ctl"
        server = shutil.which("valkey-server") or shutil.which("redis-server")
        if ctl.exists():
            env = dict(os.environ, KINDLING_VALKEY_STATE=str(self.tmp / "valkey"))
            if not server:
                subprocess.run([str(ctl), "install"], check=True, env=env)
            subprocess.run([str(ctl), "start", str(port)], check=True, env=env, stdout=subprocess.DEVNULL)
            self._valkey_ctl_port = port
            self._ctl_env = env
            self.valkey_kind = f"infra/valkey/ctl start {port}"
        else:
            if not server:
                raise SystemExit("no valkey-server/redis-server: apt-get install valkey-server (or redis-server)")
            p = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                  "--appendonly", "no", "--maxclients", "10000"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs.append(p)
            wait_port(port, 30, p)
            self.valkey_kind = f"{server} on port {port}"
        self.valkey_url = f"redis://127.0.0.1:{port}/0"
        self.log(f"Valkey: {self.valkey_kind} ({self.valkey_url})")

    def valkey(self, db: int = 0):
        import valkey

        return valkey.Valkey(host="127.0.0.1", port=int(self.valkey_url.rsplit(":", 1)[1].split("/")[0]), db=db)

    def close(self) -> None:
        if self._stop_localstack:
            subprocess.run([str(ROOT / "infra/localstack/ctl"), "stop"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            self._stop_localstack = False
        if self._valkey_ctl_port is not None:
            subprocess.run([str(ROOT / "infra/valkey/ctl"), "stop", str(self._valkey_ctl_port)],
                           env=self._ctl_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self._valkey_ctl_port = None
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs.clear()
        shutil.rmtree(self.tmp, ignore_errors=True)
