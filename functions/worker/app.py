"""The worker function: Lambda calls ``app.handler`` with batches from the jobs queue.

kindling itself comes from the layer (/opt/python); this package holds only the tasks.
"""

import os

import tasks  # noqa: F401  (registers the example tasks)
from kindling.triggers.sqs.handler import LambdaWorker

if os.environ.get("KINDLING_PERIODIC_TASKS") == "true":  # the ticker rule is deployed
    import periodic  # noqa: F401

handler = LambdaWorker()
