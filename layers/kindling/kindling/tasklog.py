"""Moved to :mod:`kindling.shared.tasklog`.

``kindling.tasklog`` stays for the code that imports it.
"""

import sys

from kindling.shared import tasklog as _module
from kindling.shared.tasklog import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _module
