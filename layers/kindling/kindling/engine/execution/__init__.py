"""How the jobs of a batch are run, one strategy per module, as dramatiq keeps one policy per file.

:meth:`kindling.engine.runner.Runner.execute` runs a batch's plain synchronous jobs itself, one by
one on the calling thread under SIGALRM's time limit (:class:`kindling.core.batch.Alarm`):
that is the Lambda worker's every batch, so it loads nothing here. The other strategies are
imported only by a batch that needs one:

- :mod:`~kindling.engine.execution.threaded`: synchronous jobs in a thread pool (``threads`` > 1,
  long-lived workers)
- :mod:`~kindling.engine.execution.asyncrun`: async tasks on the runner's event loop
- :mod:`~kindling.engine.execution.fifo`: FIFO message groups, one job at a time in batch order

Each is a function of the runner's public steps (:class:`kindling.core.batch.Steps`: start,
finish, defer a job...), which it calls: a strategy decides only when and where each job runs.
"""
