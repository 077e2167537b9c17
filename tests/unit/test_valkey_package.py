"""kindling.valkey is a package of small modules, each name loaded from its own when first used."""

import pytest


def test_each_name_comes_from_the_module_that_defines_it():
    """(What importing the package loads: tests/unit/test_import_budgets.py.)"""
    from kindling.valkey import CHUNK, DEFAULT_GROUP, DEFAULT_STREAM, FIELD, StreamWorker, drain

    assert (drain.__module__, StreamWorker.__module__) == ("kindling.triggers.valkey.lambda_drain",
                                                           "kindling.triggers.valkey.worker")
    assert (CHUNK, DEFAULT_STREAM, DEFAULT_GROUP, FIELD) == (500, "kindling:jobs", "kindling", b"job")


def test_an_unknown_name_is_an_attribute_error():
    import kindling.valkey

    with pytest.raises(AttributeError, match="run_worker"):  # moved to kindling.tools.cli
        kindling.valkey.run_worker  # noqa: B018
