"""A module missing from a Lambda function is named for the layer that ships it: the Valkey
stream support's modules for KindlingValkeyLayer; any other missing module is left as it is."""

from __future__ import annotations

import pytest
from kindling.core.errors import LayerMissing, missing_layer


@pytest.mark.parametrize("name", ["kindling.triggers.valkey", "kindling.drivers.valkey", "kindling.stores.valkey",
                                  "kindling.producer.valkey", "kindling.shared.valkey.connection"])
def test_a_missing_valkey_module_names_the_valkey_layer_and_the_settings_that_attach_it(name):
    error = missing_layer(ModuleNotFoundError(f"No module named {name!r}", name=name))
    assert isinstance(error, LayerMissing) and isinstance(error, ImportError)
    assert name in str(error) and "KindlingValkeyLayer" in str(error) and "ValkeyUrl" in str(error)


@pytest.mark.parametrize("name", ["kindling.engine.runner", "valkey", "orjson", "tasks.valkey", None])
def test_any_other_missing_module_is_raised_as_it_is(name):
    exc = ModuleNotFoundError("No module named ...", name=name)
    assert missing_layer(exc) is exc
