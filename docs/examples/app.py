from kindling.handler import LambdaWorker
import tasks  # noqa: F401  (registers the tasks)
handler = LambdaWorker()
