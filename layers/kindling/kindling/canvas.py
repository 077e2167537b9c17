"""Moved to :mod:`kindling.producer.canvas`.

``kindling.canvas`` stays for the code that imports it.
"""

import sys

from kindling.producer import canvas as _module
from kindling.producer.canvas import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _module
