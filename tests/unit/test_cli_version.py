"""``kindling --version`` prints the version kindling/__init__.py declares, the one place it lives."""

import kindling
import pytest
from kindling.tools import cli


def test_kindling_version_prints_the_package_version_and_exits_zero(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"kindling {kindling.__version__}\n"
