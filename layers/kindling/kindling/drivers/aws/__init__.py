"""A small SigV4 client for the AWS JSON protocols (DynamoDB, SQS), standard library only.

This runs inside the worker's cold path: importing it loads only C modules (``_socket``,
``_sha2``), never boto3/botocore, http.client, ssl or orjson (JSON goes through
:mod:`kindling.core.codec`, which uses orjson only once a process opts in), reads no
credentials and opens no socket. HTTP/1.1 is spoken by the small
:class:`~kindling.drivers.aws.connection.Connection`: ``import http.client`` alone costs a fresh
interpreter more than the whole worker handler (it pulls in the email package, socket,
enum and ssl). HTTPS endpoints import ssl when the first connection opens. Connections
open at the first call and are kept alive across warm invocations; a connection the
server (or a NAT) dropped while the Lambda sandbox was frozen is detected on first use and
replaced without costing a retry attempt.

Credentials come from the environment Lambda provides, re-read on every call; outside
Lambda, from boto3's chain (profiles, web identity, the container endpoint, instance
metadata), imported only then. Endpoints and proxies are found as botocore finds them.
docs/aws-credentials.md has the order and the variables.

The parts, as urllib3 splits them:

- :mod:`~kindling.drivers.aws.errors`: :class:`AwsError` and the transport's own errors; which failures
  are retried, errors read from responses (the wait between attempts is
  :func:`kindling.core.backoff.compute_backoff`)
- :mod:`~kindling.drivers.aws.url`: URL parsing, percent-encoding, SigV4's canonical path and query
- :mod:`~kindling.drivers.aws.signing`: :func:`sign` (SigV4)
- :mod:`~kindling.drivers.aws.connection`: one HTTP/1.1 connection; a request sent now, its reply read later
- :mod:`~kindling.drivers.aws.proxy`: which proxy a connection goes through (HTTPS_PROXY, NO_PROXY)
- :mod:`~kindling.drivers.aws.endpoints`: region and endpoint (FIPS, dual-stack, every partition) from
  its table generated from botocore's data
- :func:`~kindling.drivers.aws.client.get_credentials`: the environment's credentials, then
  :mod:`~kindling.drivers.aws.chain` (:mod:`~kindling.drivers.aws.profiles`, :mod:`~kindling.drivers.aws.sts`,
  :mod:`~kindling.drivers.aws.container`, :mod:`~kindling.drivers.aws.imds`; the refresh rule in
  :mod:`~kindling.drivers.aws.temporary`)
- :mod:`~kindling.drivers.aws.client`: :class:`JsonClient` (``call``, or ``start`` and a
  :class:`PendingCall`'s ``result()``, each under an optional deadline) and the process's
  cached clients
- :mod:`~kindling.drivers.aws.s3`: :class:`~kindling.drivers.aws.s3.S3Client`, PUT and GET of one object
  (S3's REST signing, path-style on a configured endpoint). Not imported here: only jobs
  with a payload in S3 load it.
"""

from kindling.drivers.aws.client import JsonClient, PendingCall, dynamodb, secretsmanager, sqs, ssm
from kindling.drivers.aws.errors import (
    RETRYABLE_CODES,
    AwsError,
    DeadlineExceeded,
    HttpProtocolError,
    RemoteDisconnected,
    ResponseTooLarge,
)
from kindling.drivers.aws.signing import sign

__all__ = [
    "RETRYABLE_CODES",
    "AwsError",
    "DeadlineExceeded",
    "HttpProtocolError",
    "JsonClient",
    "PendingCall",
    "RemoteDisconnected",
    "ResponseTooLarge",
    "dynamodb",
    "secretsmanager",
    "sign",
    "sqs",
    "ssm",
]
