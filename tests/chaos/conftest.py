"""Fixtures of the chaos suite: a toxiproxy server (infra/toxiproxy), the session's private
valkey-server (tests/conftest.py), LocalStack (tests/support/localstack.py), and three proxies
the code under test talks through: workers -> Valkey, workers -> DynamoDB, producers -> SQS.

Each service is started if it is not already running, and stopped at the end of the session
if it was started for it. Everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import os

import pytest
from chaos_support import RESULTS, ROOT, TOXIPROXY_CTL, Net, ctl, free_port, summaries
from support import localstack
from toxiproxy import Toxiproxy


def pytest_terminal_summary(terminalreporter):
    if not summaries:
        return
    tr = terminalreporter
    tr.section("chaos: per fault")
    tr.write_line(f"{'fault':<22} {'jobs':>5} {'faults':>6} {'lost':>5} {'dups':>5} {'of them after SIGKILL':>21} "
                  f"{'drain s':>8}  problems")
    for s in summaries:
        tr.write_line(f"{s['fault']:<22} {s['jobs']:>5} {s['faults_injected']:>6} {s['lost']:>5} "
                      f"{s['duplicate_executions']:>5} {s['duplicates_after_kill']:>21} {s['drain_s']!s:>8}  "
                      + ("; ".join(p[:100] for p in s["problems"]) or "none"))
    tr.write_line(f"(JSON per fault in {RESULTS.relative_to(ROOT)}/)")


# -- services ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def toxiproxy() -> Toxiproxy:
    """The toxiproxy API: on KINDLING_TOXIPROXY_PORT if a server answers there, else a server
    of our own on a free port."""
    ctl(TOXIPROXY_CTL, "install", timeout=900)
    port = int(os.environ.get("KINDLING_TOXIPROXY_PORT") or free_port())
    api = Toxiproxy(f"http://127.0.0.1:{port}")
    started = not api.ready()
    if started:
        ctl(TOXIPROXY_CTL, "start", str(port), timeout=60)
    try:
        yield api
    finally:
        if started:
            ctl(TOXIPROXY_CTL, "stop", str(port), timeout=60)


@pytest.fixture(scope="session")
def chaos_valkey_port(valkey_server) -> int:
    """The session's own valkey-server (tests/conftest.py): no persistence, loopback only."""
    return valkey_server.port


@pytest.fixture(scope="session")
def chaos_localstack() -> dict[str, str]:
    """LocalStack on KINDLING_LOCALSTACK_PORT (default 4566), reused if already healthy: the
    AWS_* variables that point at it (not put in os.environ)."""
    with localstack.running() as env:
        yield env


# -- the proxies ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def chaos_net(toxiproxy, chaos_valkey_port, chaos_localstack) -> Net:
    from urllib.parse import urlsplit

    tag = os.getpid()  # distinct names if two sessions share one toxiproxy
    localstack = urlsplit(chaos_localstack["AWS_ENDPOINT_URL"])
    upstream = f"127.0.0.1:{localstack.port}"
    proxies = [
        toxiproxy.create(f"kindling-valkey-{tag}", f"127.0.0.1:{free_port()}", f"127.0.0.1:{chaos_valkey_port}"),
        toxiproxy.create(f"kindling-dynamodb-{tag}", f"127.0.0.1:{free_port()}", upstream),
        toxiproxy.create(f"kindling-sqs-{tag}", f"127.0.0.1:{free_port()}", upstream),
    ]
    try:
        yield Net(*proxies, valkey_direct=f"redis://127.0.0.1:{chaos_valkey_port}/0", aws_env=chaos_localstack)
    finally:
        for proxy in proxies:
            proxy.delete()


@pytest.fixture
def net(chaos_net) -> Net:
    """The proxies, clean (enabled, no toxics) before and after each test."""
    for proxy in chaos_net.proxies:
        proxy.clear()
    yield chaos_net
    for proxy in chaos_net.proxies:
        proxy.clear()
