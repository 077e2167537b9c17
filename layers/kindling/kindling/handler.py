"""Moved to :mod:`kindling.triggers.sqs.handler`.

``kindling.handler`` stays for the code that imports it.
"""

import sys

from kindling.triggers.sqs import handler as _module
from kindling.triggers.sqs.handler import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = _module
