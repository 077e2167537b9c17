"""Celery's own producer, for the bridge suite: ``apply_async`` goes through Celery's
``as_task_v2``, kombu's ``Producer`` (serializer, compression) and kombu's SQS transport
(``Channel._put``: the body as SQS receives it). Only the SQS client at the very end is
replaced: :class:`_Capture` keeps each ``SendMessage``'s parameters instead of sending them.

:meth:`CeleryProducer.celery_sees` reads a message back as Celery's worker does (kombu's
``Message``: body encoding, decompression, deserialization with Celery's ``accept_content``),
the reference the suite holds kindling's reading to.
"""

from __future__ import annotations

import base64
import json
import threading

from celery import Celery
from kombu.serialization import prepare_accept_content
from kombu.transport import SQS

QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/celery"


class _Capture:
    """An SQS client that answers kombu's SQS transport without a network."""

    def __init__(self):
        self.sent: list[dict] = []
        self._lock = threading.Lock()

    def send_message(self, **params):
        with self._lock:
            self.sent.append(params)
            return {"MessageId": f"sqs-{len(self.sent)}"}

    def get_queue_attributes(self, **_params):
        return {"Attributes": {"ApproximateNumberOfMessages": "0"}}


CAPTURE = _Capture()  # one for every app: a channel cannot tell which app opened it


class _Channel(SQS.Channel):
    def sqs(self, queue=None):
        return CAPTURE


class _Transport(SQS.Transport):
    Channel = _Channel


class Sent:
    """One message as SQS received it: its message id, its body and the Celery task id."""

    def __init__(self, message_id: str, body: str, task_id: str):
        self.message_id, self.body, self.task_id = message_id, body, task_id

    @property
    def message(self) -> dict:
        """The kombu message (``body``, ``headers``, ``properties``...) the SQS body holds."""
        return json.loads(self.body if self.body.startswith("{") else base64.b64decode(self.body))


class CeleryProducer:
    """A Celery app whose broker is kombu's SQS transport, with one predefined queue."""

    def __init__(self, **conf):
        self.capture = CAPTURE
        self.app = Celery("shop", broker="sqs://key:secret@", set_as_current=False)
        self.app.conf.broker_transport = _Transport
        self.app.conf.broker_transport_options = {"region": "us-east-1",
                                                  "predefined_queues": {"celery": {"url": QUEUE_URL}}}
        self.app.conf.task_default_queue = "celery"
        self.app.conf.update(conf)

        @self.app.task(name="bridge.echo", shared=False)
        def echo(*args, **kwargs):  # never run here: kindling's worker runs its own bridge.echo
            return [args, kwargs]

        @self.app.task(name="bridge.after", shared=False)
        def after(*args, **kwargs):
            return None

        self.echo, self.after = echo, after

    def send(self, args=(), kwargs=None, **options) -> Sent:
        """``bridge.echo.apply_async(args, kwargs, **options)``: the message SQS received."""
        result = self.echo.apply_async(args, kwargs or {}, **options)
        params = self.capture.sent[-1]
        return Sent(f"sqs-{len(self.capture.sent)}", params["MessageBody"], result.id)

    def celery_request_headers(self, sent: Sent) -> dict | None:
        """Celery's ``self.request.headers`` for the message: its headers as kombu's SQS
        transport reads them (kombu's JSON), less Celery's own (Celery's task ``Context``)."""
        from celery.app.task import Context
        from kombu.utils.json import loads

        text = sent.body if sent.body.startswith("{") else base64.b64decode(sent.body).decode()
        return Context(loads(text)["headers"]).headers

    def celery_sees(self, sent: Sent):
        """``(args, kwargs, embed)`` as Celery's worker decodes them (kombu raises what it refuses)."""
        with self.app.connection_for_write() as conn:
            channel = conn.default_channel
            message = channel.Message(sent.message, channel=channel)
            message.accept = prepare_accept_content(self.app.conf.accept_content)
            args, kwargs, embed = message.decode()
        return list(args), kwargs, embed
