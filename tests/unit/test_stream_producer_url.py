"""A producer finds the deployment's Valkey as the worker and the command line do: the ``url``
given, else ``KINDLING_VALKEY_URL`` (docs/configuration.md), else the secret
``KINDLING_VALKEY_URL_SECRET`` names. Constructing one opens no socket."""

from __future__ import annotations

import pytest
from kindling.core.errors import KindlingError
from kindling.valkey import StreamProducer


@pytest.fixture(autouse=True)
def no_deployment(monkeypatch):
    for name in ("KINDLING_VALKEY_URL", "KINDLING_VALKEY_URL_SECRET", "KINDLING_TABLE", "KINDLING_RESULTS",
                 "KINDLING_SIGNING_SECRET", "KINDLING_WORKER_FUNCTION"):
        monkeypatch.delenv(name, raising=False)


def test_a_producer_without_a_url_takes_kindling_valkey_url(monkeypatch):
    monkeypatch.setenv("KINDLING_VALKEY_URL", "redis://127.0.0.1:6390/3")
    assert StreamProducer().url == "redis://127.0.0.1:6390/3"
    assert StreamProducer(stream="reports").url == "redis://127.0.0.1:6390/3"


def test_a_url_given_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("KINDLING_VALKEY_URL", "redis://127.0.0.1:6390/3")
    assert StreamProducer("redis://127.0.0.1:6391/0").url == "redis://127.0.0.1:6391/0"


def test_neither_a_url_nor_the_variable_says_which_to_set():
    with pytest.raises(KindlingError, match="KINDLING_VALKEY_URL"):
        StreamProducer()
