"""The documentation's code is code, and its reference pages are complete.

- Every Python block in README.md and docs/*.md is a file under docs/examples/, included
  verbatim after a ``<!-- example: docs/examples/NAME -->`` marker, and every example runs:
  under eager mode, against moto's server or a Valkey server on loopback, or (the one that
  would need a deployed function) compiled only.
- docs/envelope.schema.json and kindling's own decoder (``envelope.decode_job``) agree on
  the examples' envelopes (Python with boto3, Go with its standard library) and on a table
  of valid and invalid ones.
- docs/configuration.md lists every ``KINDLING_*`` variable the code reads and every
  parameter template.yaml declares.
- Relative links and the repository paths the pages name point at files that exist.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"
PACKAGE = ROOT / "layers/kindling/kindling"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
MARKER = re.compile(r"^<!-- example: (docs/examples/[\w./-]+) -->$")
FENCE = re.compile(r"^\s*```(\w*)\s*$")

# How each example runs. Every file in docs/examples/ must be in exactly one of these.
EAGER = ["quickstart.py", "tasks.py", "periodic.py", "app.py", "handles.py", "test_eager.py", "canvas.py",
         "results_policy.py", "models.py"]
ON_MOTO = ["send_and_read.py", "named_queues.py", "send_with_boto3.py", "async_send.py"]
ON_VALKEY = ["stream_producer.py"]
COMPILED_ONLY = {"stream_kick.py": "kicks a deployed worker function (Lambda Invoke)",
                 "cdk_app.py": "a CDK app (aws-cdk-lib): tests/tooling/test_cdk_construct.py synthesizes it"}
OTHER_LANGUAGES = ["send.go"]
# Imported by a test below that drives it (a job runs in eager mode; the service is a fake).
# Run by pytest, with kindling's plugin and a valkey-server: the fixtures docs/testing.md shows.
PYTEST_RUN = ["test_fixtures.py"]
DRIVEN = ["sentry_hooks.py", "powertools_logger.py", "powertools_metrics.py", "powertools_tracer.py",
          "powertools_idempotency.py", "powertools_parameters.py"]


def fenced_blocks(path: Path) -> list[tuple[int, str, str, str | None]]:
    """(line, language, content, the example the marker before it names) of each fenced block."""
    lines = path.read_text().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        j = i + 1
        while not FENCE.match(lines[j]) or FENCE.match(lines[j]).group(1):
            j += 1
        marker = MARKER.match(lines[i - 1].strip()) if i else None
        blocks.append((i + 1, opened.group(1), "\n".join(lines[i + 1:j]) + "\n",
                       marker.group(1) if marker else None))
        i = j + 1
    return blocks


def example_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "layers/kindling"), str(EXAMPLES)])}
    env.pop("KINDLING_EAGER", None)
    env.update(extra)
    return env


def run_example(name: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, str(EXAMPLES / name)], cwd=EXAMPLES, env=example_env(**env),
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (name, done.stdout[-2000:], done.stderr[-3000:])
    return done


# --- the examples are the docs' code -------------------------------------------------------


def test_every_python_block_in_the_docs_is_an_example_file_included_verbatim():
    problems = []
    for page in PAGES:
        for line, language, content, example in fenced_blocks(page):
            where = f"{page.relative_to(ROOT)}:{line}"
            if language == "python" and example is None:
                problems.append(f"{where}: a python block without an example marker before it")
            elif example is not None:
                source = ROOT / example
                if not source.is_file():
                    problems.append(f"{where}: {example} does not exist")
                elif source.read_text() != content:
                    problems.append(f"{where}: the block differs from {example}")
    assert not problems, "\n".join(problems)


def test_every_example_file_is_run_or_compiled_by_this_test_and_named_by_a_page():
    planned = EAGER + ON_MOTO + ON_VALKEY + list(COMPILED_ONLY) + OTHER_LANGUAGES + DRIVEN + PYTEST_RUN
    assert len(planned) == len(set(planned))
    on_disk = sorted(p.name for p in EXAMPLES.iterdir() if p.is_file() and p.suffix in (".py", ".go", ".js"))
    assert sorted(planned) == on_disk
    text = "\n".join(page.read_text() for page in PAGES)
    assert [name for name in on_disk if f"examples/{name}" not in text] == []


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_every_python_example_compiles(name):
    compile((EXAMPLES / name).read_text(), name, "exec")


@pytest.mark.parametrize("name", EAGER)
def test_the_example_runs_under_eager_mode(name):
    run_example(name, KINDLING_EAGER="1")


def drive(example: str, script: str, **env: str) -> subprocess.CompletedProcess:
    """Run ``script`` (which imports ``example``) in a fresh interpreter, as a worker would."""
    done = subprocess.run([sys.executable, "-c", script], cwd=EXAMPLES, env=example_env(**env),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (example, done.stdout[-2000:], done.stderr[-3000:])
    return done


def test_the_sentry_example_reports_each_failed_run_and_a_dead_job_through_the_sdk():
    """sentry_hooks.py with the real SDK, its transport replaced by one that keeps envelopes
    (nothing leaves the process)."""
    drive("sentry_hooks.py", """
import sentry_sdk
from sentry_sdk.transport import Transport

sent = []


class Kept(Transport):
    def capture_envelope(self, envelope):
        sent.extend(item.payload.json for item in envelope.items if item.type == "event")


real_init = sentry_sdk.init
sentry_sdk.init = lambda **options: real_init(**{**options, "transport": Kept})
import sentry_hooks  # noqa: E402,F401 - registers the hooks, as app.py would

from kindling import task  # noqa: E402
from kindling.tools.testing import eager  # noqa: E402


@task(name="charge", max_attempts=2)
def charge(order):
    raise LookupError(f"no order {order}")


@task(name="ok")
def ok():
    return 1


with eager() as jobs:
    ok.delay()
    handle = charge.delay("o-1")
    assert jobs.records[handle.id]["status"] == "dead"
sentry_sdk.flush()
assert len(sent) == 2, sent  # both runs, none for the success
for attempt, event in enumerate(sent, 1):
    (exc,) = event["exception"]["values"]
    assert exc["type"] == "LookupError" and exc["value"] == "no order o-1"
    assert exc["stacktrace"]["frames"][-1]["function"] == "charge"
    assert event["tags"] == {"kindling.task": "charge", "kindling.job_id": handle.id}
    assert event["contexts"]["kindling"] == {"attempt": attempt, "max_attempts": 2}
    assert event["fingerprint"] == ["kindling", "charge", "LookupError"]
""", SENTRY_DSN="http://public@127.0.0.1:9/1")


# Runs jobs of an example's tasks through the Lambda handler, with a Lambda context, as a
# deployed worker does; AWS is moto's, in process (no socket).
LAMBDA_HARNESS = """
import json, os, warnings
from moto import mock_aws
mock_aws().start()
import boto3
from kindling.core.envelope import encode_job, new_job
from kindling.triggers.sqs.handler import LambdaWorker
from kindling.stores.memory import MemoryResultStore


class Context:
    function_name = "kindling-worker"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:kindling-worker"
    aws_request_id = "req-1"

    def get_remaining_time_in_millis(self):
        return 30_000


store = MemoryResultStore()
worker = LambdaWorker(store=store, log=None, metrics=False)


def run(task, *args):
    job = new_job(task, list(args))
    event = {"Records": [{"messageId": job.id, "receiptHandle": "rh", "body": encode_job(job).decode(),
                          "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
                          "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:jobs"}]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert worker(event, Context()) == {"batchItemFailures": []}
    assert not [str(w.message) for w in caught if "powertools" in w.filename], [str(w.message) for w in caught]
    record = store.record(job.id)
    assert record["status"] == "succeeded", record
    return job.id, json.loads(record["result"])
"""
LAMBDA_ENV = {"AWS_LAMBDA_FUNCTION_NAME": "kindling-worker", "POWERTOOLS_SERVICE_NAME": "shop",
              "POWERTOOLS_METRICS_NAMESPACE": "shop", "AWS_DEFAULT_REGION": "us-east-1",
              "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def test_the_powertools_logger_example_writes_the_jobs_keys_on_its_lines():
    done = drive("powertools_logger.py", LAMBDA_HARNESS + """
import powertools_logger
job_id, result = run("orders.ship", "o-1")
assert result == "shipped o-1"
print("JOB", job_id)
""", **LAMBDA_ENV)
    job_id = done.stdout.split("JOB ")[1].strip()
    (line,) = [json.loads(x) for x in done.stdout.splitlines() if '"shipping"' in x]
    assert (line["job_id"], line["task"], line["attempt"], line["order_id"]) == (job_id, "orders.ship", 1, "o-1")
    assert line["service"] == "shop" and line["location"].startswith("ship:")


def test_the_powertools_metrics_example_writes_one_emf_document_per_job():
    done = drive("powertools_metrics.py", LAMBDA_HARNESS + """
import powertools_metrics
assert run("orders.charge", "o-1", 1250)[1] == 1250
assert run("orders.charge", "o-2", 990)[1] == 990
""", **LAMBDA_ENV)
    docs = [json.loads(x) for x in done.stdout.splitlines() if '"OrdersCharged"' in x]
    assert [d["Revenue"] for d in docs] == [[1250.0], [990.0]] and all(d["OrdersCharged"] == [1.0] for d in docs)
    for doc in docs:
        (directive,) = doc["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == "shop" and doc["service"] == "shop" and doc["task"] == "orders.charge"


def test_the_powertools_tracer_example_sends_a_subsegment_per_job_with_its_id():
    done = drive("powertools_tracer.py", LAMBDA_HARNESS + """
from aws_xray_sdk.core import xray_recorder

sent = []


class Kept:
    def send_entity(self, entity):
        sent.append(entity.to_dict())

    def set_daemon_address(self, address):
        pass


xray_recorder.configure(emitter=Kept())
import powertools_tracer
job_id, result = run("images.resize", "a.png", 64)
assert result == "thumbs/64/a.png"
(sub,) = [s for s in sent if s["name"] == "## powertools_tracer.resize"]
assert sub["annotations"]["job_id"] == job_id and sub["annotations"]["attempt"] == 1, sub
assert sub["trace_id"] == "1-5759e988-bd862e3fe1be46a994272793"
""", **LAMBDA_ENV, LAMBDA_TASK_ROOT=str(EXAMPLES),
          _X_AMZN_TRACE_ID="Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
    assert done.returncode == 0


def test_the_powertools_idempotency_example_takes_a_payment_once_without_a_warning():
    drive("powertools_idempotency.py", LAMBDA_HARNESS + """
boto3.client("dynamodb").create_table(TableName="idempotency", BillingMode="PAY_PER_REQUEST",
                                      KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                                      AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}])
import powertools_idempotency
first = run("payments.take", "o-1", 1250)[1]
again = run("payments.take", "o-1", 990)[1]  # another job for the same order: not charged again
assert first == again == {"order_id": "o-1", "charged": 1250}
(item,) = boto3.client("dynamodb").scan(TableName="idempotency")["Items"]
assert item["status"]["S"] == "COMPLETED"
# Registered: the in-progress record expires with the invocation (Context: 30 s left).
assert "in_progress_expiration" in item, item
""", **LAMBDA_ENV, IDEMPOTENCY_TABLE="idempotency")


def test_the_powertools_parameters_example_reads_ssm_once_for_many_jobs():
    drive("powertools_parameters.py", LAMBDA_HARNESS + """
boto3.client("ssm").put_parameter(Name="/shop/email/sender", Value="shop@example.com", Type="String")
import powertools_parameters
assert run("emails.send", "a@example.com")[1] == "shop@example.com -> a@example.com"
boto3.client("ssm").put_parameter(Name="/shop/email/sender", Value="changed", Type="String", Overwrite=True)
assert run("emails.send", "b@example.com")[1] == "shop@example.com -> b@example.com"  # cached
""", **LAMBDA_ENV)


# --- the examples that need AWS, on moto's server ---------------------------------------------


def make_queue(name: str) -> str:
    import boto3

    return boto3.client("sqs").create_queue(QueueName=f"{name}-{uuid.uuid4().hex[:8]}")["QueueUrl"]


def drain(queue_url: str) -> list[dict]:
    import boto3

    sqs, messages = boto3.client("sqs"), []
    while True:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                  MessageAttributeNames=["All"]).get("Messages", [])
        if not got:
            return messages
        messages += got
        for m in got:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])


@pytest.mark.service
def test_sending_and_reading_a_result_runs_against_a_queue_a_worker_drains(table):
    queue = make_queue("jobs")
    env = {"KINDLING_QUEUE_URL": queue, "KINDLING_TABLE": table}
    worker = subprocess.Popen(
        [sys.executable, "-m", "kindling.tools.cli", "worker", "--tasks", str(EXAMPLES / "tasks.py"), "--wait", "1"],
        cwd=EXAMPLES, env=example_env(**env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        done = run_example("send_and_read.py", **env)
    finally:
        worker.terminate()
        worker.communicate(timeout=60)
    assert done.stdout.strip() == "None", done.stdout  # send_email returns None, recorded succeeded


@pytest.mark.service
def test_the_named_queues_example_routes_each_job_to_its_queue(table):
    default, reports, bulk = make_queue("jobs"), make_queue("reports"), make_queue("bulk")
    run_example("named_queues.py", KINDLING_QUEUE_URL=default, KINDLING_TABLE=table,
                KINDLING_QUEUES=f"reports={reports},bulk={bulk}")
    # run as a script, the example's own task is __main__.monthly_report
    tasks = {url: sorted(json.loads(m["Body"])["task"] for m in drain(url)) for url in (default, reports, bulk)}
    assert tasks == {default: [], reports: ["__main__.monthly_report"],
                     bulk: ["__main__.monthly_report", "tasks.resize"]}


@pytest.mark.service
def test_the_async_example_sends_one_job_per_request(moto_endpoint):
    queue = make_queue("jobs")
    done = run_example("async_send.py", KINDLING_QUEUE_URL=queue)
    assert done.stdout.strip() == "100"
    assert sorted(json.loads(m["Body"])["args"][0] for m in drain(queue)) == sorted(f"{i}.png" for i in range(100))


@pytest.mark.service
def test_a_job_sent_with_boto3_alone_is_a_valid_envelope_for_the_schema_and_the_worker(moto_endpoint):
    from kindling.core import jobsig

    queue = make_queue("jobs")
    done = run_example("send_with_boto3.py", KINDLING_QUEUE_URL=queue)
    (message,) = drain(queue)
    body = json.loads(message["Body"])
    assert_valid_both_ways(body)
    assert body["id"] == done.stdout.strip()

    sys.path.insert(0, str(EXAMPLES))
    try:
        import send_with_boto3
    finally:
        sys.path.remove(str(EXAMPLES))
    raw = json.dumps(body, separators=(",", ":")).encode()
    key = b"k" * 32
    assert send_with_boto3.signature("2026-11", key, queue, raw) == jobsig.sign(
        "2026-11", key, jobsig.sqs_destination(queue), raw)


@pytest.mark.valkey
@pytest.mark.service
def test_the_stream_producer_example_adds_its_jobs_to_the_stream(valkey_url):
    from kindling.shared.valkey.connection import connect

    client = connect(valkey_url)
    client.execute_command("DEL", "kindling:jobs")
    run_example("stream_producer.py", KINDLING_VALKEY_URL=valkey_url)
    assert client.execute_command("XLEN", "kindling:jobs") == 10_001
    client.execute_command("DEL", "kindling:jobs")


# --- the envelope schema agrees with the decoder ----------------------------------------------


def schema_validator():
    import jsonschema

    schema = json.loads((DOCS / "envelope.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def schema_errors(envelope: object) -> list[str]:
    return [e.message for e in schema_validator().iter_errors(envelope)]


def decoder_error(envelope: object) -> str | None:
    from kindling.core.envelope import decode_job
    from kindling.core.errors import InvalidJob

    try:
        decode_job(json.dumps(envelope))
    except InvalidJob as exc:
        return str(exc)
    return None


def assert_valid_both_ways(envelope: dict) -> None:
    assert schema_errors(envelope) == []
    assert decoder_error(envelope) is None


def plain(**changes) -> dict:
    job = {"version": 1, "id": "01JD3ABCDEFGHJKMNPQRSTVWXY", "task": "tasks.resize", "args": ["a.png"],
           "kwargs": {"width": 64}, "enqueued_at": 1763725000000}
    job.update(changes)
    return {k: v for k, v in job.items() if v is not ...}


CALL = {"task": "tasks.add", "args": [10], "kwargs": {}}
PARENT = {"id": "chord-1", "index": 2, "size": 10, "then": {"task": "tasks.total", "args": [], "kwargs": {}}}
PAYLOAD = {"bucket": "kindling-payloads", "key": "args/01JD3/" + "a" * 64, "size": 2_097_152, "sha256": "a" * 64}

ACCEPTED = {
    "a plain job": plain(),
    "every version 1 option": plain(max_attempts=5, timeout=30, not_before=1763725060000),
    "a float timeout": plain(timeout=0.5),
    "an id of every allowed character": plain(id="Az09-_.:" + "x" * 120),
    "a chain": plain(version=2, chain=[CALL, dict(CALL, max_attempts=2, timeout=10)]),
    "a chord member": plain(version=2, id="chord-1.2", parent=PARENT),
    "a member of a group without a callback": plain(version=2, parent=dict(PARENT, then=None)),
    "an S3 payload": plain(version=2, args=[], kwargs={}, payload=PAYLOAD),
}
REFUSED = {
    "no enqueued_at": plain(enqueued_at=...),
    "an unknown field": plain(priority=1),
    "version 3 (newer)": plain(version=3),
    "version 0": plain(version=0),
    "a version 2 field in version 1": plain(chain=[CALL]),
    "an id with a slash": plain(id="a/b"),
    "an id over 128 characters": plain(id="x" * 129),
    "an empty task": plain(task=""),
    "a task over 200 characters": plain(task="t" * 201),
    "args not a list": plain(args={"a": 1}),
    "max_attempts 0": plain(max_attempts=0),
    "max_attempts 1001": plain(max_attempts=1001),
    "max_attempts true": plain(max_attempts=True),
    "a timeout over a day": plain(timeout=86_401),
    "a zero timeout": plain(timeout=0),
    "enqueued_at negative": plain(enqueued_at=-1),
    "enqueued_at in seconds": plain(enqueued_at=1763725000),
    "not_before in seconds": plain(not_before=1763725060),
    "enqueued_at in the year 10000": plain(enqueued_at=253_402_300_800_000),
    "an empty chain": plain(version=2, chain=[]),
    "a chain of 101": plain(version=2, chain=[CALL] * 101),
    "a chained call with an unknown field": plain(version=2, chain=[dict(CALL, queue="bulk")]),
    "a parent without then": plain(version=2, parent={k: v for k, v in PARENT.items() if k != "then"}),
    "a group of 10,001": plain(version=2, parent=dict(PARENT, size=10_001)),
    "a payload beside arguments": plain(version=2, payload=PAYLOAD),
    "a payload with an upper-case digest": plain(version=2, args=[], kwargs={}, payload=dict(PAYLOAD, sha256="A" * 64)),
    "a payload in a bucket with capitals": plain(version=2, args=[], kwargs={}, payload=dict(PAYLOAD, bucket="Bucket")),
    "not an object": ["tasks.resize"],
}


@pytest.mark.parametrize("case", ACCEPTED)
def test_the_schema_and_the_decoder_both_accept(case):
    assert_valid_both_ways(ACCEPTED[case])


@pytest.mark.parametrize("case", REFUSED)
def test_the_schema_and_the_decoder_both_refuse(case):
    from kindling.core.errors import NewerEnvelope

    envelope = REFUSED[case]
    assert schema_errors(envelope) != []
    try:
        reason = decoder_error(envelope)
    except NewerEnvelope:  # handed back to a newer worker, not run by this one
        reason = "newer"
    assert reason is not None


@pytest.mark.slow
def test_a_job_built_in_go_with_its_standard_library_is_a_valid_envelope():
    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not on PATH: docs/examples/send.go is not built")
    done = subprocess.run([go, "run", str(EXAMPLES / "send.go")], capture_output=True, text=True, timeout=300,
                          cwd=EXAMPLES, env={**os.environ, "GOFLAGS": "-mod=mod", "GO111MODULE": "off"})
    assert done.returncode == 0, done.stderr[-3000:]
    envelope = json.loads(done.stdout)
    assert_valid_both_ways(envelope)
    assert envelope["enqueued_at"] <= time.time() * 1000


# --- configuration.md is complete ------------------------------------------------------------


def variables_in_the_code() -> set[str]:
    found: set[str] = set()
    for path in [*PACKAGE.rglob("*.py"), *(ROOT / "functions").rglob("*.py")]:
        found |= set(re.findall(r"""["'](KINDLING_[A-Z0-9_]*[A-Z0-9])["']""", path.read_text()))
    config = PACKAGE / "shared/config.py"
    if config.exists():  # the variables' table, where there is one
        from kindling.shared import config as config_module

        table = getattr(config_module, "VARIABLES", {})
        found |= {getattr(v, "name", v) for v in table}
    return found


def template_parameters() -> set[str]:
    text = (ROOT / "template.yaml").read_text()
    block = re.search(r"^Parameters:\n(.*?)^\S", text, re.S | re.M).group(1)
    return set(re.findall(r"^  (\w+):", block, re.M))


def listed_in_configuration() -> set[str]:
    return set(re.findall(r"^\| `(\w+)` \|", (DOCS / "configuration.md").read_text(), re.M))


def test_configuration_lists_every_variable_the_code_reads():
    code = variables_in_the_code()
    assert "KINDLING_QUEUE_URL" in code and len(code) > 20  # the scan finds what it should
    assert sorted(code - listed_in_configuration()) == []


def test_configuration_lists_every_template_parameter():
    parameters = template_parameters()
    assert {"MaxAttempts", "KmsKeyArn"} <= parameters
    assert sorted(parameters - listed_in_configuration()) == []


# --- links and paths ---------------------------------------------------------------------------


def test_relative_links_and_named_repository_paths_exist():
    problems = []
    for page in PAGES:
        text = page.read_text()
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" not in target and not (page.parent / target).exists():
                problems.append(f"{page.relative_to(ROOT)}: link {target}")
        for path in re.findall(r"`((?:tests|infra|layers|functions|docs)/[\w./-]*\w)`", text):
            if not (ROOT / path).exists() and not path.endswith(".venv"):
                problems.append(f"{page.relative_to(ROOT)}: path {path}")
    assert not problems, "\n".join(problems)


def test_no_script_writes_the_readme_and_the_bench_harness_names_docs_benchmarks():
    writers = []
    for path in [*(ROOT / "infra").rglob("*.py"), *PACKAGE.rglob("*.py")]:
        if ".venv" in path.parts:
            continue
        text = path.read_text(errors="replace")
        if re.search(r"README\.md['\"]?\)?\.(write_text|open)|open\([^)]*README", text):
            writers.append(str(path.relative_to(ROOT)))
    assert writers == []
    assert "docs/benchmarks.md" in (ROOT / "infra/bench/run.py").read_text()
    assert "make bench" in (DOCS / "benchmarks.md").read_text()


def _sends(source: str) -> bool:
    return bool(re.search(r"\.(delay|apply_async|result|s)\(", source)) and "eager()" not in source


@pytest.mark.parametrize("name", [n for n in EAGER if _sends((EXAMPLES / n).read_text())])
def test_an_example_that_sends_outside_eager_mode_says_on_its_page_that_it_runs_with_kindling_eager(name):
    """It is run here with KINDLING_EAGER=1 (no queue, no table); a reader copying it must know
    that, or its .delay() looks for a queue. The sentence stands right after the block."""
    pages = [p for p in PAGES if f"<!-- example: docs/examples/{name} -->" in p.read_text()]
    assert pages, name
    for page in pages:
        text = page.read_text()
        after = text[text.index(f"<!-- example: docs/examples/{name} -->"):]
        after = after.split("```", 2)[2]  # past the block
        following = after.strip().split("\n\n", 1)[0]
        assert "KINDLING_EAGER=1" in following, (page.name, following)


@pytest.mark.valkey
@pytest.mark.parametrize("name", PYTEST_RUN)
def test_the_fixture_example_passes_under_pytest_with_every_fixture_it_shows(name, valkey_url, tmp_path):
    """Run as a user runs it: pytest in a directory of its own, kindling's plugin from its entry
    point, moto's embedded AWS, and the Valkey test given a server (so none is skipped)."""
    shutil.copy(EXAMPLES / name, tmp_path / name)
    env = {k: v for k, v in example_env().items() if not k.startswith(("PYTEST_", "AWS_", "KINDLING_"))}
    done = subprocess.run([sys.executable, "-m", "pytest", name, "-q", "-p", "no:cacheprovider", "-rs",
                           "--kindling-valkey-url", valkey_url], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0 and re.search(r"\b3 passed\b", done.stdout), done.stdout[-3000:] + done.stderr
    assert "skipped" not in done.stdout, done.stdout
