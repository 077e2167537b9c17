"""Fixtures the service drawer's tests share."""

from __future__ import annotations

import pytest


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    """Record the AWS client's backoff delays instead of sleeping them."""
    from kindling.drivers import aws

    delays: list[float] = []
    monkeypatch.setattr(aws.errors, "sleep", delays.append)
    return delays
