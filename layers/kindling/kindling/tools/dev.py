"""``kindling dev``: a project's own tasks running locally, with one command.

In this process: moto's server on 127.0.0.1 (:mod:`kindling.tools.localcloud`: no Docker,
no Java, no account), the jobs queue, its dead-letter queue and the results table made on
it as the project's template.yaml makes them, the local SQS worker
(:class:`kindling.triggers.sqs.loop.SqsWorker`) on the project's tasks, and the dashboard
(:mod:`kindling.tools.dashboard`). It prints the dashboard's address and an ``export``
line: a producer in another shell that runs it sends its jobs to the same queue
(``add.delay(1, 2)``, ``kindling enqueue add 1 2``). Ctrl-C stops the worker after its
batch, then the dashboard and moto.

``--burst`` enqueues nothing of the producer's: it runs what ``--seed`` sent, prints the
worker's counts and exits (the dashboard is not started).
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

DEFAULT_TASKS = "functions/worker/tasks.py"
"""Where ``kindling init`` puts a project's tasks."""
NAME = "kindling-dev"
"""The jobs queue's name (its dead-letter queue ``kindling-dev-dlq``, its table ``kindling-dev-results``)."""
VISIBILITY_S = 30
"""The queue's visibility timeout: a crashed run comes back this soon (retries wait for
``KINDLING_RETRY_DELAY`` instead)."""
MAX_RECEIVE_COUNT = 100
"""template.yaml's MaxReceiveCount default."""
POLL_S = 1
"""The worker's long poll: Ctrl-C takes at most about this long to be seen."""


def example_args(task, i: int) -> list:
    """Arguments for ``--seed``'s ``i``-th job of ``task``: one per parameter without a
    default, a string for a ``str`` annotation and the number ``i`` otherwise."""
    import inspect

    args = []
    for p in inspect.signature(task.fn).parameters.values():
        if p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY):
            continue
        args.append(f"example {i}" if p.annotation in (str, "str") else i)
    return args


def export_line(env: dict[str, str]) -> str:
    """``export K=V ...`` for a POSIX shell, values quoted."""
    return "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())


def main(ns) -> int:
    from kindling.core.registry import default_registry
    from kindling.shared.config import load_tasks
    from kindling.tools.exits import UsageError

    specs = ns.tasks or [DEFAULT_TASKS]
    if not ns.tasks and not Path(DEFAULT_TASKS).is_file():
        raise UsageError(f"no {DEFAULT_TASKS} here: run kindling dev in a project kindling init made, "
                         "or name the tasks with --tasks MODULE_OR_FILE")
    before = {t.name for t in default_registry}
    load_tasks(specs)
    own = [t for t in default_registry if t.name not in before]
    if ns.seed and not own:
        raise UsageError(f"--seed: {', '.join(specs)} registers no task")

    from kindling.tools.localcloud import aws_env, create_stack, start_moto, template_path

    profile = os.environ.get("AWS_PROFILE")  # start_moto drops it here; the producer's shell may hold it
    server, endpoint = start_moto(ns.port)
    try:
        made = create_stack(NAME, visibility_timeout=VISIBILITY_S, max_receive_count=MAX_RECEIVE_COUNT,
                            template=template_path())
        return _run(ns, own, endpoint, made, aws_env(endpoint), profile)
    except KeyboardInterrupt:  # Ctrl-C before the worker started: nothing to finish
        return 130
    finally:
        server.stop()


def _run(ns, own: list, endpoint: str, made: dict[str, str], aws: dict[str, str], profile: str | None) -> int:
    from kindling.producer.client import Client
    from kindling.triggers.sqs.loop import SqsWorker

    queue, table = made["queue_url"], made["table"]
    env = {**aws, "KINDLING_QUEUE_URL": queue, "KINDLING_TABLE": table,
           "KINDLING_DLQ_URL": made["dlq_url"]}
    os.environ.update(env)  # this process's producers (a task's follow-ups) go there too
    print(f"kindling dev: moto (embedded AWS) on {endpoint}: queue {queue}, table {table}", flush=True)
    print(f"tasks: {', '.join(t.name for t in own) or '(none registered)'}", flush=True)
    if ns.seed:
        first = own[0]
        handles = Client(queue_url=queue, table=table).enqueue_many(
            [(first.name, example_args(first, i), {}) for i in range(ns.seed)])
        print(f"seeded {len(handles)} {first.name} job(s): {', '.join(h.id for h in handles)}", flush=True)
    worker = SqsWorker(queue, table, wait=POLL_S)
    if ns.burst:
        counts = worker.run(burst=True)
        print(" ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "no jobs", flush=True)
        return 0
    dashboard = _start_dashboard(ns, made, [t.name for t in own])
    print("\nSend jobs from another shell (the producer reaches this moto through these):\n\n"
          f"  {export_line(env)}\n", flush=True)
    if profile:
        print("  (unset AWS_PROFILE there too: a profile's credentials would win over these)\n", flush=True)
    if own:
        task = own[0]
        module, fn, args = task.fn.__module__, task.fn.__name__, example_args(task, 1)
        path = getattr(sys.modules.get(module), "__file__", None)
        where = "" if not path or os.path.dirname(os.path.realpath(path)) == os.getcwd() else \
            f"cd {shlex.quote(os.path.relpath(os.path.dirname(path)))} && "
        print(f"then, e.g.:  {where}python -c 'from {module} import {fn}; "
              f"print({fn}.delay({', '.join(repr(a) for a in args)}).id)'\n"
              f"        or:  kindling enqueue {task.name} {' '.join(shlex.quote(str(a)) for a in args)}\n", flush=True)
    print("Ctrl-C stops the worker, the dashboard and moto.", flush=True)
    try:
        counts = worker.run()
    finally:
        dashboard.shutdown()
        dashboard.sampler.stop()
        dashboard.server_close()
    print("\nkindling dev: stopped; " + (" ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "no jobs"),
          flush=True)
    return 0


def _start_dashboard(ns, made: dict[str, str], tasks: list[str]):
    """The dashboard on 127.0.0.1:``--dashboard-port``, serving from a thread; its address
    and login printed."""
    import threading

    from kindling.shared import config
    from kindling.tools.dashboard import make_server
    from kindling.tools.ops import Stack

    stack = Stack(table=made["table"], queue_url=made["queue_url"], dlq_url=made["dlq_url"])
    server = make_server(stack, host="127.0.0.1", port=ns.dashboard_port, tasks=tasks,
                         token=config.get("KINDLING_DASHBOARD_TOKEN"))
    threading.Thread(target=server.serve_forever, name="kindling-dev-dashboard", daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    print(f"dashboard: {url}", flush=True)
    if server.auth.generated:
        print(f"  log in:  {url}login#token={server.auth.token}", flush=True)
    else:
        print("  log in with KINDLING_DASHBOARD_TOKEN", flush=True)
    sys.stdout.flush()
    return server
