"""The differential drawer talks to loopback stubs only: a test here that connects anywhere
else fails at once (botocore's requests to AWS are stopped before they are sent)."""

from __future__ import annotations

import logging

import pytest
from differential import stub

# botocore logs every step at DEBUG; under pytest's capture that formatting is most of the time
logging.getLogger("botocore").setLevel(logging.WARNING)


@pytest.fixture(autouse=True)
def loopback_only():
    with stub.loopback_only() as attempts:
        yield
    assert attempts == [], f"connections off loopback: {attempts}"
