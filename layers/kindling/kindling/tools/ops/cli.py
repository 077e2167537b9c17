"""The operator's subcommands of ``kindling``: ``jobs list|show|retry|revoke``, ``dlq peek|redrive``
(the SQS DLQ, or with ``--valkey`` the Valkey dead stream) and ``dashboard``. :func:`add_parsers`
wires them into the main parser (kindling.tools.cli).

Output fits a terminal: aligned columns, long text cut to the width (``--json`` prints
whole records for scripts). Times are UTC.
"""

from __future__ import annotations

import sys

from kindling.core.status import DEAD, RECORDED, REVOKED

__all__ = ["add_parsers"]


def add_parsers(sub, env) -> None:
    """Add ``jobs``, ``dlq`` and ``dashboard`` to the ``kindling`` subparsers ``sub``; ``env``
    reads a variable (:func:`kindling.shared.config.get`)."""

    def common(p, queue: bool = False) -> None:
        p.add_argument("--table", default=env("KINDLING_TABLE"), help="results table (KINDLING_TABLE)")
        if queue:
            p.add_argument("--queue-url", default=env("KINDLING_QUEUE_URL"), help="jobs queue (KINDLING_QUEUE_URL)")
            p.add_argument("--dlq-url", default=env("KINDLING_DLQ_URL"),
                           help="dead-letter queue (KINDLING_DLQ_URL; default: the jobs queue's redrive policy)")

    def named_queue(p, what: str) -> None:
        p.add_argument("--queue", metavar="NAME",
                       help=f"{what}: 'default' (the jobs queue) or a named queue of KINDLING_QUEUES, each with "
                            "its own dead-letter queue")

    def valkey(p, what: str) -> None:
        # A flag, never an option with an optional value: `--valkey JOB_ID` must not take the
        # job id for a URL. The URL is --valkey-url URL (or --valkey=URL, kindling.tools.cli.main).
        p.add_argument("--valkey", action="store_true", dest="valkey_flag",
                       help=f"{what}; the URL as the worker takes it: KINDLING_VALKEY_URL, --valkey-url, "
                            "--valkey-url-file, a secret")
        p.add_argument("--valkey-url", dest="valkey", metavar="URL",
                       help="the Valkey URL (implies --valkey; also --valkey=URL). It must not hold a password: "
                            "any user can read a command line")
        p.add_argument("--valkey-url-file", metavar="PATH", help="read the Valkey URL from this file")
        p.add_argument("--valkey-url-secret", metavar="ARN",
                       help="read the Valkey URL from this Secrets Manager secret or SSM parameter")
        from kindling.core.valkey.keys import DEFAULT_STREAM

        p.add_argument("--stream", default=env("KINDLING_VALKEY_STREAM") or DEFAULT_STREAM,
                       help="the job stream (its dead stream is <stream>:dead; default kindling:jobs)")
        p.add_argument("--results", choices=["dynamodb", "valkey"],
                       default="valkey" if env("KINDLING_RESULTS") == "valkey" else "dynamodb",
                       help="where the worker records outcomes (KINDLING_RESULTS; default dynamodb)")

    jobs = sub.add_parser("jobs", help="list, show and retry jobs (results table indexes)",
                          description="Find jobs by status or task, show one, retry one.")
    jsub = jobs.add_subparsers(dest="jobs_command", required=True)
    ls = jsub.add_parser("list", help="jobs by status and/or task over time, newest first",
                         description="Jobs that finished in a time range, through the by_status / by_task indexes "
                                     "(never a Scan). Succeeded jobs are listed per task.")
    ls.add_argument("--status", choices=sorted(RECORDED))
    ls.add_argument("--task")
    ls.add_argument("--since", default="1d", help="how far back: 30s, 15m, 2h, 7d or an ISO time (default 1d)")
    ls.add_argument("--until", help="the end of the range (same forms; default now)")
    ls.add_argument("--limit", type=int, default=50)
    ls.add_argument("--json", action="store_true", help="a JSON array of records")
    common(ls)
    ls.set_defaults(fn=cmd_jobs_list)

    show = jsub.add_parser("show", help="one job: record, error, traceback, attempts, timings")
    show.add_argument("job_id")
    show.add_argument("--json", action="store_true")
    common(show)
    valkey(show, "read the record from the Valkey result store (with --results valkey)")
    show.set_defaults(fn=cmd_jobs_show)

    retry = jsub.add_parser("retry", help="send a job again under its id (a dead one is revived first)",
                            description="Send the job again with the same id as a new attempt. A dead job is "
                                        "revived first: a new generation of its record (queued, attempts 0), then "
                                        "its message is moved from the dead-letter queue back to the queue it "
                                        "came from.")
    retry.add_argument("job_id")
    retry.add_argument("--search", type=int, default=1000,
                       help="messages to look through in each DLQ, or entries of the dead stream (default 1000)")
    retry.add_argument("--json", action="store_true")
    common(retry, queue=True)
    named_queue(retry, "the queue the job came from (default: every DLQ of the deployment is looked through, "
                       "and the job goes back to the queue whose DLQ held it)")
    valkey(retry, "retry the job from the Valkey dead stream <stream>:dead instead of an SQS DLQ")
    retry.set_defaults(fn=cmd_jobs_retry)

    revoke = jsub.add_parser("revoke", help="cancel a job: recorded revoked, no worker starts it from then on",
                             description="Record the job revoked: the duplicate check every batch makes skips it. "
                                         "A job that has finished (or is dead) cannot be revoked. A run already "
                                         "under way runs on: its success is recorded over the revoke, its failure "
                                         "is not (and it is not retried).")
    revoke.add_argument("job_id")
    revoke.add_argument("--json", action="store_true", help='print {"id": ..., "status": "revoked"}')
    common(revoke)
    valkey(revoke, "record the revoke in the Valkey result store (with --results valkey)")
    revoke.set_defaults(fn=cmd_jobs_revoke)

    dlq = sub.add_parser("dlq", help="look at and redrive the dead-letter queue")
    dsub = dlq.add_subparsers(dest="dlq_command", required=True)
    pk = dsub.add_parser("peek", help="the first messages of the DLQ and their jobs' records")
    pk.add_argument("--limit", type=int, default=10)
    pk.add_argument("--visibility", type=int, default=1, metavar="S",
                    help="SQS has no peek: the messages are received (their receive count goes up) and hidden for "
                         "at most S seconds (default 1), released as soon as read")
    pk.add_argument("--json", action="store_true")
    common(pk, queue=True)
    named_queue(pk, "whose DLQ to look at (default: the jobs queue's)")
    valkey(pk, "the Valkey dead stream instead of the SQS DLQ")
    pk.set_defaults(fn=cmd_dlq_peek)
    rd = dsub.add_parser("redrive", help="move the DLQ back to the jobs queue (reviving dead jobs first)",
                         description="Revive the dead jobs in the DLQ and move their messages back to the jobs "
                                     "queue, 100 messages at a time (receive, revive, send, delete), printing a line "
                                     "per chunk; with --no-revive, move them with SQS's message move task.")
    rd.add_argument("--no-revive", action="store_true",
                    help="move the messages as they are (SQS's move task): jobs recorded dead go straight back to "
                         "the DLQ")
    rd.add_argument("--dry-run", action="store_true",
                    help="list what it would do (revive and move, move, leave) and change nothing; the messages "
                         "are received once to read them (their receive count goes up)")
    rd.add_argument("--limit", type=int, default=1000, help="messages a --dry-run looks at (default 1000)")
    rd.add_argument("--json", action="store_true", help="print the report (or the --dry-run plan) as JSON")
    rd.add_argument("--max-per-second", type=int, help="the move task's rate (default: SQS's)")
    common(rd, queue=True)
    named_queue(rd, "whose DLQ to move back to it (default: the jobs queue's)")
    valkey(rd, "move the Valkey dead stream back to the job stream (XADD each entry, then XDEL it)")
    rd.set_defaults(fn=cmd_dlq_redrive)

    info = sub.add_parser("info", help="an overview: queue and DLQ depth, jobs by status lately",
                          description="The jobs queue's and its DLQ's depth (visible, in flight, delayed) and the "
                                      "jobs that finished since --since by status, through the by_status / by_task "
                                      "indexes (never a Scan). Succeeded jobs are counted per task, as the dashboard "
                                      "charts them: the tasks seen in other statuses, those --tasks registers and "
                                      "each --task.")
    info.add_argument("--since", default="1h", help="how far back: 30s, 15m, 2h, 7d or an ISO time (default 1h)")
    info.add_argument("--tasks", action="append", default=[], metavar="MODULE_OR_FILE",
                      help="task module or file, as for the worker: count their succeeded jobs (repeatable)")
    info.add_argument("--task", action="append", default=[], dest="task_names", metavar="NAME",
                      help="a task whose succeeded jobs to count (repeatable)")
    info.add_argument("--json", action="store_true", help="a JSON object")
    common(info, queue=True)
    info.set_defaults(fn=cmd_info)

    dash = sub.add_parser("dashboard", help="a local web page over the results table",
                          description="Serve the dashboard (search by task, status, time and error; job and chord "
                                      "pages; per-task charts; backlog over time; /metrics) on 127.0.0.1, behind a "
                                      "token it prints at start unless one is configured (docs/operations.md, The "
                                      "dashboard).")
    dash.add_argument("--port", type=int, default=8080)
    dash.add_argument("--host", default="127.0.0.1")
    dash.add_argument("--tasks", action="append", default=[], metavar="MODULE_OR_FILE",
                      help="task module or file, as for the worker: their names chart succeeded jobs (repeatable)")
    dash.add_argument("--task", action="append", default=[], dest="task_names", metavar="NAME",
                      help="a task name to chart (repeatable)")
    dash.add_argument("--token", default=env("KINDLING_DASHBOARD_TOKEN"),
                      help="the login token (KINDLING_DASHBOARD_TOKEN; default: one made and printed at start)")
    dash.add_argument("--trust-header", default=env("KINDLING_DASHBOARD_TRUST_HEADER"), metavar="NAME",
                      help="behind an authenticating proxy: trust this header's user instead of a token "
                           "(KINDLING_DASHBOARD_TRUST_HEADER)")
    common(dash, queue=True)
    dash.set_defaults(fn=cmd_dashboard)


def _stack(ns):
    from kindling.tools.ops import Stack

    return Stack(table=ns.table, queue_url=getattr(ns, "queue_url", None), dlq_url=getattr(ns, "dlq_url", None))


def _queue_stack(ns):
    """The stack acting on ``--queue`` (its jobs queue and that queue's own DLQ)."""
    return _stack(ns).on_queue(ns.queue or "default")


def _run(fn, ns) -> int:
    # An OpsError (and AWS's errors) reach kindling.tools.cli.main, which prints one line and exits
    # with its code (kindling.tools.exits): 1; an OpsUsageError (a setting neither passed nor set) 2.
    return fn(ns)


def cmd_jobs_list(ns) -> int:
    return _run(_jobs_list, ns)


def cmd_jobs_show(ns) -> int:
    return _run(_jobs_show, ns)


def cmd_jobs_retry(ns) -> int:
    return _run(_jobs_retry, ns)


def cmd_jobs_revoke(ns) -> int:
    return _run(_jobs_revoke, ns)


def _jobs_revoke(ns) -> int:
    from kindling.core.errors import KindlingError
    from kindling.producer.client import Client

    if _on_valkey(ns) and ns.results != "valkey":
        raise _ops_error("--valkey records the revoke in the Valkey result store: add --results valkey (or set "
                         "KINDLING_RESULTS=valkey); a worker writing to the results table reads it there")
    if not _on_valkey(ns) and not ns.table:
        raise _usage("--table / KINDLING_TABLE is required (or --valkey with --results valkey)")
    try:
        if _on_valkey(ns):
            _records(ns).store.revoke(ns.job_id)
        else:
            Client(queue_url="unused", table=ns.table).revoke(ns.job_id)
    except KindlingError as exc:
        print(f"kindling: {exc}", file=sys.stderr)
        return 1
    if ns.json:
        from kindling.tools.ops import fmt

        print(fmt.dumps({"id": ns.job_id, "status": REVOKED}))
    else:
        print(f"{ns.job_id} revoked: no worker starts it from now on (a run already under way runs on)")
    return 0


def cmd_dlq_peek(ns) -> int:
    return _run(_dlq_peek, ns)


def cmd_dlq_redrive(ns) -> int:
    return _run(_dlq_redrive, ns)


def cmd_info(ns) -> int:
    return _run(_info, ns)


def _info(ns) -> int:
    import time

    from kindling.tools.ops import fmt
    from kindling.tools.ops.query import parse_since

    stack = _stack(ns)
    if not ns.table and not ns.queue_url:
        raise _usage("nothing to look at: pass --table and --queue-url, or set KINDLING_TABLE and "
                         "KINDLING_QUEUE_URL")
    now = int(time.time() * 1000)
    since = parse_since(ns.since, now)
    report: dict = {"since": since, "now": now}
    if ns.queue_url:
        report["queue"] = {"url": ns.queue_url, **stack.depth(ns.queue_url)}
        try:
            report["dlq"] = {"url": stack.dlq_url, **stack.depth(stack.dlq_url)}
        except Exception as exc:  # no redrive policy, no --dlq-url: a queue without a DLQ
            from kindling.tools.exits import describe

            report["dlq"] = {"error": (describe(exc) or (str(exc), 1))[0]}
    if ns.table:
        from kindling.tools.dashboard.aggregate import summary

        counts = summary(stack, _task_names(ns), window_s=max(1, (now - since) // 1000), buckets=1, now_ms=now)
        report["by_status"] = dict(sorted(counts["totals"].items()))
        report["tasks"], report["capped"] = counts["tasks"], counts["capped"]
    if ns.json:
        print(fmt.dumps(report))
        return 0
    for key, name in (("queue", "jobs queue"), ("dlq", "dead-letter queue")):
        if key in report:
            d = report[key]
            where = d.get("url", "").rstrip("/").rsplit("/", 1)[-1]
            print(f"{name} {where}: {d['error']}" if "error" in d else
                  f"{name} {where}: {d['visible']} visible, {d['in_flight']} in flight, {d['delayed']} delayed "
                  "(approximate)")
    if "by_status" in report:
        counts = ", ".join(f"{k} {v}" for k, v in report["by_status"].items())
        print(f"jobs since {fmt.when(since)} UTC: {counts}" + (" (capped: more than 5000 in a status)"
                                                               if report["capped"] else ""))
        print("succeeded counted for tasks: " + (", ".join(report["tasks"])
                                                 or "none seen (name them with --task NAME or --tasks MODULE)"))
    return 0


def cmd_dashboard(ns) -> int:
    return _run(_dashboard, ns)


def _jobs_list(ns) -> int:
    from kindling.tools.ops import fmt
    from kindling.tools.ops.query import fill_errors, list_jobs, parse_since

    stack = _stack(ns)
    records = list_jobs(stack, status=ns.status, task=ns.task, since_ms=parse_since(ns.since),
                        until_ms=parse_since(ns.until) if ns.until else None, limit=ns.limit)
    records = fill_errors(stack, records)
    if ns.json:
        print(fmt.dumps(records))
    else:
        print(fmt.jobs_table(records, width=fmt.width()))
    return 0


def _jobs_show(ns) -> int:
    from kindling.tools.ops import fmt
    from kindling.tools.ops.query import get_job

    stack = _stack(ns)
    if _on_valkey(ns):
        if ns.results != "valkey":
            raise _ops_error("--valkey reads records from the Valkey result store: add --results valkey "
                             "(or set KINDLING_RESULTS=valkey); without it records are in the results table")
        record = _records(ns).read([ns.job_id]).get(ns.job_id)
    else:
        record = get_job(stack, ns.job_id)
    if record is None:
        print(f"kindling: no record of job {ns.job_id} (queued, running, or unknown)", file=sys.stderr)
        return 1
    if "result_payload" in record:  # a result too large for its record, kept in S3
        from kindling.core.errors import PayloadUnavailable
        from kindling.shared import payloads

        try:
            record["result"] = payloads.read_result(payloads.session_client(stack.session), record)
        except PayloadUnavailable as exc:
            record["result_unavailable"] = str(exc)
    print(fmt.dumps(record) if ns.json else fmt.job_detail(record, width=fmt.width()))
    return 0


def _jobs_retry(ns) -> int:
    from kindling.tools.ops import fmt
    from kindling.tools.ops.revive import retry_job

    if _on_valkey(ns):
        from kindling.tools.ops import dead_stream

        if ns.queue:
            raise _ops_error("--queue names an SQS queue and its DLQ; a Valkey stream is named by --stream")
        if ns.results != "valkey" and not ns.table:
            raise _usage("a retry reads the job's record: --table / KINDLING_TABLE, or --results valkey")
        done = dead_stream.retry(_dead_stream(ns), _records(ns), ns.job_id, search=ns.search)
        on, sent = f" on stream {done['stream']}", f"entry {done['entry']}"
    else:
        done = retry_job(_stack(ns), ns.job_id, search=ns.search, queue=ns.queue)
        on = "" if done["queue"] == "default" else f" on queue {done['queue']}"
        sent = f"message {done['message_id']}"
    if ns.json:
        print(fmt.dumps(done))
    else:
        how = (f"revived as generation {done['generation']}" if done["previous_status"] == DEAD
               else f"was {done['previous_status'] or 'without a record'}")
        print(f"job {done['id']} enqueued again{on} ({how}; {sent})")
    return 0


def _dlq_peek(ns) -> int:
    from kindling.tools.ops import fmt
    from kindling.tools.ops.dlq import peek

    if _on_valkey(ns) and ns.queue:
        raise _ops_error("--queue names an SQS queue and its DLQ; a Valkey stream is named by --stream")
    if _on_valkey(ns):
        from kindling.tools.ops import dead_stream

        report = dead_stream.peek(_dead_stream(ns), _records(ns, optional=True), limit=ns.limit)
        print(fmt.dumps(report) if ns.json else fmt.dead_stream_table(report, width=fmt.width()))
        return 0

    report = peek(_queue_stack(ns), limit=ns.limit, hide_s=ns.visibility)
    print(fmt.dumps(report) if ns.json else fmt.dlq_table(report, width=fmt.width()))
    if report["messages"]:  # SQS has no peek: say what looking did
        print(f"kindling: peek received these {len(report['messages'])} message(s): each one's receive count went up "
              f"by 1 and it was hidden for at most {report['visibility_s']} s (released as soon as read)",
              file=sys.stderr)
    return 0


def _dlq_redrive(ns) -> int:
    from kindling.tools.ops import fmt
    from kindling.tools.ops.dlq import plan, redrive

    if _on_valkey(ns) and ns.queue:
        raise _ops_error("--queue names an SQS queue and its DLQ; a Valkey stream is named by --stream")
    # Progress goes to stderr with --json, so that stdout is the report alone.
    out = sys.stderr if ns.json else sys.stdout

    def progress(line: str) -> None:
        print(line, file=out, flush=True)

    if _on_valkey(ns):
        from kindling.tools.ops import dead_stream

        if ns.dry_run:
            raise _ops_error("--dry-run reads an SQS DLQ; for the Valkey dead stream, `kindling dlq peek --valkey` "
                             "shows its entries without changing them")
        records = None if ns.no_revive else _records(ns)
        report = dead_stream.redrive(_dead_stream(ns), records, revive_dead=not ns.no_revive, progress=progress)
        if ns.json:
            print(fmt.dumps(report))
        else:
            print(f"done: moved {report['moved']} of {report['total']}, revived {report['revived']}"
                  + (f", {report['revive_refused']} not revived" if report["revive_refused"] else "")
                  + (f", {report['unverified']} not validly signed (left in the dead stream)" if report["unverified"]
                     else ""))
        return 0 if report["moved"] == report["total"] and not report["revive_refused"] else 1

    if ns.dry_run:
        done = plan(_queue_stack(ns), revive_dead=not ns.no_revive, limit=ns.limit)
        if ns.json:
            print(fmt.dumps(done))
            return 0
        depth = done["depth"]
        print(f"dry run: the DLQ holds {depth['visible']} visible, {depth['in_flight']} in flight (approximate); "
              f"looked at {done['looked_at']}; nothing was revived or moved")
        for m in done["messages"]:
            print(f"  {m['action']:<15}  {m['job_id'] or '-'}  (record: {m['status'] or 'none'})"
                  + (f"  {m['problem']}" if m["problem"] else ""))
        print("would: " + (", ".join(f"{k} {v}" for k, v in sorted(done["actions"].items())) or "nothing"))
        return 0

    report = redrive(_queue_stack(ns), revive_dead=not ns.no_revive, max_per_second=ns.max_per_second,
                     progress=progress)
    if ns.json:
        print(fmt.dumps(report))
    else:
        print(f"done ({report['method']}): moved {report['moved']}, revived {report['revived']}"
              + (f", {report['revive_refused']} not revived" if report["revive_refused"] else "")
              + (f", {report['left']} left in the DLQ" if report.get("left") else ""))
    return 0 if report["status"] == "COMPLETED" and not report["revive_refused"] else 1


def _ops_error(message: str):
    from kindling.tools.ops import OpsError

    return OpsError(message)


def _usage(message: str):
    """A setting the command needs, neither passed nor set (or an option that does not parse): exits 2."""
    from kindling.tools.ops import OpsUsageError

    return OpsUsageError(message)


def _on_valkey(ns) -> bool:
    return (getattr(ns, "valkey_flag", False) or getattr(ns, "valkey", None) is not None
            or bool(getattr(ns, "valkey_url_file", None))
            or bool(getattr(ns, "valkey_url_secret", None)))


def _valkey_url(ns) -> str:
    """The URL as the worker takes it (KINDLING_VALKEY_URL, a file, a secret: kindling.shared.config.valkey_url);
    one given on the command line is refused if it holds a password."""
    from urllib.parse import urlsplit

    from kindling.shared.config import valkey_url

    if ns.valkey:
        try:
            password = urlsplit(ns.valkey).password
        except ValueError as exc:
            raise _usage(f"--valkey-url: not a URL: {exc}") from None
        if password:
            raise _ops_error("--valkey-url: the URL holds a password, which any user can read on the command line "
                             "(ps); pass it in KINDLING_VALKEY_URL or --valkey-url-file instead")
    url = valkey_url(ns)
    if not url:
        raise _usage("--valkey: no URL: set KINDLING_VALKEY_URL (or KINDLING_VALKEY_URL_SECRET), or pass "
                         "--valkey-url URL (without a password), --valkey-url-file PATH or --valkey-url-secret ARN")
    return url


def _dead_stream(ns):
    from kindling.tools.ops.dead_stream import DeadStream

    return DeadStream(_valkey_url(ns), ns.stream)


def _records(ns, optional: bool = False):
    """Where the jobs' records are: the Valkey result store, or the results table (None if
    ``optional`` and no table is named)."""
    from kindling.tools.ops import dead_stream

    if ns.results == "valkey":
        return dead_stream.ValkeyRecords(_valkey_url(ns))
    if not ns.table:
        if optional:
            return None
        raise _usage("--table / KINDLING_TABLE (or --results valkey) is needed to revive dead jobs; "
                         "--no-revive moves the entries as they are")
    return dead_stream.DynamoRecords(_stack(ns))


def _task_names(ns) -> list[str]:
    """The tasks whose succeeded jobs ``info`` counts and the dashboard charts (read per task
    from ``by_task``): each ``--task NAME`` and every task ``--tasks MODULE_OR_FILE`` registers."""
    task_names = list(ns.task_names)
    if ns.tasks:
        from kindling.core.registry import default_registry
        from kindling.shared.config import load_tasks

        load_tasks(ns.tasks)
        task_names += sorted(t.name for t in default_registry)
    return list(dict.fromkeys(task_names))


def _dashboard(ns) -> int:
    from kindling.tools.dashboard import serve

    return serve(_stack(ns), host=ns.host, port=ns.port, tasks=_task_names(ns), token=ns.token,
                 trust_header=ns.trust_header)
