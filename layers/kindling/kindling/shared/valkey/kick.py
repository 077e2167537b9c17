"""Waking the Lambda worker for a stream: debounced kicks, and the drain's handshake.

Lambda cannot subscribe to a stream, so whoever adds jobs wakes the worker: after its
``XADD`` s the producer sets a flag, ``SET <stream>:kick 1 NX PX <ttl>``, and only if that
set it (no drain is running or on its way) invokes the worker function asynchronously
(Lambda ``Invoke``, ``InvocationType=Event``) with ``{"kindling": "drain", "stream": ...,
"flag": "<stream>:kick"}``. A burst of enqueues therefore costs one invocation: the rest
find the flag set. The drain owns the flag while it runs (it sets the flag's expiry to its
own deadline plus :data:`FLAG_GRACE_MS`); when the stream looks empty it runs
:data:`kindling.shared.valkey.scripts.HANDSHAKE`, which deletes the flag, then looks again, and takes
the flag back if there is work (or work due within the drain's horizon) after all.

Why no job is stranded
----------------------

Invariant: while a flag is set, some drain holding it will still run the handshake (delete,
then re-check) before it stops. A producer that sets the flag invokes a drain; a drain
keeps the flag only to go on draining, and one that must stop with the flag still held
(out of time) hands it, and its consumer name, to a new invocation of itself first; a
drain that finds the result store down deletes the flag as it stops.

Take a job J. Its producer's ``XADD`` (P1) precedes its ``SET NX`` (P2) (the same pipeline,
run in order). If P2 sets the flag, the producer invokes a drain, which starts after P1
and reads J. If P2 finds the flag set, then by the invariant a drain will delete that
flag (D1) after P2 and re-check (D2) after D1, so D2 comes after P1 and sees J: as an
entry the group has not been given, or pending, or already settled. Seeing work, the drain
takes the flag back and keeps draining (it will run the handshake again before stopping);
if it could not take it back, a producer took it in between and invoked a drain, which
starts after P1. Either way some drain reads J. Delayed jobs are the same with the
scheduled set (:mod:`kindling.shared.valkey.scheduled`) in place of the stream: the handshake moves
due ones onto the stream first and counts the rest as due at their score.

A lost reply. If the connection drops after the producer's pipeline was sent and before
its reply came, the producer cannot tell whether P1 and P2 ran, so it cannot tell whether
it holds the flag; yet a flag it holds with no drain invoked would be freed by nobody, and
would block every producer's kick (and strand their jobs) until it expires. So it invokes
the drain anyway (:meth:`Kicker.after_lost_reply`) and raises
:class:`~kindling.core.errors.EnqueueUncertain` naming the jobs that may have been added. If it
did take the flag, that drain is the one the invariant needs; if it did not, the flag's
holder is bound by the invariant as before and the extra drain only drains alongside it
(a drain that starts takes the flag over, and each runs the handshake before it stops).
If the invocation fails, :meth:`Kicker.kick` deletes the flag as it does for any failed
kick. The same holds for the extra drains' flags when the reply of their ``SET NX`` is lost.
A pipeline that provably did not run (refused before it was sent) is a plain
:class:`~kindling.core.errors.EnqueueError` and kicks nothing; one whose ``XADD`` s were refused
by the server but whose ``SET NX`` took the flag still kicks its drain.

The handshake runs as one script, so nothing runs between its delete, its re-check and its
``SET NX`` (which therefore always succeeds when there is work); the argument above needs
only their order.

What it does not cover: a drain that dies (timeout, out of memory) keeps the flag until it
expires, and an asynchronous invocation Lambda could not deliver after its retries keeps it
for the producer's ``ttl`` (:data:`KICK_TTL_MS` by default, longer than any function
timeout). Jobs added meanwhile wait for the next enqueue after that or the safety-net
schedule (``DrainSchedule``); entries the dead drain held are reclaimed after the
visibility time by the next drain.

Scale-out: with more than ``backlog_per_drain`` jobs on the stream, the producer kicks up to
``max_drains`` drains, each with a flag of its own (``<stream>:kick:<n>``, n >= 1) and each
its own consumer in the group; each runs the same handshake on its own flag.
"""

from __future__ import annotations

from _thread import allocate_lock
from time import monotonic

from kindling.core import codec
from kindling.core.errors import masked_url
from kindling.core.valkey.keys import DEFAULT_GROUP, flag_key, flag_number  # noqa: F401 - flag_number: its old home

KICK_TTL_MS = 960_000
"""The flag's expiry when a producer sets it: longer than any function timeout (15 min),
so a drain that is queued or running keeps it. The drain shortens it to its own deadline
plus :data:`FLAG_GRACE_MS` as soon as it starts."""

FLAG_GRACE_MS = 2_000
BACKLOG_PER_DRAIN = 1_000
"""Jobs on the stream per drain when a producer scales out (see ``max_drains``)."""


def drain_event(stream: str, flag: str, group: str = DEFAULT_GROUP, consumer: str | None = None) -> dict:
    event = {"kindling": "drain", "stream": stream, "flag": flag}
    if group != DEFAULT_GROUP:
        event["group"] = group
    if consumer:
        event["consumer"] = consumer
    return event




class LambdaInvoker:
    """Invokes a Lambda function asynchronously (``Invoke`` with ``InvocationType=Event``)
    through kindling's own SigV4 client: no boto3, so a drain can kick itself from the layer.

    Region, endpoint (``AWS_ENDPOINT_URL_LAMBDA``, ``AWS_ENDPOINT_URL``) and credentials
    are found as :class:`kindling.drivers.aws.JsonClient` finds them. Throttling, 5xx and transport
    failures are retried (``attempts`` in all); anything else raises
    :class:`kindling.drivers.aws.AwsError`.
    """

    def __init__(self, function_name: str, *, region: str | None = None, endpoint: str | None = None,
                 timeout: float = 5.0, attempts: int = 3):
        from kindling.drivers.aws.client import _resolve_endpoint, _resolve_region
        from kindling.drivers.aws.url import DEFAULT_PORTS, Url, host_header, quote

        self.function_name = function_name
        self.region = _resolve_region(region)
        self.endpoint = _resolve_endpoint("lambda", self.region, endpoint)
        self.timeout = timeout
        self.attempts = max(1, attempts)
        parts = Url(self.endpoint)
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            raise ValueError(f"endpoint must be an http:// or https:// URL: {masked_url(self.endpoint)!r}")
        self._scheme, self._host = parts.scheme, parts.hostname
        self._port = parts.port or DEFAULT_PORTS[parts.scheme]
        name = quote(function_name, safe="")
        self._path = f"{(parts.path or '').rstrip('/')}/2015-03-31/functions/{name}/invocations"
        self._url = f"{parts.scheme}://{host_header(parts.scheme, parts.hostname, parts.port)}{self._path}"
        self._conn = None
        self._lock = allocate_lock()

    def __repr__(self) -> str:
        return f"LambdaInvoker({self.function_name!r}, endpoint={masked_url(self.endpoint)!r})"

    def __call__(self, payload: dict) -> None:
        from kindling.core.batch import Budget
        from kindling.core.policy import Retry
        from kindling.drivers.aws import errors

        body = codec.dumps(payload).encode()
        budget = Budget().lasting(self.timeout * self.attempts)
        deadline = budget.ends
        retry = Retry(self.attempts, base=0.05, cap=1.0)
        for attempt in retry.tries():
            with self._lock:
                try:
                    status, headers, data = self._post(body, deadline)
                except errors.TRANSPORT_ERRORS as exc:
                    error = errors.transport_error(exc, attempt)
                else:
                    if 200 <= status < 300:
                        return
                    error = errors.error_from_response(status, headers, data, attempt)
            if not error.retryable or retry.exhausted(attempt) or budget.spent():
                raise error
            retry.wait(attempt, deadline, errors.sleep, clip=True)

    def _post(self, body: bytes, deadline: float):
        from kindling.drivers.aws.client import get_credentials
        from kindling.drivers.aws.connection import Connection
        from kindling.drivers.aws.signing import sign

        access_key, secret_key, token = get_credentials(deadline)
        headers = sign("POST", self._url, {"Content-Type": "application/json", "X-Amz-Invocation-Type": "Event",
                                           "User-Agent": "kindling-aws/1"}, body,
                       service="lambda", region=self.region, access_key=access_key, secret_key=secret_key,
                       session_token=token)
        if self._conn is None:
            self._conn = Connection(self._scheme, self._host, self._port, self.timeout)
        try:
            return self._conn.request("POST", self._path, body, headers, deadline)
        except BaseException:
            self._conn.close()  # reopened by the next attempt
            raise


class Kicker:
    """The producer's side: the flags set after its jobs are added, and the invocations.

    Args:
        client: the producer's Valkey client.
        stream, group: the stream the drains read, and their consumer group.
        invoker: a callable taking the drain event (:class:`LambdaInvoker`, or a fake).
        max_drains: most drains kicked at once; one per ``backlog_per_drain`` jobs on the stream.
        ttl_ms: the flag's expiry, longer than the worker's function timeout.
    """

    def __init__(self, client, stream: str, invoker, *, group: str = DEFAULT_GROUP, max_drains: int = 1,
                 backlog_per_drain: int = BACKLOG_PER_DRAIN, ttl_ms: int = KICK_TTL_MS, log=None):
        self.client = client
        self.stream = stream
        self.group = group
        self.invoker = invoker
        self.max_drains = max(1, max_drains)
        self.backlog_per_drain = max(1, backlog_per_drain)
        self.ttl_ms = ttl_ms
        self.log = log
        self.invocations = 0
        self.failures = 0
        self.last_error: BaseException | None = None
        self._held_until: dict[int, float] = {}  # extra drains' flags seen set lately: not asked again until then

    def queue(self, pipe) -> None:
        """Queue on ``pipe``, after its XADDs: the first drain's ``SET NX`` and the stream's length."""
        pipe.set(flag_key(self.stream, 0), b"1", nx=True, px=self.ttl_ms)
        pipe.xlen(self.stream)

    def after(self, took_flag, backlog: int) -> int:
        """Invoke the drains whose flags this producer set; returns how many were invoked."""
        kicked = self.kick(0) if took_flag else 0
        wanted = min(self.max_drains, -(-backlog // self.backlog_per_drain))
        if wanted > 1:
            now = monotonic()
            extra = [n for n in range(1, wanted) if self._held_until.get(n, 0.0) <= now]
            if extra:
                pipe = self.client.pipeline(transaction=False)
                for n in extra:
                    pipe.set(flag_key(self.stream, n), b"1", nx=True, px=self.ttl_ms)
                try:
                    took_flags = pipe.execute()
                except Exception as exc:  # noqa: BLE001 - the first drain is on its way; scale out next time
                    from kindling.drivers.valkey.errors import outcome_unknown

                    if self.log is not None:
                        self.log(f"kindling: no extra drains for {self.stream!r}: {type(exc).__name__}: {exc}")
                    if outcome_unknown(exc):  # flags this producer may hold: only a drain frees them
                        kicked += sum(self.kick(n) for n in extra)
                    return kicked
                for n, took in zip(extra, took_flags, strict=True):
                    if took:
                        kicked += self.kick(n)
                    else:
                        self._held_until[n] = now + 1.0
        return kicked

    def after_lost_reply(self) -> int:
        """The reply of a pipeline holding this producer's ``SET NX`` was lost: invoke the first
        drain anyway, since this producer may hold its flag (if it does not, the extra drain
        finds little to do; if the invocation fails, :meth:`kick` deletes the flag)."""
        return self.kick(0)

    def kick(self, n: int) -> int:
        """Invoke drain ``n`` (its flag already set). If the invocation fails the flag is
        deleted again, so the next enqueue tries anew; the jobs are on the stream either way."""
        flag = flag_key(self.stream, n)
        try:
            self.invoker(drain_event(self.stream, flag, self.group))
        except Exception as exc:  # noqa: BLE001 - the jobs are enqueued; the kick is retried by the next one
            self.failures += 1
            self.last_error = exc
            try:  # noqa: SIM105 - contextlib is not worth importing on the drain's path
                self.client.delete(flag)
            except Exception:  # noqa: BLE001, S110 - the flag then expires by its ttl
                pass
            if self.log is not None:
                self.log(f"kindling: could not invoke the drain for {self.stream!r} ({flag}): "
                         f"{type(exc).__name__}: {exc}")
            return 0
        self.invocations += 1
        return 1


def run_handshake(script, *, scheduled: str, stream: str, flag: str, group: str, consumer: str, now: int,
                  visibility_ms: int, horizon_ms: int, ttl_ms: int, move_limit: int,
                  field) -> tuple[bool, bool, int | None]:
    """:data:`kindling.shared.valkey.scripts.HANDSHAKE` through ``script`` (a registered script):
    ``(kept, work, soonest)``."""
    stale_ms = max(1, visibility_ms * 2 // 3)  # heartbeats touch entries in flight every third of it
    kept, work, soonest = script(keys=[scheduled, stream, flag],
                                 args=[now, move_limit, field, group, consumer, visibility_ms, stale_ms, horizon_ms,
                                       ttl_ms])
    return bool(kept), bool(work), (int(soonest) if int(soonest) >= 0 else None)
