"""Moved to :mod:`kindling.producer.client`.

``kindling.client`` stays for the code that imports it.
"""

import sys

from kindling.producer import client as _module
from kindling.producer.client import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _module
