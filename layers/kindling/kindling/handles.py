"""Moved to :mod:`kindling.producer.handles`.

``kindling.handles`` stays for the code that imports it.
"""

import sys

from kindling.producer import handles as _module
from kindling.producer.handles import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _module
