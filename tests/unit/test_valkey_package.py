"""kindling.valkey is a package of small modules; importing it stays as light as it was."""

import subprocess
import sys

import pytest

PROBE = """
import sys
import kindling.valkey as kv
print(sorted(m for m in sys.modules if m == "valkey" or m.startswith("kindling.valkey.")))
from kindling.valkey import (CHUNK, DEFAULT_GROUP, DEFAULT_STREAM, FIELD, Sent, StreamFull, StreamProducer,
                             StreamWorker, ValkeyResultStore, connect, default_consumer, drain)
print(sorted(m for m in sys.modules if m == "valkey" or m.startswith("valkey.")))
print(callable(drain) and drain.__module__, StreamWorker.__module__, CHUNK, DEFAULT_STREAM, DEFAULT_GROUP, FIELD)
"""


def test_importing_the_package_loads_no_module_until_a_name_is_used():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    before, client, names = out.splitlines()
    assert before == "[]"  # neither its modules nor the valkey client
    assert client == "[]"  # the client package loads at the first connection, not at import
    assert names == ("kindling.triggers.valkey.lambda_drain kindling.triggers.valkey.worker 500 kindling:jobs"
                     " kindling b'job'")


def test_an_unknown_name_is_an_attribute_error():
    import kindling.valkey

    with pytest.raises(AttributeError, match="run_worker"):  # moved to kindling.tools.cli
        kindling.valkey.run_worker  # noqa: B018
