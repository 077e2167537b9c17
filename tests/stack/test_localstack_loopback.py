"""LocalStack and what it starts listen on the IPv4 loopback address only: tests on this machine
may bind nothing else. Checked on the kernel's socket tables, so whatever LocalStack's config
says, a socket on every interface (0.0.0.0 or ::) fails the test.

Two sockets used to: the gateway (LocalStack's twisted server ignores GATEWAY_LISTEN's host) and
DynamoDB Local (no option for its host); see the plugin's ``gateway_binds_its_host`` hook and
infra/localstack/dynamodb/agent/DdbLocalLoader.java.
"""

from __future__ import annotations

import ipaddress
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import localstack as _localstack

pytestmark = pytest.mark.localstack

LISTEN = "0A"  # TCP state in /proc/net/tcp{,6}


@dataclass(frozen=True)
class Listener:
    pid: int
    command: str
    address: ipaddress.IPv4Address | ipaddress.IPv6Address
    port: int

    def __str__(self) -> str:
        return f"{self.command}[{self.pid}] on {self.address}:{self.port}"


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as /proc/net/tcp{,6} writes it: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    address = ipaddress.ip_address(words)
    # a dual-stack socket bound to 127.0.0.1 (Java's default) shows as ::ffff:127.0.0.1
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped or address


def _listening_sockets(pid: int) -> dict[int, tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """Inode -> (address, port) of every TCP socket in LISTEN state in ``pid``'s network namespace."""
    sockets = {}
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], int(fields[9])
            if state == LISTEN:
                hex_address, hex_port = local.split(":")
                sockets[inode] = (_address(hex_address), int(hex_port, 16))
    return sockets


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):  # exited meanwhile
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    return children


def _listeners_of_tree(root: int) -> list[Listener]:
    """The TCP sockets in LISTEN state held by ``root`` and its descendants."""
    sockets = _listening_sockets(root)
    children = _children()
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            inodes = _socket_inodes(pid)
            command = Path(f"/proc/{pid}/comm").read_text().strip()
        except FileNotFoundError:  # exited meanwhile
            continue
        found += [Listener(pid, command, *sockets[i]) for i in sorted(inodes & sockets.keys())]
    return found


def _gateway_pid(port: int) -> int:
    """The process holding the socket that listens on ``port`` (LocalStack's gateway)."""
    inodes = {inode for inode, (_, p) in _listening_sockets(os.getpid()).items() if p == port}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if _socket_inodes(int(entry.name)) & inodes:
                    return int(entry.name)
            except OSError:  # exited meanwhile, or someone else's
                continue
    raise AssertionError(f"no process of ours listens on port {port}")


def test_localstack_and_dynamodb_local_listen_on_ipv4_loopback_only(localstack):
    import boto3

    # DynamoDB Local starts on LocalStack's first DynamoDB request: make sure it runs, and works
    dynamodb = boto3.client(
        "dynamodb",
        endpoint_url=localstack["AWS_ENDPOINT_URL"],
        region_name=localstack["AWS_REGION"],
        aws_access_key_id=localstack["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=localstack["AWS_SECRET_ACCESS_KEY"],
    )
    table = f"loopback-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(
        TableName=table,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
    )
    try:
        dynamodb.put_item(TableName=table, Item={"id": {"S": "a"}, "v": {"N": "1"}})
        assert dynamodb.get_item(TableName=table, Key={"id": {"S": "a"}})["Item"]["v"] == {"N": "1"}
    finally:
        dynamodb.delete_table(TableName=table)

    port = _localstack.port()
    listeners = _listeners_of_tree(_gateway_pid(port))
    print("\n".join(map(str, listeners)))

    assert any(s.port == port for s in listeners), listeners
    assert any(s.command == "java" for s in listeners), f"DynamoDB Local is not listening: {listeners}"
    loopback = ipaddress.IPv4Address("127.0.0.1")
    elsewhere = [str(s) for s in listeners if s.address != loopback]
    assert not elsewhere, f"listening beyond 127.0.0.1: {elsewhere}"
