"""Moved to :mod:`kindling.tools.testing`.

``kindling.testing`` stays for the code that imports it.
"""

import sys

from kindling.tools import testing as _module
from kindling.tools.testing import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _module
