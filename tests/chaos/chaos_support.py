"""What the chaos suite's fixtures, runs and report share: paths, service control, the
proxies' addresses (:class:`Net`) and the per-fault summaries."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from support import ROOT, ctl, free_port
from toxiproxy import Proxy

__all__ = ["RESULTS", "ROOT", "TOXIPROXY_CTL", "Net", "ctl", "free_port", "record_summary", "summaries"]

TOXIPROXY_CTL = ROOT / "infra/toxiproxy/ctl"
RESULTS = Path(__file__).resolve().parent / ".results"

summaries: list[dict] = []


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
