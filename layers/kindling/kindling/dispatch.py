"""Moved to :mod:`kindling.producer.dispatch`.

``kindling.dispatch`` stays for the code that imports it.
"""

import sys

from kindling.producer import dispatch as _module
from kindling.producer.dispatch import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _module
