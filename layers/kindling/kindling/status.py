"""Moved to :mod:`kindling.core.status`.

``kindling.status`` stays for the code that imports it.
"""

import sys

from kindling.core import status as _module
from kindling.core.status import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _module
