"""What the chaos suite's fixtures, runs and report share: paths, service control, the
proxies' addresses (:class:`Net`) and the per-fault summaries."""

from __future__ import annotations

import json
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from toxiproxy import Proxy

ROOT = Path(__file__).resolve().parents[2]
TOXIPROXY_CTL = ROOT / "infra/toxiproxy/ctl"
VALKEY_CTL = ROOT / "infra/valkey/ctl"
LOCALSTACK_CTL = ROOT / "infra/localstack/ctl"
RESULTS = Path(__file__).resolve().parent / ".results"

summaries: list[dict] = []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ctl(path: Path, *args: str, timeout: float = 300) -> str:
    done = subprocess.run([str(path), *args], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{path.relative_to(ROOT)} {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout.strip()


def record_summary(summary: dict) -> None:
    """Keep a fault's figures for the end-of-session table and write them to .results/<fault>.json."""
    summaries.append(summary)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{summary['fault']}.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")


@dataclass
class Net:
    """The proxies and the addresses behind them.

    ``valkey``, ``dynamodb``, ``sqs``: the proxies. ``*_direct`` addresses bypass them (the
    test's own checks use those); ``*_proxied`` ones go through them (the code under test).
    """

    valkey: Proxy
    dynamodb: Proxy
    sqs: Proxy
    valkey_direct: str
    aws_env: dict[str, str]

    @property
    def proxies(self) -> tuple[Proxy, ...]:
        return (self.valkey, self.dynamodb, self.sqs)

    @property
    def valkey_proxied(self) -> str:
        return f"redis://{self.valkey.listen}/0"

    @property
    def aws_direct(self) -> str:
        return self.aws_env["AWS_ENDPOINT_URL"]

    @property
    def dynamodb_proxied(self) -> str:
        return f"http://{self.dynamodb.listen}"

    @property
    def sqs_proxied(self) -> str:
        return f"http://{self.sqs.listen}"

    def aws_client(self, service: str, endpoint_url: str | None = None):
        """A boto3 client for LocalStack, straight (default) or through ``endpoint_url``."""
        import boto3

        return boto3.client(service, endpoint_url=endpoint_url or self.aws_direct,
                            region_name=self.aws_env.get("AWS_DEFAULT_REGION", "us-east-1"),
                            aws_access_key_id=self.aws_env["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=self.aws_env["AWS_SECRET_ACCESS_KEY"])
