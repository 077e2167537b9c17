"""Moved to :mod:`kindling.core.records`.

``kindling.records`` stays for the code that imports it.
"""

import sys

from kindling.core import records as _module
from kindling.core.records import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _module
