"""Celery task messages (protocol 2) as kombu's SQS transport writes them, built by hand from
kombu/transport/SQS ``Channel._put`` and celery/app/amqp.py ``as_task_v2``: for shapes Celery's
producer does not write, and for the conformance scenarios. The bridge suite has Celery's own
producer write its messages (tests/support/celery_bridge.py); the LocalStack test sends real ones."""

from __future__ import annotations

import base64
import json
import uuid


def celery_body(task: str, args: list, kwargs: dict, *, task_id: str | None = None, eta: str | None = None,
                embed: dict | None = None, content_type: str = "application/json", b64: bool = True,
                timelimit: list | None = None, expires: str | None = None) -> bytes:
    """The SQS message body a Celery producer sends for ``task(*args, **kwargs)``."""
    task_id = task_id or str(uuid.uuid4())
    embed = embed or {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
    headers = {"lang": "py", "task": task, "id": task_id, "shadow": None, "eta": eta, "expires": expires,
               "group": None, "group_index": None, "retries": 0, "timelimit": timelimit or [None, None],
               "root_id": task_id, "parent_id": None, "argsrepr": repr(args), "kwargsrepr": repr(kwargs),
               "origin": "gen1@host", "ignore_result": False}
    body = base64.b64encode(json.dumps([args, kwargs, embed]).encode()).decode()
    message = {"body": body, "content-encoding": "utf-8", "content-type": content_type, "headers": headers,
               "properties": {"correlation_id": task_id, "reply_to": "", "delivery_mode": 2,
                              "delivery_info": {"exchange": "", "routing_key": "celery"}, "priority": 0,
                              "body_encoding": "base64", "delivery_tag": str(uuid.uuid4())}}
    text = json.dumps(message).encode()
    return base64.b64encode(text) if b64 else text
