"""An embedded AWS for local runs: moto's server in this process, and the jobs queue, its
dead-letter queue and the results table made on it as template.yaml makes them.

``kindling demo`` and ``kindling dev`` run on it; it needs moto's server and boto3
(``pip install "kindling-jobs[demo]"``, or ``"moto[server,sqs,dynamodb]"`` beside
``kindling-jobs[client]``). The table's keys and indexes are read from template.yaml (the
project's own, else the one this release ships), so the dashboard and ``kindling jobs``
find on it the by_status and by_task indexes a deployed stack has.
"""

from __future__ import annotations

import os
import socket
from importlib import resources
from pathlib import Path

REGION = "us-east-1"
SCHEMA_KEYS = ("AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes")
"""The results table's properties a local table takes from template.yaml; the others
(encryption, recovery, TTL, warm throughput) change nothing a local run can see."""


def _check_free(port: int) -> None:
    """An ``OSError`` naming ``port`` unless 127.0.0.1:``port`` can be bound now (as the
    server binds it: address reuse on)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            raise OSError(exc.errno, f"127.0.0.1:{port} cannot be bound for moto's server: {exc.strerror}") from None


def aws_env(endpoint: str) -> dict[str, str]:
    """The environment pointing boto3 (and so kindling) at ``endpoint``, with test credentials."""
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_SESSION_TOKEN": "test", "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION}


def start_moto(port: int = 0):
    """moto's server on 127.0.0.1:``port`` (0: a free one), started, in a thread of this
    process; this process's environment is pointed at it. Returns ``(server, endpoint)``;
    ``server.stop()`` stops it."""
    import logging

    try:
        from moto.server import ThreadedMotoServer
    except ImportError as exc:  # moto without its server extra, or none at all
        raise SystemExit(f"kindling: the local cloud needs moto's server ({exc}): "
                         "pip install 'kindling-jobs[demo]' (or 'moto[server,sqs,dynamodb]')") from None

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request
    if port:
        _check_free(port)  # the server binds in its thread: a failure there would leave start() waiting
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()  # port 0: the server binds a free one itself, no other process can take it first
    endpoint = f"http://127.0.0.1:{server.get_host_and_port()[1]}"
    os.environ.pop("AWS_PROFILE", None)  # a profile's credentials would win over the test ones
    os.environ.update(aws_env(endpoint))
    return server, endpoint


def template_path(project: Path | str = "."):
    """The project's template.yaml, else the one this release ships (``kindling init``'s): a
    path, or the package's resource (both ``read_text()``)."""
    own = Path(project) / "template.yaml"
    return own if own.is_file() else resources.files("kindling") / "scaffold_files" / "template.yaml"


def _load_template(path) -> dict:
    """template.yaml as CloudFormation reads it: each short form (``!If``, ``!Ref`` ...) as its
    ``Fn::`` mapping."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def short_form(loader, suffix, node):
        name = suffix if suffix in ("Ref", "Condition") else f"Fn::{suffix}"
        if isinstance(node, yaml.ScalarNode):
            value = loader.construct_scalar(node)
            return {name: value.split(".", 1) if suffix == "GetAtt" else value}
        if isinstance(node, yaml.SequenceNode):
            return {name: loader.construct_sequence(node, deep=True)}
        return {name: loader.construct_mapping(node, deep=True)}

    Loader.add_multi_constructor("!", short_form)
    return yaml.load(path.read_text(), Loader=Loader)  # noqa: S506 - a SafeLoader with CloudFormation's tags


_NO_VALUE = {"Ref": "AWS::NoValue"}


def _resolve(value, decide):
    """``value`` with every ``Fn::If`` decided by ``decide(condition)`` and NoValue dropped."""
    if isinstance(value, dict):
        if "Fn::If" in value:
            name, yes, no = value["Fn::If"]
            return _resolve(yes if decide(name) else no, decide)
        out = {k: _resolve(v, decide) for k, v in value.items()}
        return {k: v for k, v in out.items() if v != _NO_VALUE}
    if isinstance(value, list):
        return [v for v in (_resolve(v, decide) for v in value) if v != _NO_VALUE]
    return value


def results_table_schema(template: Path | str | None = None, parameters: dict | None = None) -> dict:
    """The results table's keys and indexes (:data:`SCHEMA_KEYS`, ``create_table``'s
    arguments) as ``template`` (default :func:`template_path`) deploys them with its
    parameters' defaults, or ``parameters`` where given (``{"TaskIndex": "false"}``)."""
    doc = _load_template(Path(template) if template else template_path())
    params = {k: str(v.get("Default", "")) for k, v in doc.get("Parameters", {}).items()}
    params.update({k: str(v) for k, v in (parameters or {}).items()})
    conditions = doc.get("Conditions", {})

    def value(expr):
        if isinstance(expr, dict) and "Ref" in expr:
            return params[expr["Ref"]]
        return str(expr)

    def holds(expr) -> bool:
        if "Condition" in expr:
            return decide(expr["Condition"])
        (fn, args), = expr.items()
        if fn == "Fn::Equals":
            return value(args[0]) == value(args[1])
        if fn == "Fn::Not":
            return not holds(args[0])
        if fn == "Fn::And":
            return all(holds(a) for a in args)
        if fn == "Fn::Or":
            return any(holds(a) for a in args)
        raise ValueError(f"template.yaml: a condition kindling cannot evaluate locally: {fn}")

    def decide(name: str) -> bool:
        return holds(conditions[name])

    table = doc["Resources"]["ResultsTable"]["Properties"]
    return _resolve({k: table[k] for k in SCHEMA_KEYS if k in table}, decide)


def create_stack(name: str, *, visibility_timeout: int, max_receive_count: int,
                 template: Path | str | None = None, session=None) -> dict[str, str]:
    """The jobs queue ``name``, its dead-letter queue ``name-dlq`` (after
    ``max_receive_count`` receives) and the results table ``name-results``, made on the
    cloud boto3 is pointed at (:func:`start_moto`): their ``queue_url``, ``dlq_url`` and
    ``table``."""
    import boto3
    from kindling.core import codec

    session = session or boto3.Session()
    sqs, ddb = session.client("sqs"), session.client("dynamodb")
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue = sqs.create_queue(QueueName=name, Attributes={
        "VisibilityTimeout": str(visibility_timeout),
        "RedrivePolicy": codec.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive_count}),
    })["QueueUrl"]
    table = f"{name}-results"
    ddb.create_table(TableName=table, BillingMode="PAY_PER_REQUEST", **results_table_schema(template))
    return {"queue_url": queue, "dlq_url": dlq, "table": table}
