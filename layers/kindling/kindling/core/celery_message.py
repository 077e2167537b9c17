"""Celery's task message (protocol 2), as kombu's SQS transport sends it, read as a job.

A team moving to kindling can point an unchanged Celery producer (``app.send_task``,
``task.delay()``, ``apply_async(countdown=)``) at kindling's queue: the worker runs the
registered task of that name. Only the reading lives here; the job then goes through the
runner as any other (admission, attempts, recording in the results table).

What kombu's SQS transport sends (``kombu/transport/SQS``, ``celery/app/amqp.py``
``as_task_v2``): the message body is base64 (``sqs_base64_encoding``, the default; raw JSON
without it) of a JSON object ``{"body", "content-type", "content-encoding", "headers",
"properties"}``. ``properties.body_encoding`` is ``base64``: ``body`` is the base64 of the
serialized ``[args, kwargs, embed]``. The headers carry ``task``, ``id``, ``retries``,
``eta`` (ISO 8601 or null), ``expires``, ``timelimit`` ([hard, soft]) and ``lang: "py"``.

Mapped: ``id`` is the job id (a Celery task id sent twice runs once, as any kindling id),
``eta`` its ``not_before``, the hard time limit its ``timeout``; a message past its
``expires`` is not run. Refused (the job is ``rejected``, with the reason, never run): a
serializer other than JSON (pickle is never read), protocol 1, and what kindling cannot
honour: ``link``/``link_error`` callbacks, a Celery chain or chord in ``embed``.
``retries`` is not carried over: attempts are counted in kindling's record. Outcomes go to
the results table; a Celery ``AsyncResult`` cannot read them.

Imported by :func:`kindling.core.envelope.decode_job` only for a body that is not an envelope
and looks like one of these, so a worker of kindling producers never loads it.
"""

from __future__ import annotations

import binascii
from base64 import b64decode

from kindling.core import codec
from kindling.core.envelope import Job, decode_job, encode_job, new_job
from kindling.core.errors import InvalidJob

__all__ = ["decode", "is_message"]


def is_message(data: dict) -> bool:
    """Whether decoded JSON is a kombu message rather than a kindling envelope."""
    return "version" not in data and isinstance(data.get("headers"), dict) and "body" in data


def decode(body: str | bytes | dict) -> Job:
    """The job a Celery task message asks for; :class:`InvalidJob` naming what is refused."""
    message = body if isinstance(body, dict) else _json(_unbase64(body, "message body"), "message body")
    if not isinstance(message, dict) or not is_message(message):
        raise InvalidJob("message body is neither a kindling envelope nor a Celery task message")
    headers = message["headers"]
    task, job_id = headers.get("task"), headers.get("id")
    if not isinstance(task, str) or not isinstance(job_id, str):
        raise InvalidJob("Celery message protocol 1 (no task and id headers) is not read: send with "
                         "task_protocol=2, Celery's default")

    def bad(reason: str) -> InvalidJob:
        return InvalidJob(f"Celery task message: {reason}", job_id=job_id, task=task)

    content_type = message.get("content-type", "application/json")
    if content_type != "application/json":
        raise bad(f"serializer {content_type!r} is not read: kindling reads JSON only (task_serializer='json')")
    properties = message.get("properties") or {}
    raw = message["body"]
    if properties.get("body_encoding") == "base64":
        raw = _unbase64(raw, "task body")
    payload = _json(raw, "task body")
    if not (isinstance(payload, list) and len(payload) == 3 and isinstance(payload[0], list)
            and isinstance(payload[1], dict)):
        raise bad("the body is not [args, kwargs, embed]")
    args, kwargs, embed = payload
    embed = embed if isinstance(embed, dict) else {}
    for key, what in (("callbacks", "link callbacks"), ("errbacks", "link_error callbacks"),
                      ("chain", "a Celery chain"), ("chord", "a Celery chord")):
        if embed.get(key):
            raise bad(f"{what} cannot be honoured by kindling: send it with kindling's canvas "
                      "(kindling.chain, kindling.group(...).then(...))")
    expires = _eta_ms(headers.get("expires"))
    if expires is not None:
        from kindling.core.envelope import now_ms

        if now_ms() > expires:  # Celery's worker revokes it; it is not run here either
            raise bad(f"expired at {headers['expires']} (Celery's expires=): not run")
    timelimit = headers.get("timelimit") or [None, None]
    hard = timelimit[0] if isinstance(timelimit, list) and timelimit else None
    try:
        job = new_job(task, args, kwargs, job_id=job_id, timeout=hard or None, not_before=_eta_ms(headers.get("eta")))
        # Through the envelope's own checks (id, task name, limits), as a kindling producer's job.
        return decode_job(encode_job(job))
    except InvalidJob as exc:
        raise bad(exc.reason) from None
    except (TypeError, ValueError) as exc:
        raise bad(str(exc)) from None


def _unbase64(text: str | bytes, what: str) -> bytes:
    try:
        return b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidJob(f"{what} is not base64: {exc}") from None


def _json(data: str | bytes, what: str):
    try:
        return codec.loads(data)
    except codec.DecodeError as exc:
        raise InvalidJob(f"Celery {what} is not JSON: {exc}") from None


def _eta_ms(eta: object) -> int | None:
    """Celery's ``eta`` header (ISO 8601, UTC when naive) as epoch milliseconds."""
    if not eta:
        return None
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(str(eta))
    except ValueError:
        raise InvalidJob(f"Celery task message: {eta!r:.60} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)
