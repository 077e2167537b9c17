"""The dashboard's JSON API on moto: charts per task from the indexes (incrementally), search
with filters and paging, job and chord pages, retry, login, /metrics, and the checks that
keep other sites and other host names out."""

import base64
import http.client
import threading

import pytest
from kindling.core import codec
from kindling.core.envelope import member_id, new_job, next_id
from kindling.core.records import build_record, chord_key, revoked_record
from kindling.core.status import RECORDED
from kindling.producer.client import Call, Client
from kindling.producer.handles import GroupHandle
from kindling.stores.results import DynamoResultStore
from kindling.tools.dashboard import make_server
from kindling.tools.dashboard.aggregate import OVERLAP_MS, Aggregator, percentile
from kindling.tools.dashboard.search import STATUSES, search
from test_ops import indexed_table, stack, work  # noqa: F401  (fixtures and the worker loop)

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NOW = 1_800_000_000_000


@pytest.fixture
def dash_port(stack):  # noqa: F811
    srv = make_server(stack, host="127.0.0.1", port=0, tasks=["ops.ok"], token=TOKEN, sample_backlog=False)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def request(port, method, path, headers=None, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(method, path, body=body, headers=dict(AUTH, **(headers or {})) if headers is not False else {})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    kind = resp.getheader("Content-Type", "")
    return resp.status, (codec.loads(data) if kind.startswith("application/json") else data.decode())


def record(i, *, task="ops.ok", status="succeeded", at=NOW, duration=10.0, wait=0, error=None, job=None):
    return build_record(key=f"r-{i}", task=task, status=status, attempts=1, started_at=at - duration,
                        finished_at=at, duration_ms=duration, error=error, job=job) | (
        {"enqueued_at": at - duration - wait} if wait else {})


def test_percentiles_by_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([5.0], 99) == 5.0
    values = list(range(1, 101))
    assert percentile(values, 50) == 50 and percentile(values, 99) == 99 and percentile(values, 100) == 100


def test_the_charts_count_every_status_and_give_each_task_its_own_percentiles_over_time(stack):  # noqa: F811
    records = []
    for i in range(20):  # ops.ok: 10 ms x i; emails.send: 1000 ms + i, seen failing: its successes charted too
        task = "ops.ok" if i % 2 else "emails.send"
        status = "succeeded" if i < 14 else ("dead" if i < 17 else "failed")
        records.append(record(i, task=task, status=status, at=NOW - i * 60_000,
                              duration=float(10 * i if task == "ops.ok" else 1000 + i), wait=5 * i))
    records.append(revoked_record("r-revoked", "ops.ok", at_ms=NOW - 30_000))
    DynamoResultStore(stack.table).write(records)
    seen = []
    stack.dynamodb.meta.events.register("before-call.dynamodb.*", lambda model, **_: seen.append(model.name))

    agg = Aggregator(stack, window_s=3600, buckets=60, tasks=["ops.ok"], clock=lambda: NOW / 1000)
    agg.refresh(NOW + 1000)
    s = agg.summary(NOW + 1000)

    assert set(seen) == {"Query"}  # never a Scan
    assert s["statuses"] == sorted(RECORDED) and "revoked" in s["statuses"]
    assert sum(s["by_status"]["revoked"]) == 1  # a revoked job is charted
    assert s["tasks"] == ["emails.send", "ops.ok"]
    assert sum(s["by_status"]["succeeded"]) == 14 and sum(s["by_status"]["dead"]) == 3
    assert sum(s["by_task"]["ops.ok"]) == 11 and sum(s["by_task"]["emails.send"]) == 10
    ok, email = s["per_task"]["ops.ok"], s["per_task"]["emails.send"]
    assert ok["total"]["duration_ms"]["p50"] == 90.0 and ok["total"]["duration_ms"]["p99"] == 190.0
    assert email["total"]["duration_ms"]["p50"] == 1008.0 and email["total"]["duration_ms"]["p95"] == 1018.0
    assert ok["total"]["by_status"] == {"succeeded": 7, "dead": 1, "failed": 2, "revoked": 1}
    assert ok["total"]["queue_wait_ms"]["p99"] == 95.0
    # per bucket over time: the newest ops.ok job (i=1, a minute before NOW) has its own bucket's p50
    assert ok["duration_ms"]["p50"][-2] == 10.0 and ok["duration_ms"]["p50"][-3] is None


def test_a_scheduled_job_is_charted_by_status_but_not_counted_as_finished(stack):  # noqa: F811
    """Like a revive's ``queued``: no run yet, so it adds nothing to the throughput."""
    scheduled = build_record(key="r-later", task="ops.ok", status="scheduled", attempts=0, started_at=NOW - 30_000,
                             finished_at=NOW - 30_000) | {"due_at": NOW + 3_600_000}
    DynamoResultStore(stack.table).write([record(1, at=NOW - 60_000), scheduled])
    agg = Aggregator(stack, window_s=3600, buckets=60, tasks=["ops.ok"], clock=lambda: NOW / 1000)
    agg.refresh(NOW + 1000)
    s = agg.summary(NOW + 1000)
    assert "scheduled" in s["statuses"] and sum(s["by_status"]["scheduled"]) == 1
    assert sum(s["by_status"]["succeeded"]) == 1
    assert s["per_minute"] == round(1 / 60, 2)  # the one that ran, over the hour's 60 minutes


def test_a_refresh_reads_only_what_finished_since_the_last_one(stack):  # noqa: F811
    store = DynamoResultStore(stack.table)
    store.write([record(i, at=NOW - 1_000_000 + i) for i in range(30)])
    clock = [NOW / 1000]
    agg = Aggregator(stack, window_s=3600, tasks=["ops.ok"], clock=lambda: clock[0])
    agg.refresh(NOW)
    store.write([record(100 + i, at=NOW + 4000) for i in range(3)])
    asked = []
    stack.dynamodb.meta.events.register(
        "provide-client-params.dynamodb.Query",
        lambda params, **_: asked.append(int(params["ExpressionAttributeValues"][":a"]["N"])))
    clock[0] += 5
    agg.refresh(NOW + 5000)
    assert asked and min(asked) == NOW - OVERLAP_MS  # from the last refresh, less the overlap
    assert agg.summary(NOW + 5000)["jobs"] == 33


def test_search_filters_by_task_status_time_and_error_text_and_pages_through_every_shard(stack):  # noqa: F811
    store = DynamoResultStore(stack.table)
    dead = [record(i, task="emails.send" if i % 3 else "ops.ok", status="dead", at=NOW - i * 1000,
                   error={"type": "RuntimeError", "message": f"smtp refused {'ada' if i % 2 else 'bob'}"})
            for i in range(45)]
    failed = [record(100 + i, status="failed", at=NOW - i * 1000 - 500,
                     error={"type": "TimeoutError", "message": "slow"}) for i in range(6)]
    ok = [record(200 + i, at=NOW - i * 1000) for i in range(10)]
    store.write(dead + failed + ok + [revoked_record("r-rev", "ops.ok", at_ms=NOW - 100)])
    # 20 newer dead jobs do not hide the failed ones: failed is a filter of its own
    page = search(stack, status="failed", until_ms=NOW, page_size=20)
    assert [r["id"] for r in page["items"]] == [f"r-{100 + i}" for i in range(6)] and page["next"] is None
    assert [r["id"] for r in search(stack, status="revoked", until_ms=NOW)["items"]] == ["r-rev"]
    # paging: every dead record once, newest first, across the four shards
    seen, token = [], None
    while True:
        page = search(stack, status="dead", until_ms=NOW, page_size=7, token=token)
        seen += [r["id"] for r in page["items"]]
        token = page["next"]
        if not token:
            break
    assert seen == [f"r-{i}" for i in range(45)]
    # task, error text and a time range
    hits = search(stack, task="emails.send", error="ada", since_ms=NOW - 20_500, until_ms=NOW, page_size=100)
    assert [r["id"] for r in hits["items"]] == [f"r-{i}" for i in range(21) if i % 3 and i % 2]
    assert {r["id"] for r in search(stack, error="slow", until_ms=NOW)["items"]} == {f"r-{100 + i}" for i in range(6)}
    # succeeded jobs come through their task's index
    assert len(search(stack, status="succeeded", task="ops.ok", until_ms=NOW, page_size=100)["items"]) == 10
    # no filter: every status, succeeded ones for the tasks known
    everything = search(stack, until_ms=NOW, page_size=500, tasks=["ops.ok"])["items"]
    assert len(everything) == 62 and [r["finished_at"] for r in everything] == sorted(
        (r["finished_at"] for r in everything), reverse=True)
    assert set(STATUSES) == set(RECORDED) | {"chord"}


def test_the_api_pages_jobs_shows_a_job_with_its_arguments_and_a_chain_with_links(stack, dash_port):  # noqa: F811
    client = Client(queue_url=stack.queue_url, table=stack.table)
    client.send(Call("emails.send", ["ada@example.com"], job_id="dash-dead"))
    client.enqueue("ops.ok", 1)
    work(stack)

    status, page = request(dash_port, "GET", "/")
    assert status == 200 and 'id="chart-status"' in page and "<script>" in page
    assert "https://" not in page and "<script src" not in page and "<link" not in page  # nothing from elsewhere
    status, meta = request(dash_port, "GET", "/api/meta")
    assert status == 200 and meta["statuses"] == list(STATUSES)
    status, s = request(dash_port, "GET", "/api/summary?window=900")
    assert status == 200 and sum(s["by_status"]["dead"]) == 1 and sum(s["by_status"]["succeeded"]) == 1
    assert s["backlog"]["dlq"]["visible"] == 1 and s["backlog"]["queue"]["visible"] == 0
    assert s["backlog_series"]["dlq"][-1] == 1
    status, found = request(dash_port, "GET", "/api/search?status=dead")
    assert status == 200 and [f["id"] for f in found["items"]] == ["dash-dead"]
    assert "smtp refused ada@example.com" in found["items"][0]["error"]["message"]
    assert request(dash_port, "GET", "/api/search?status=dead&token=not-a-token")[0] == 400
    forged = base64.urlsafe_b64encode(b'{"by_status|dead#0": {"id": {"S": "x"}}}').decode()
    assert request(dash_port, "GET", f"/api/search?status=dead&token={forged}")[0] == 400
    status, job = request(dash_port, "GET", "/api/job/dash-dead")
    assert status == 200 and job["status"] == "dead" and job["generation"] == 1
    assert codec.loads(job["args_preview"]) == {"args": ["ada@example.com"], "kwargs": {}}
    assert request(dash_port, "GET", "/api/job/nobody")[0] == 404

    first = new_job("ops.ok", [1])
    steps = [first.id, next_id(first.id), next_id(next_id(first.id))]
    DynamoResultStore(stack.table).write([build_record(key=i, task="ops.ok", status="succeeded", attempts=1,
                                                       started_at=NOW, finished_at=NOW) for i in steps])
    status, middle = request(dash_port, "GET", f"/api/job/{steps[1]}")
    assert status == 200 and [s["id"] for s in middle["chain"]] == steps


def test_a_chord_is_found_by_its_handles_id_and_retried_by_its_dead_members(stack, dash_port):  # noqa: F811
    client = Client(queue_url=stack.queue_url, table=stack.table)
    handle = GroupHandle("dash-chord", 2, True)
    then = {"task": "ops.ok", "args": [], "kwargs": {}}
    for i, (task, args) in enumerate([("ops.ok", [1]), ("emails.send", ["x@y"])]):
        client.send(Call(task, args, job_id=member_id(handle.id, i),
                         parent={"id": handle.id, "index": i, "size": 2, "then": then}))
    work(stack)
    status, found = request(dash_port, "GET", f"/api/lookup?id={handle.id}")
    assert status == 200 and found == {"kind": "chord", "id": handle.id}
    status, chord = request(dash_port, "GET", f"/api/chord/{handle.id}")
    assert status == 200 and chord["status"] == "dead" and chord["size"] == 2
    assert [(m["id"], m["status"]) for m in chord["members"]] == [(handle.member_ids[0], "succeeded"),
                                                                  (handle.member_ids[1], "dead")]
    status, member = request(dash_port, "GET", f"/api/job/{handle.member_ids[1]}")
    assert member["chord"] == {"id": handle.id, "status": "dead", "size": 2, "index": 1, "callback": False}
    # chords are searchable by status
    status, chords = request(dash_port, "GET", "/api/search?status=chord")
    assert [c["id"] for c in chords["items"]] == [chord_key(handle.id)]

    post = {"X-Kindling-Dashboard": "1"}
    status, refused = request(dash_port, "POST", f"/api/job/{chord_key(handle.id).replace('#', '%23')}/retry", post)
    assert status == 409 and "chord page" in refused["error"]
    status, done = request(dash_port, "POST", f"/api/chord/{handle.id}/retry", post)
    assert status == 200 and [r["id"] for r in done["retried"]] == [handle.member_ids[1]]
    assert client.record(chord_key(handle.id))["status"] == "waiting"  # reopened for the member's next run
    status, again = request(dash_port, "POST", f"/api/chord/{handle.id}/retry", post)
    assert status == 409


def test_every_api_path_needs_the_token_or_a_session_from_the_login(stack, dash_port):  # noqa: F811
    for path in ("/api/meta", "/api/summary", "/api/search?status=dead", "/api/job/x", "/metrics"):
        assert request(dash_port, "GET", path, headers=False)[0] == 401, path
    assert request(dash_port, "GET", "/api/meta", {"Authorization": "Bearer wrong"})[0] == 401
    post = {"X-Kindling-Dashboard": "1", "Content-Type": "application/json"}
    assert request(dash_port, "POST", "/api/login", post, body=b'{"token": "wrong"}')[0] == 401
    conn = http.client.HTTPConnection("127.0.0.1", dash_port, timeout=30)
    conn.request("POST", "/api/login", body=codec.dumps({"token": TOKEN}), headers=post)
    resp = conn.getresponse()
    resp.read()
    cookie = resp.getheader("Set-Cookie")
    assert resp.status == 200 and "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
    session = cookie.split(";")[0]
    conn.request("GET", "/api/meta", headers={"Cookie": session})
    resp = conn.getresponse()
    assert resp.status == 200 and codec.loads(resp.read())["user"] == "token"
    conn.close()


def test_behind_a_proxy_the_header_is_trusted_only_when_enabled(stack):  # noqa: F811
    srv = make_server(stack, host="127.0.0.1", port=0, trust_header="X-Forwarded-User", sample_backlog=False)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        port = srv.server_address[1]
        assert request(port, "GET", "/api/meta", headers=False)[0] == 401
        status, meta = request(port, "GET", "/api/meta", {"X-Forwarded-User": "ada"})
        assert status == 200 and meta["user"] == "ada" and meta["auth"] == "proxy"
    finally:
        srv.shutdown()
        srv.server_close()
    token_server = make_server(stack, host="127.0.0.1", port=0, sample_backlog=False)
    try:  # without the option the header counts for nothing, and a token was made
        assert token_server.auth.generated and len(token_server.auth.token) >= 32
        assert token_server.auth.check({"X-Forwarded-User": "ada"}) is None
    finally:
        token_server.server_close()


def test_metrics_are_prometheus_text_that_its_parser_reads(stack, dash_port):  # noqa: F811
    from prometheus_client.parser import text_string_to_metric_families

    client = Client(queue_url=stack.queue_url, table=stack.table)
    client.send(Call("emails.send", ['a "quoted"\nname'], job_id="m-dead"))
    client.enqueue("ops.ok", 1)
    work(stack)
    status, text = request(dash_port, "GET", "/metrics")
    assert status == 200
    families = {f.name: f for f in text_string_to_metric_families(text)}
    jobs = {(s.labels["task"], s.labels["status"]): s.value for s in families["kindling_jobs"].samples}
    assert jobs[("emails.send", "dead")] == 1 and jobs[("ops.ok", "succeeded")] == 1
    quantiles = {s.labels["quantile"] for s in families["kindling_job_duration_seconds"].samples}
    assert quantiles == {"0.50", "0.95", "0.99"}
    depth = {(s.labels["queue"], s.labels["state"]): s.value for s in families["kindling_queue_messages"].samples}
    assert depth[("dlq", "visible")] == 1


def test_retry_needs_the_pages_header_and_its_own_origin_then_revives_the_job(stack, dash_port):  # noqa: F811
    client = Client(queue_url=stack.queue_url, table=stack.table)
    client.send(Call("emails.send", ["x@y"], job_id="dash-retry"))
    work(stack)
    path = "/api/job/dash-retry/retry"
    assert request(dash_port, "POST", path)[0] == 403  # a plain cross-site form post
    assert request(dash_port, "POST", path, {"X-Kindling-Dashboard": "1", "Origin": "http://evil.example"})[0] == 403
    assert request(dash_port, "GET", "/api/summary", {"Host": "evil.example:80"})[0] == 403  # DNS rebinding
    assert client.status("dash-retry") == "dead"

    status, done = request(dash_port, "POST", path, {"X-Kindling-Dashboard": "1",
                                                  "Origin": f"http://127.0.0.1:{dash_port}"})
    assert status == 200 and done["generation"] == 2 and done["previous_status"] == "dead"
    assert client.record("dash-retry")["status"] == "queued"
    status, refused = request(dash_port, "POST", path, {"X-Kindling-Dashboard": "1"})
    assert status == 409 and "already sent again" in refused["error"]


def test_without_the_task_index_the_charts_show_every_other_status_and_say_why_successes_are_missing(
        moto_endpoint):
    """A table deployed with TaskIndex=false has no by_task index: the charts read by_status
    alone (every outcome but succeeded) and say that successes need the index, rather than
    failing once a task is named (on the command line or by a failure seen)."""
    from kindling.tools.ops import Stack
    from test_ops import _results_table

    plain = Stack(table=_results_table(task_index=False))
    DynamoResultStore(plain.table, task_index=False).write(
        [record(1, status="dead", error={"type": "E", "message": "m"}), record(2, status="succeeded")])
    agg = Aggregator(plain, window_s=3600, buckets=60, tasks=["ops.ok"], clock=lambda: NOW / 1000)
    agg.refresh(NOW + 1000)
    s = agg.summary(NOW + 1000)
    assert sum(s["by_status"]["dead"]) == 1 and sum(s["by_status"]["succeeded"]) == 0
    assert s["tasks"] == ["ops.ok"]
    assert "TaskIndex=true" in s["note"]
    agg.refresh(NOW + 2000)  # and again, without asking for the index it lacks
    assert sum(agg.summary(NOW + 2000)["by_status"]["dead"]) == 1
