"""Moved to :mod:`kindling.core.errors`.

``kindling.errors`` stays for the code that imports it.
"""

import sys

from kindling.core import errors as _module
from kindling.core.errors import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _module
