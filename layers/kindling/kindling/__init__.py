"""kindling: a cold-start-optimized job runner for AWS Lambda.

The worker side needs only this::

    from kindling import task, current_job

    @task(timeout=30)
    def resize(key: str) -> str: ...

Producers use :class:`kindling.producer.client.Client` (boto3, outside Lambda); chains and groups
are ``chain``, ``group`` and ``task.s()`` (:mod:`kindling.producer.canvas`). Importing this
package loads no AWS SDK and opens no connection.
"""

import os as _os
import sys as _sys

# An add-on layer (KindlingValkeyLayer) holds more of this package's folders under its own
# kindling/, with no __init__: Lambda extracts every layer into /opt/python, where the folders
# merge; where layers stay apart on sys.path (LocalStack, a test's layer directories), those
# parts join the package here. A kindling/ with an __init__ of its own is another install, never
# mixed in.
for _entry in _sys.path:
    _part = _os.path.join(_entry or ".", "kindling")
    if (_part not in __path__ and _os.path.isdir(_part) and not _os.path.exists(_os.path.join(_part, "__init__.py"))
            and not _os.path.exists(_os.path.join(_part, "__init__.pyc"))):
        __path__.append(_part)

from kindling.core.batch import current_job  # noqa: E402
from kindling.core.errors import JobFailed, KindlingError, Retry  # noqa: E402
from kindling.core.policy import Backoff  # noqa: E402
from kindling.core.registry import Registry, Task, on_dead, on_failure, on_success, task  # noqa: E402

__all__ = ["Backoff", "Client", "JobFailed", "KindlingError", "Registry", "Retry", "Signature", "Task", "chain",
           "chord", "current_job", "group", "on_dead", "on_failure", "on_success", "task"]
__version__ = "0.1.0"

TYPE_CHECKING = False
if TYPE_CHECKING:  # what __getattr__ loads on first use, as type checkers see it
    from kindling.producer.canvas import Signature, chain, chord, group
    from kindling.producer.client import Client

_CANVAS = frozenset({"Signature", "chain", "chord", "group"})


def __getattr__(name: str):
    if name == "Client":  # boto3 is loaded only by programs that enqueue
        from kindling.producer.client import Client

        return Client
    if name in _CANVAS:  # chains and groups: loaded by the programs that build them
        from kindling.producer import canvas

        return getattr(canvas, name)
    raise AttributeError(f"module 'kindling' has no attribute {name!r}")
