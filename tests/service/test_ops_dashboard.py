"""The dashboard's JSON API on moto: summaries through the indexes, failures, one job, retry,
and the checks that keep other sites and other host names out."""

import http.client
import threading

import pytest
from kindling import codec
from kindling.client import Call, Client
from kindling.dashboard import make_server
from kindling.dashboard.data import percentile, summary
from kindling.records import build_record
from kindling.results import DynamoResultStore
from test_ops import indexed_table, stack, work  # noqa: F401  (fixtures and the worker loop)


@pytest.fixture
def server(stack):  # noqa: F811
    srv = make_server(stack, host="127.0.0.1", port=0, tasks=["ops.ok"])
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def request(port, method, path, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(method, path, headers=headers or {})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, (codec.loads(body) if resp.getheader("Content-Type", "").startswith("application/json")
                         else body.decode())


def test_percentiles_by_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([5.0], 99) == 5.0
    values = list(range(1, 101))
    assert percentile(values, 50) == 50 and percentile(values, 99) == 99 and percentile(values, 100) == 100


def test_the_summary_counts_by_status_and_task_over_time_from_the_indexes_alone(stack):  # noqa: F811
    now = 1_800_000_000_000
    records = []
    for i in range(20):
        status = "succeeded" if i < 14 else ("dead" if i < 17 else "failed")
        records.append(build_record(key=f"s-{i}", task="ops.ok" if i % 2 else "emails.send", status=status,
                                    attempts=1, started_at=now - i * 60_000, finished_at=now - i * 60_000 + 100,
                                    duration_ms=float(10 * (i + 1))))
    DynamoResultStore(stack.table).write(records)
    seen = []
    stack.dynamodb.meta.events.register("before-call.dynamodb.*", lambda model, **_: seen.append(model.name))

    s = summary(stack, ["ops.ok"], window_s=3600, buckets=60, now_ms=now + 1000)

    assert set(seen) == {"Query"}  # never a Scan
    # emails.send is charted because it is seen failing; its succeeded jobs come through by_task.
    assert s["tasks"] == ["emails.send", "ops.ok"]
    assert sum(s["by_status"]["succeeded"]) == 14 and sum(s["by_status"]["dead"]) == 3
    assert sum(s["by_status"]["failed"]) == 3 and s["jobs"] == 20
    assert sum(s["by_task"]["ops.ok"]) == 10 and sum(s["by_task"]["emails.send"]) == 10
    assert s["by_status"]["succeeded"][-1] == 1  # the newest job lands in the last bucket
    assert s["duration_ms"]["p50"] == 100.0 and s["duration_ms"]["p99"] == 200.0
    assert s["per_minute"] == pytest.approx(20 / 60, abs=0.01)


def test_the_api_serves_the_page_the_summary_failures_and_a_job(stack, server):  # noqa: F811
    client = Client(queue_url=stack.queue_url, table=stack.table)
    client.send(Call("emails.send", ["ada@example.com"], job_id="dash-dead"))
    client.enqueue("ops.ok", 1)
    work(stack)

    status, page = request(server, "GET", "/")
    assert status == 200 and 'id="chart-status"' in page and "<script>" in page
    assert "https://" not in page and "<script src" not in page and "<link" not in page  # nothing from elsewhere
    status, s = request(server, "GET", "/api/summary?window=900")
    assert status == 200 and sum(s["by_status"]["dead"]) == 1 and sum(s["by_status"]["succeeded"]) == 1
    assert s["backlog"]["dlq"]["visible"] == 1 and s["backlog"]["queue"]["visible"] == 0
    status, failures = request(server, "GET", "/api/failures")
    assert status == 200 and [f["id"] for f in failures] == ["dash-dead"]
    assert "smtp refused ada@example.com" in failures[0]["error"]["traceback"]
    status, job = request(server, "GET", "/api/job/dash-dead")
    assert status == 200 and job["status"] == "dead" and job["generation"] == 1
    assert request(server, "GET", "/api/job/nobody")[0] == 404


def test_retry_needs_the_pages_header_and_its_own_origin_then_revives_the_job(stack, server):  # noqa: F811
    client = Client(queue_url=stack.queue_url, table=stack.table)
    client.send(Call("emails.send", ["x@y"], job_id="dash-retry"))
    work(stack)
    path = "/api/job/dash-retry/retry"
    assert request(server, "POST", path)[0] == 403  # a plain cross-site form post
    assert request(server, "POST", path, {"X-Kindling-Dashboard": "1", "Origin": "http://evil.example"})[0] == 403
    assert request(server, "GET", "/api/summary", {"Host": "evil.example:80"})[0] == 403  # DNS rebinding
    assert client.status("dash-retry") == "dead"

    status, done = request(server, "POST", path, {"X-Kindling-Dashboard": "1",
                                                  "Origin": f"http://127.0.0.1:{server}"})
    assert status == 200 and done["generation"] == 2 and done["previous_status"] == "dead"
    assert client.record("dash-retry")["status"] == "queued"
    status, refused = request(server, "POST", path, {"X-Kindling-Dashboard": "1"})
    assert status == 409 and "already sent again" in refused["error"]
