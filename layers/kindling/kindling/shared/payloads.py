"""Arguments and results too large for the queue or a record, kept in S3 behind a pointer.

A pointer is ``{"bucket": str, "key": str, "size": int, "sha256": hex}``: the envelope's
``payload`` (version 2; its ``args`` are then ``[]`` and its ``kwargs`` ``{}``) and a result
record's ``result_payload``. The object is what would have been inline: for arguments
``{"args": [...], "kwargs": {...}}``, for a result its JSON text. Keys are content-addressed
(``args/<job id>/<sha256>``, ``results/<job id>/<sha256>``), so a retried upload writes the
same object and a re-sent job with other arguments cannot overwrite what another copy of
it points at.

A job's pointer comes from its producer, so the worker reads one only where a producer puts
this job's arguments: the deployment's payload bucket, key ``args/<job id>/<sha256>``
(:func:`fetch_arguments`); any other is refused unread, in words that say nothing about the
object. Whoever reads an object checks its size and SHA-256 against the pointer. Every failure is a
:class:`~kindling.core.errors.PayloadUnavailable` whose ``retryable`` says whether trying again
can help (S3 throttled or unreachable) or not. Of those that cannot, the ones where the
bytes are gone for good say so (``lost``): S3 answered ``NoSuchKey`` (deleted, or expired
by the lifecycle rule), the object is not the bytes the pointer names, or the pointer
names nothing S3 can hold. The rest (``AccessDenied``, ``NoSuchBucket``, missing
credentials, a certificate refused) are the reader's setup, which an operator can fix: a
chord or chain waiting on a result gives up only on a lost one (:mod:`kindling.engine.followups`).
S3 says ``NoSuchKey`` only to a reader that may list the bucket (``s3:ListBucket``),
``AccessDenied`` to any other: the worker's role holds it.

Imported only when a job or a result needs it: a batch of plain jobs never loads it, nor
:mod:`kindling.drivers.aws.s3`.
"""

from __future__ import annotations

from kindling.core import codec
from kindling.core.digest import sha256
from kindling.core.errors import InvalidJob, PayloadTooLarge, PayloadUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from kindling.core.envelope import Job
    from kindling.core.registry import Task
    from kindling.drivers.aws.s3 import S3Client

SQS_DEFAULT_MAX_BYTES = 262_144  # SQS's MaximumMessageSize when a queue does not say (the old hard limit)
SIGNATURE_BYTES = 160  # a signed message's attribute: name, type and "v1:<key id, <= 64>:<MAC, 44>" (136 at most)


def pointer_problem(value: object) -> str | None:
    """What is wrong with ``value`` as a pointer, or None: the envelope's own rule for its
    ``payload``, so a record's pointer is held to the same one."""
    from kindling.core.envelope import _payload_error

    return _payload_error(value)


REFUSED_POINTER = ("the job's payload pointer does not name this job's arguments in this deployment's payload "
                   "bucket; it was not read")


def argument_key(job_id: str, digest: str) -> str:
    """The key a job's offloaded arguments are put under (:func:`put` with kind ``args``)."""
    return f"args/{job_id}/{digest}"


def argument_pointer_problem(ref: object, *, bucket: str, job_id: str) -> str | None:
    """Why the worker must not read job ``job_id``'s arguments through ``ref``, or None.

    A producer names the object, so only the one a producer makes for this job is read: in
    the deployment's payload ``bucket``, under :func:`argument_key`. Any other (another
    bucket the worker's role can read, a result, another job's arguments) would make the
    worker an oracle for whether it exists and how large it is; the refusal is one
    sentence, :data:`REFUSED_POINTER`, the same for all, said before S3 is asked."""
    problem = pointer_problem(ref)
    if problem:
        return problem
    if not bucket or ref["bucket"] != bucket or ref["key"] != argument_key(job_id, ref["sha256"]):  # type: ignore[index]
        return REFUSED_POINTER
    return None


def fetch_arguments(client: S3Client, ref: dict, *, bucket: str, job_id: str,
                    deadline: float | None = None) -> tuple[list, dict]:
    """Job ``job_id``'s arguments, through its envelope's pointer ``ref``, once
    :func:`argument_pointer_problem` finds nothing wrong with it (:func:`fetch`,
    :func:`decode_arguments`). Raises :class:`PayloadUnavailable`."""
    problem = argument_pointer_problem(ref, bucket=bucket, job_id=job_id)
    if problem:
        raise PayloadUnavailable(problem, retryable=False, lost=True)
    return decode_arguments(fetch(client, ref, deadline=deadline))


def pointer(bucket: str, key: str, data: bytes) -> dict:
    return {"bucket": bucket, "key": key, "size": len(data), "sha256": sha256(data).hexdigest()}


def encode_arguments(args: list, kwargs: dict) -> bytes:
    return codec.dumps({"args": args, "kwargs": kwargs}).encode()


def decode_arguments(data: bytes | bytearray) -> tuple[list, dict]:
    """The arguments an object holds; PayloadUnavailable (not retryable) if it holds none."""
    try:
        doc = codec.loads(data)
    except ValueError as exc:
        raise PayloadUnavailable(f"the payload object is not JSON: {exc}", retryable=False) from None
    if not (isinstance(doc, dict) and set(doc) == {"args", "kwargs"} and isinstance(doc["args"], list)
            and isinstance(doc["kwargs"], dict)):
        raise PayloadUnavailable('the payload object is not {"args": [...], "kwargs": {...}}', retryable=False)
    return doc["args"], doc["kwargs"]


def put(client: S3Client, bucket: str, kind: str, job_id: str, data: bytes, *,
        content_type: str = "application/json", deadline: float | None = None) -> dict:
    """Store ``data`` under ``<kind>/<job id>/<sha256>``; returns its pointer. Raises AwsError."""
    ref = pointer(bucket, "", data)
    ref["key"] = argument_key(job_id, ref["sha256"]) if kind == "args" else f"{kind}/{job_id}/{ref['sha256']}"
    client.put_object(bucket, ref["key"], data, content_type=content_type, deadline=deadline)
    return ref


def fit(job: Job, limit: int, bucket: str, client: Callable[[], S3Client], *,
        deadline: float | None = None) -> tuple[Job, bytes]:
    """``job`` as it goes on a queue taking at most ``limit`` bytes a message, and its envelope:
    the job itself when it fits, else a copy with its arguments put in ``bucket`` and a
    pointer in their place (the producer's rule, applied by the worker to the follow-ups it
    sends). ``client`` makes the S3 client, called only for a job that does not fit.

    Raises :class:`PayloadTooLarge` without a bucket, or when even the pointer does not fit
    (a chain carrying large arguments for its later steps); AwsError when S3 refuses the upload.
    The key is the job's id and the arguments' SHA-256, so an upload retried after a failure
    writes the same object."""
    from kindling.core.envelope import encode_job, replace

    body = encode_job(job)
    if len(body) <= limit:
        return job, body
    if not bucket:
        raise PayloadTooLarge(
            f"job {job.id} for {job.task!r} is {len(body):,} bytes; the queue takes at most {limit:,} "
            "(set KINDLING_PAYLOAD_BUCKET, the stack's PayloadBucketName, to send larger arguments through S3)")
    ref = put(client(), bucket, "args", job.id, encode_arguments(job.args, job.kwargs), deadline=deadline)
    moved = replace(job, args=[], kwargs={}, payload=ref)
    body = encode_job(moved)
    if len(body) > limit:
        raise PayloadTooLarge(f"job {job.id} for {job.task!r}: even with its arguments in S3 it is {len(body):,} "
                              f"bytes, over the queue's {limit:,} (its chain or chord callback carries the rest)")
    return moved, body


def sqs_batches(jobs: list[Job], limit: int, overhead: int, bucket: str, client: Callable[[], S3Client], *,
                deadline: float | None = None) -> list[list[Job]]:
    """Jobs for an SQS queue taking ``limit`` bytes a message, each :func:`fit` to it, in
    SendMessageBatch calls of at most 10 entries and ``limit`` bytes in all (SQS holds a
    batch to the queue's limit too). ``overhead``: the bytes of each message's attributes
    (a signature), counted toward both."""
    batches: list[list[Job]] = []
    total = 0
    for job in jobs:
        job, body = fit(job, limit - overhead, bucket, client, deadline=deadline)
        size = len(body) + overhead
        if not batches or len(batches[-1]) == 10 or total + size > limit:
            batches.append([])
            total = 0
        batches[-1].append(job)
        total += size
    return batches


def fetch(client: S3Client, ref: dict, *, deadline: float | None = None) -> bytes | bytearray:
    """The bytes ``ref`` points at, checked against its size and SHA-256.

    Raises :class:`PayloadUnavailable`, ``lost`` when they are gone for good (see the
    module's docstring), else with S3's own ``retryable``."""
    from kindling.drivers.aws.errors import AwsError

    problem = pointer_problem(ref)
    if problem:
        raise PayloadUnavailable(problem, retryable=False, lost=True)
    where = f"s3://{ref['bucket']}/{ref['key']}"
    try:
        # At most size + 1 bytes are read: a larger object is refused without reading it.
        data = client.get_object(ref["bucket"], ref["key"], max_bytes=ref["size"], deadline=deadline)
    except AwsError as exc:
        if exc.code == "ObjectTooLarge":
            raise PayloadUnavailable(f"{where} is larger than the pointer says {ref['size']:,} bytes ({exc.message})",
                                     retryable=False, lost=True) from None
        if exc.code == "NoSuchKey":
            raise PayloadUnavailable(f"cannot read {where}: {exc}", retryable=False, lost=True) from None
        raise PayloadUnavailable(f"cannot read {where}: {exc}", retryable=exc.retryable) from None
    except ValueError as exc:  # a key S3 cannot address
        raise PayloadUnavailable(f"cannot read {where}: {exc}", retryable=False, lost=True) from None
    if len(data) != ref["size"]:
        raise PayloadUnavailable(f"{where} is {len(data):,} bytes, the pointer says {ref['size']:,}",
                                 retryable=False, lost=True)
    if sha256(data).hexdigest() != ref["sha256"]:
        raise PayloadUnavailable(f"{where} does not match the pointer's sha256 (altered or replaced)",
                                 retryable=False, lost=True)
    return data


def session_client(session) -> S3Client:
    """An S3 client signing with a boto3 session's credentials and region (producers and
    operators: profiles, SSO and assumed roles work as they do for boto3). The endpoint
    comes from the environment (``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``), path-style."""
    from kindling.drivers.aws.errors import AwsError
    from kindling.drivers.aws.s3 import S3Client

    def credentials(deadline: float | None) -> tuple[str, str, str | None]:
        found = session.get_credentials()
        if found is None:
            raise AwsError("MissingCredentials", "the boto3 session found no AWS credentials")
        frozen = found.get_frozen_credentials()
        return frozen.access_key, frozen.secret_key, frozen.token

    return S3Client(region=session.region_name, credentials=credentials)


def read_result(client: S3Client, record: dict, *, deadline: float | None = None) -> str | None:
    """A record's result as JSON text: inline, or read from S3 through its pointer."""
    ref = record.get("result_payload")
    if ref is None:
        return record.get("result")
    return fetch(client, ref, deadline=deadline).decode("utf-8")


class PayloadIO:
    """The worker's S3 payload I/O, shared by its runner, follow-ups and triggers: a job's
    arguments in, a result too large for its record out, a kept result read back.

    ``bucket`` is the deployment's payload bucket (empty: none). The S3 client is the one
    given, else the process's (:func:`kindling.drivers.aws.s3.client`), made at the first object
    read or written."""

    __slots__ = ("bucket", "_client")

    def __init__(self, bucket: str, client: S3Client | None = None):
        self.bucket = bucket
        self._client = client

    def client(self) -> S3Client:
        if self._client is None:
            from kindling.drivers.aws.s3 import client

            self._client = client()
        return self._client

    def load_arguments(self, job: Job, task: Task, *, deadline: float | None = None) -> None:
        """Read ``job``'s arguments from S3 (size and sha256 checked) and bind them to ``task``.

        Raises :class:`PayloadUnavailable`: the job's failure, retried only when S3 itself failed."""
        args, kwargs = fetch_arguments(self.client(), job.payload, bucket=self.bucket,  # type: ignore[arg-type]
                                       job_id=job.id, deadline=deadline)
        try:
            task.check_arguments(args, kwargs)
        except Exception as exc:  # noqa: BLE001 - what the object holds does not fit the task
            reason = exc.reason if isinstance(exc, InvalidJob) else f"{type(exc).__name__}: {exc}"
            raise PayloadUnavailable(f"the payload's arguments do not fit the task: {reason}",
                                     retryable=False) from None
        job.args, job.kwargs = args, kwargs

    def store_result(self, job_id: str, text: str, *,
                     deadline: float | None = None) -> tuple[dict | None, BaseException | None]:
        """Keep a result too large for its record in the bucket: (its pointer, None), or
        (None, the failure) when S3 refused it."""
        from kindling.drivers.aws.errors import AwsError

        data = text.encode()
        try:
            return put(self.client(), self.bucket, "results", job_id, data, deadline=deadline), None
        except AwsError as exc:
            return None, PayloadUnavailable(f"the result ({len(data):,} bytes) is too large for its record "
                                            f"and could not be stored in s3://{self.bucket}: {exc}",
                                            retryable=exc.retryable)

    def read_text(self, ref: dict, *, deadline: float | None = None) -> str:
        """The JSON text a result pointer names (size and sha256 checked). Raises
        :class:`PayloadUnavailable`."""
        return fetch(self.client(), ref, deadline=deadline).decode("utf-8")
