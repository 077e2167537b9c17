"""The ``kindling`` command: run a worker, send jobs, read outcomes, run the demo."""

from __future__ import annotations

import argparse
import os
import sys

from kindling.shared import config
from kindling.shared.config import load_tasks, valkey_url  # where they live; imported from here too

# `kindling worker` starts like the Lambda handler: it imports only what its path uses
# (no pathlib, no shutil, no subprocess unless --processes > 1, no parsers for the other
# commands). argparse is kept.


def _arg(text: str):
    """A positional job argument: JSON if it parses (``3``, ``"x"``, ``[1]``), else a string."""
    from kindling.core import codec

    try:
        return codec.loads(text)
    except ValueError:
        return text


def cmd_worker(ns) -> int:
    from kindling.drivers.aws.proxy import check_environment

    check_environment()  # a proxy kindling cannot use is refused before anything starts
    if ns.valkey:
        _keep_password_off_command_line(ns)  # before the tasks load: it may replace this process
    ns.valkey = valkey_url(ns)
    load_tasks(ns.tasks)
    if ns.valkey:
        return run_valkey_worker(ns)
    from kindling.tools.exits import need
    from kindling.triggers.sqs.loop import SqsWorker

    worker = SqsWorker(need(ns.queue_url, "--queue-url", "KINDLING_QUEUE_URL"),
                       need(ns.table, "--table", "KINDLING_TABLE"), wait=ns.wait, concurrency=ns.concurrency,
                       threads=ns.concurrency)
    counts = worker.run(burst=ns.burst)
    _print_counts(ns, counts)
    return 0


def _print_counts(ns, counts: dict) -> None:
    """The worker's closing summary: ``status=count`` pairs, or with ``--json`` an object."""
    if getattr(ns, "json", False):
        from kindling.core import codec

        print(codec.dumps(dict(sorted(counts.items()))), flush=True)
    else:
        print(" ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "no jobs", flush=True)


def worker_argv(ns, processes: int) -> list[str]:
    """A ``kindling worker`` command line doing what ``ns`` says, without the Valkey URL:
    the process it starts reads that from ``KINDLING_VALKEY_URL``."""
    argv = [sys.executable, "-m", "kindling.tools.cli", "worker", "--stream", ns.stream,
            "--concurrency", str(ns.concurrency), "--processes", str(processes)]
    for spec in ns.tasks:
        argv += ["--tasks", spec]
    if ns.table:
        argv += ["--table", ns.table]
    if ns.burst:
        argv.append("--burst")
    if getattr(ns, "json", False):
        argv.append("--json")
    return argv


def _keep_password_off_command_line(ns) -> None:
    """Any user can read a process's command line (``ps``, ``/proc/<pid>/cmdline``), so a
    password given with ``--valkey`` is warned about and, where the process can, moved:
    this process replaces itself (``execve``, same pid) with one started by
    :func:`worker_argv`, the URL in ``KINDLING_VALKEY_URL``, which only the same user (and
    root) can read. Until then, a fraction of a second, the password is on show. Worker
    processes started for ``--processes`` get the URL the same way, never on argv."""
    from urllib.parse import urlsplit

    try:
        password = urlsplit(ns.valkey).password
    except ValueError:
        password = None
    if not password:
        return
    print("kindling: warning: the --valkey URL holds a password, which any user can read on the command line "
          "(ps); pass it in KINDLING_VALKEY_URL or --valkey-url-file instead", file=sys.stderr, flush=True)
    on_own_argv = any(arg == ns.valkey or arg.endswith("=" + ns.valkey) for arg in sys.argv[1:])
    if on_own_argv and hasattr(os, "execve"):
        sys.stdout.flush()
        try:
            os.execve(sys.executable, worker_argv(ns, ns.processes), dict(os.environ, KINDLING_VALKEY_URL=ns.valkey))
        except OSError as exc:
            print(f"kindling: warning: could not restart without the password on the command line: {exc}",
                  file=sys.stderr, flush=True)


def valkey_worker(ns):
    """The :class:`kindling.valkey.StreamWorker` for ``kindling worker --valkey URL``, tuned by
    the environment (:func:`kindling.shared.config.valkey_worker_options`); with
    ``KINDLING_RESULTS=valkey`` outcomes go to :class:`kindling.valkey.ValkeyResultStore`,
    kept as long as the records say (default: DynamoDB ``--table``).
    """
    from kindling.stores.valkey import ValkeyResultStore
    from kindling.triggers.valkey.worker import StreamWorker

    options = config.valkey_worker_options()
    store = None
    if config.get("KINDLING_RESULTS") == "valkey":  # results in Valkey instead of DynamoDB
        store = ValkeyResultStore(ns.valkey, int(options["ttl_days"] * 86_400))  # as the runner counts it
    elif not ns.table:
        from kindling.tools.exits import UsageError

        raise UsageError("--table is required: pass --table or set KINDLING_TABLE (or KINDLING_RESULTS=valkey)")
    return StreamWorker(ns.valkey, ns.table, store=store, stream=ns.stream, concurrency=ns.concurrency,
                        threads=ns.concurrency, verifier=_verifier(), **options)


def _verifier():
    """Signed jobs when ``KINDLING_SIGNING_SECRET`` names the keys' secret (else ``None``)."""
    from kindling.shared.signed import from_env

    return from_env()


def run_valkey_worker(ns) -> int:
    """``kindling worker --valkey URL [--stream S] [--processes N] [--burst]`` (or the URL
    from ``--valkey-url-file`` or ``KINDLING_VALKEY_URL``).

    With ``--processes N`` this process runs one worker (:func:`valkey_worker`) and starts
    N-1 more (:func:`worker_argv`, the URL in their environment), forwarding SIGTERM/SIGINT
    to them.
    """
    import signal

    children = []
    if getattr(ns, "processes", 1) > 1:
        import subprocess

        env = dict(os.environ, KINDLING_VALKEY_URL=ns.valkey)
        children = [subprocess.Popen(worker_argv(ns, 1), env=env) for _ in range(ns.processes - 1)]
    worker = valkey_worker(ns)
    stop_worker = worker.stop
    stopped = []

    def stop(*_args):
        stopped.append(True)
        stop_worker()
        for c in children:
            if c.poll() is None:
                c.send_signal(signal.SIGTERM)

    worker.stop = stop  # type: ignore[method-assign]
    counts = worker.run(burst=ns.burst)
    rc = 0
    for c in children:
        code = c.wait()
        if code == -signal.SIGTERM and stopped:
            code = 0  # stopped by our SIGTERM before its worker ran (and read) anything
        rc = code or rc
    _print_counts(ns, counts)
    return rc


def _kwargs(text: str | None) -> dict:
    """``--kwargs``: a JSON object, or a :class:`~kindling.tools.exits.UsageError` saying how to write one."""
    from kindling.core import codec
    from kindling.tools.exits import UsageError

    if not text:
        return {}
    try:
        value = codec.loads(text)
    except ValueError as exc:
        raise UsageError(f"--kwargs is not valid JSON ({' '.join(str(exc).split())}): give a JSON object, "
                         """e.g. --kwargs '{"width": 64}'""") from None
    if not isinstance(value, dict):
        raise UsageError(f"--kwargs must be a JSON object, got {type(value).__name__}: "
                         """e.g. --kwargs '{"width": 64}'""")
    return value


def cmd_enqueue(ns) -> int:
    from kindling.core import codec
    from kindling.producer.client import Call, Client
    from kindling.tools.exits import need

    kwargs = _kwargs(ns.kwargs)
    if not ns.queue:  # a named queue is resolved from KINDLING_QUEUES instead
        need(ns.queue_url, "--queue-url", "KINDLING_QUEUE_URL")
    client = Client(queue_url=ns.queue_url, table=ns.table)
    handle = client.send(Call(ns.task, [_arg(a) for a in ns.args], kwargs, delay=ns.delay,
                              job_id=ns.job_id, max_attempts=ns.max_attempts, timeout=ns.timeout,
                              queue=ns.queue))
    print(codec.dumps({"id": handle.id, "task": ns.task}) if ns.json else handle.id)
    return 0


def cmd_status(ns) -> int:
    from kindling.core import codec
    from kindling.core.status import DEAD, REJECTED, REVOKED
    from kindling.producer.client import Client
    from kindling.tools.exits import JOB_FAILED, need

    record = Client(table=need(ns.table, "--table", "KINDLING_TABLE"), queue_url="-").record(ns.job_id)
    if ns.json:
        print(codec.dumps({"id": ns.job_id, "record": record}))
    elif record:
        from kindling.tools.ops import fmt  # the record field by field, as `kindling jobs show` prints it

        print(fmt.job_detail({**record, "id": ns.job_id}, width=fmt.width()))
    else:
        print(f"{ns.job_id}: no outcome recorded yet (queued or running)")
    if record is None:
        return 1
    return JOB_FAILED if record.get("status") in (DEAD, REJECTED, REVOKED) else 0


def cmd_result(ns) -> int:
    from kindling.core import codec
    from kindling.producer.client import Client
    from kindling.tools.exits import need

    # JobFailed exits 3 and a timeout 4, through main (kindling.tools.exits)
    value = Client(table=need(ns.table, "--table", "KINDLING_TABLE"), queue_url="-").result(
        ns.job_id, timeout=ns.timeout)
    print(codec.dumps({"id": ns.job_id, "result": value}) if ns.json else codec.dumps(value))
    return 0


def cmd_demo(ns) -> int:
    from kindling.tools.demo import main as demo

    return demo(jobs=ns.jobs, cloud=ns.cloud)


def cmd_dev(ns) -> int:
    from kindling.tools.dev import main as dev

    return dev(ns)


def cmd_init(ns) -> int:
    from kindling.tools.scaffold import cmd_init

    return cmd_init(ns)


def _help_formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's formatter, told the terminal width: left to find it, it imports shutil (~5 ms)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 80
    return argparse.HelpFormatter(prog, width=columns - 2)


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line; given ``command="worker"``, only that command's parser (its start is cold-path)."""
    env = config.get
    p = argparse.ArgumentParser(prog="kindling", description="A cold-start-optimized job runner for AWS Lambda.",
                                formatter_class=_help_formatter)
    from kindling import __version__  # loaded already with the package: the worker's start pays nothing

    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--debug", action="store_true",
                   help="show the traceback of an error (default: one line; also KINDLING_DEBUG=1)")
    sub = p.add_subparsers(dest="command", required=True)

    w = sub.add_parser("worker", help="run jobs from SQS (or a Valkey stream) outside Lambda",
                       description="Long-poll the jobs queue and run batches with the same runner as Lambda.",
                       formatter_class=_help_formatter)
    w.add_argument("--tasks", action="append", default=[], metavar="MODULE_OR_FILE",
                   help="module or .py file defining the tasks (repeatable)")
    w.add_argument("--queue-url", default=env("KINDLING_QUEUE_URL"))
    w.add_argument("--table", default=env("KINDLING_TABLE"))
    w.add_argument("--wait", type=int, default=20, help="long-poll seconds (default 20)")
    w.add_argument("--concurrency", type=int, default=16,
                   help="jobs at once: async ones, and sync ones in threads (default 16)")
    w.add_argument("--burst", action="store_true", help="stop when the queue is drained")
    w.add_argument("--json", action="store_true", help="print the closing counts as a JSON object")
    source = w.add_mutually_exclusive_group()
    source.add_argument("--valkey", "--valkey-url", dest="valkey", metavar="URL",
                        help="consume a Valkey stream instead of SQS (redis://, rediss://; default: "
                             "KINDLING_VALKEY_URL). Any user can read a command line: give a URL with a "
                             "password in KINDLING_VALKEY_URL or --valkey-url-file")
    source.add_argument("--valkey-url-file", metavar="PATH", help="read the Valkey URL from this file")
    source.add_argument("--valkey-url-secret", metavar="ARN",
                        help="read the Valkey URL from this Secrets Manager secret or SSM SecureString "
                             "parameter at start (default: KINDLING_VALKEY_URL_SECRET)")
    from kindling.core.valkey.keys import DEFAULT_STREAM  # no imports of its own

    w.add_argument("--stream", default=DEFAULT_STREAM, help="Valkey stream (with --valkey)")
    w.add_argument("--processes", type=int, default=1, help="worker processes (with --valkey)")
    w.set_defaults(fn=cmd_worker)
    if command == "worker":
        return p

    e = sub.add_parser("enqueue", help="send one job", description="Send one job to the jobs queue.")
    e.add_argument("task")
    e.add_argument("args", nargs="*", help="positional arguments (JSON if they parse, else strings)")
    e.add_argument("--kwargs", help="keyword arguments as a JSON object")
    e.add_argument("--delay", type=int, default=0, help="seconds before it may run (0-900)")
    e.add_argument("--job-id")
    e.add_argument("--max-attempts", type=int)
    e.add_argument("--timeout", type=float)
    e.add_argument("--queue", help="a named queue, resolved from KINDLING_QUEUES (default: the jobs queue)")
    e.add_argument("--queue-url", default=env("KINDLING_QUEUE_URL"))
    e.add_argument("--table", default=env("KINDLING_TABLE"))
    e.add_argument("--json", action="store_true", help='print {"id": ..., "task": ...}')
    e.set_defaults(fn=cmd_enqueue)

    sc = sub.add_parser("schedules", help="print the periodic tasks the code declares",
                        description="The tasks declared with schedule=..., their expressions and next fire times "
                                    "(UTC); the ticker rule (template PeriodicTasks=true) enqueues them.")
    sc.add_argument("--tasks", action="append", default=[], metavar="MODULE_OR_FILE",
                    help="where the tasks are defined (repeatable)")
    sc.add_argument("--next", type=int, default=3, help="fire times to show per task (default 3)")
    sc.add_argument("--json", action="store_true", help="a JSON array of {task, schedule, next: [epoch ms]}")
    sc.set_defaults(fn=cmd_schedules)

    s = sub.add_parser("status", help="print a job's recorded outcome", description="Print a job's record.")
    s.add_argument("job_id")
    s.add_argument("--table", default=env("KINDLING_TABLE"))
    s.add_argument("--json", action="store_true", help='print {"id": ..., "record": ... or null}')
    s.set_defaults(fn=cmd_status)

    r = sub.add_parser("result", help="wait for a job's result",
                       description="Wait for a job's final outcome; print its result or its error.")
    r.add_argument("job_id")
    r.add_argument("--timeout", type=float, default=30.0)
    r.add_argument("--table", default=env("KINDLING_TABLE"))
    r.add_argument("--json", action="store_true", help='print {"id": ..., "result": ...}')
    r.set_defaults(fn=cmd_result)

    d = sub.add_parser("demo", help="run the whole path on a local cloud",
                       description="Bring up a local AWS, deploy, enqueue jobs (some failing), drain, report.")
    d.add_argument("--jobs", type=int, default=300)
    d.add_argument("--cloud", choices=["moto", "localstack"], default=env("KINDLING_DEMO_CLOUD"))
    d.set_defaults(fn=cmd_demo)

    dv = sub.add_parser("dev", help="run the project's tasks locally: embedded AWS, worker, dashboard",
                        description="Start moto's embedded AWS in this process (no Docker, no account), make the "
                                    "jobs queue, its dead-letter queue and the results table as template.yaml does, "
                                    "and run the worker on the project's tasks and the dashboard, until Ctrl-C. It "
                                    "prints an export line that points producers in another shell at the same "
                                    "queue. Needs moto's server: pip install 'kindling-jobs[demo]'.",
                        formatter_class=_help_formatter)
    dv.add_argument("--tasks", action="append", default=[], metavar="MODULE_OR_FILE",
                    help="module or .py file defining the tasks (repeatable; default functions/worker/tasks.py)")
    dv.add_argument("--port", type=int, default=0, help="moto's port on 127.0.0.1 (default: a free one)")
    dv.add_argument("--dashboard-port", type=int, default=8080, help="the dashboard's port on 127.0.0.1 "
                                                                     "(default 8080; 0: a free one)")
    dv.add_argument("--seed", type=int, default=0, metavar="N",
                    help="enqueue N example jobs of the first task at start, so the dashboard shows some")
    dv.add_argument("--burst", "--once", action="store_true", dest="burst",
                    help="run the jobs already queued (--seed's), print the counts and exit; no dashboard")
    dv.set_defaults(fn=cmd_dev)

    i = sub.add_parser("init", help="write a new project: template, worker, layer, tests",
                       description="Write a SAM application running your tasks with this kindling into DIR; "
                                   "--upgrade rewrites the files kindling owns (template.yaml, the layer's "
                                   "Makefile) with this release's and prints the diff.")
    i.add_argument("dir", metavar="DIR")
    i.add_argument("--force", action="store_true", help="write into a non-empty DIR, keeping every file there")
    i.add_argument("--upgrade", action="store_true", help="take this release's template into the project DIR")
    i.add_argument("--iac", choices=["sam", "cdk"], default="sam",
                   help="deploy with SAM (template.yaml, the default) or the AWS CDK (app.py and cdk.json "
                        "using kindling.tools.cdk.KindlingWorker; needs kindling-jobs[cdk])")
    i.set_defaults(fn=cmd_init)

    from kindling.tools.ops.cli import add_parsers  # the operator's commands: jobs, dlq, dashboard

    add_parsers(sub, env)
    return p


def cmd_schedules(ns) -> int:
    import time

    from kindling.core.registry import default_registry

    load_tasks(ns.tasks)
    rows, found = [], []
    now = int(time.time() * 1000)
    for t in sorted(default_registry, key=lambda t: t.name):
        if t.schedule is None:
            continue
        fires, start = [], now
        while len(fires) < ns.next and start < now + 400 * 86_400_000:  # look a year ahead at most
            fires += t.schedule.fires(start, start + 7 * 86_400_000)[: ns.next - len(fires)]
            start += 7 * 86_400_000
        when = ", ".join(time.strftime("%Y-%m-%d %H:%M", time.gmtime(f / 1000)) for f in fires) or "never"
        rows.append((t.name, t.schedule.expression, when))
        found.append({"task": t.name, "schedule": t.schedule.expression, "next": fires})
    if ns.json:
        from kindling.core import codec

        print(codec.dumps(found))
        return 0
    if not rows:
        print("no scheduled tasks")
        return 0
    widths = [max(len(r[i]) for r in [("TASK", "SCHEDULE", ""), *rows]) for i in range(2)]
    print(f"{'TASK':<{widths[0]}}  {'SCHEDULE':<{widths[1]}}  NEXT (UTC)")
    for name, expression, when in rows:
        print(f"{name:<{widths[0]}}  {expression:<{widths[1]}}  {when}")
    return 0


def _valkey_equals(argv: list[str]) -> list[str]:
    """``--valkey=URL`` as ``--valkey-url=URL``: ``--valkey`` of the operator's commands is a
    flag (an optional value would take the job id after it for a URL), and the worker's takes
    ``--valkey-url`` as well."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--":
            break
        if arg.startswith("--valkey="):
            out[i] = "--valkey-url=" + arg[len("--valkey="):]
    return out


def main(argv: list[str] | None = None) -> int:
    """Run one command; an expected error prints one line on stderr and exits with its code
    (:mod:`kindling.tools.exits`), and ``--debug`` (or ``KINDLING_DEBUG=1``) shows its traceback."""
    argv = _valkey_equals(sys.argv[1:] if argv is None else argv)
    ns = parser(argv[0] if argv else None).parse_args(argv)
    try:
        return ns.fn(ns)
    except Exception as exc:
        if getattr(ns, "debug", False) or os.environ.get("KINDLING_DEBUG") == "1":
            raise
        from kindling.tools.exits import describe

        failure = describe(exc)
        if failure is None:  # a bug: its traceback is what a report needs
            raise
        message, code = failure
        print(f"kindling: {message}" + ("" if code == 2 else " (--debug shows the traceback)"), file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
