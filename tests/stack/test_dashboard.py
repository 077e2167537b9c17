"""The operator's tools on a real run: template.yaml deployed into LocalStack, jobs sent through
the producer client and run by LocalStack's event source mapping and the Lambda worker.

The dashboard is opened in Debian's Chromium (headless, driven by Selenium through Debian's
chromedriver; infra/chromium/ctl installs both): the charts must be drawn from the run's
records, a dead job's traceback must open, and its retry button must revive it, after which
the worker runs it again from attempt 1. The CLI's listing and the DLQ redrive (reviving and
moving in chunks) run against the same stack.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import boto3
import pytest
from kindling import cli
from kindling.client import Client
from kindling.dashboard import make_server
from kindling.ops import Stack
from kindling.ops.dlq import redrive
from kindling.ops.query import get_job
from kindling.results import from_item
from kindling.status import FINAL
from support.chromium import chromium, wait_for

pytestmark = [pytest.mark.localstack, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TASKS = ["echo", "sleep", "always_fails", "flaky"]


def records(table: str, ids: list[str], *, until=FINAL, after_ms: int = 0, timeout: float = 120.0) -> dict:
    """Poll until every id has a record in ``until`` that finished after ``after_ms``."""
    ddb = boto3.client("dynamodb")
    found: dict[str, dict] = {}
    deadline = time.monotonic() + timeout
    while True:
        missing = [i for i in ids if found.get(i, {}).get("status") not in until
                   or found[i].get("finished_at", 0) <= after_ms]
        if not missing:
            return found
        assert time.monotonic() < deadline, f"not final after {timeout}s: {[found.get(i) for i in missing[:2]]}"
        resp = ddb.batch_get_item(RequestItems={table: {"Keys": [{"id": {"S": i}} for i in missing],
                                                        "ConsistentRead": True}})
        for item in resp["Responses"][table]:
            found[item["id"]["S"]] = from_item(item)
        time.sleep(0.3)


@pytest.fixture(scope="module")
def run(stack):
    """A small real run: successes, a flaky job, and two jobs that end dead in the DLQ."""
    client = Client(queue_url=stack["QueueUrl"], table=stack["ResultsTableName"])
    handles = client.enqueue_many([("echo", [i], {}) for i in range(8)] + [("sleep", [30], {})] * 4
                                  + [("flaky", [], {"fails": 1})] + [("always_fails", ["dashboard test"], {})] * 2)
    got = records(client.table, [h.id for h in handles])
    dead = sorted(h.id for h in handles if h.task == "always_fails")
    assert [got[i]["status"] for i in dead] == ["dead", "dead"]
    return {"client": client, "ids": [h.id for h in handles], "dead": dead, "records": got}


@pytest.fixture(scope="module")
def ops_stack(stack):
    return Stack(table=stack["ResultsTableName"], queue_url=stack["QueueUrl"], dlq_url=stack["DeadLetterQueueUrl"])


@pytest.fixture(scope="module")
def dashboard(ops_stack, run):
    server = make_server(ops_stack, host="127.0.0.1", port=0, tasks=TASKS)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/?refresh=2000"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield driver


def test_the_dashboard_charts_a_real_run_opens_a_traceback_and_revives_a_dead_job(browser, dashboard, run,
                                                                                 ops_stack, tmp_path):
    from selenium.webdriver.common.by import By

    browser.get(dashboard)
    # Charts drawn from the run's records: stacked bars by status, one line per task, throughput.
    bars = wait_for(browser, "Array.from(document.querySelectorAll('#chart-status rect.bar'))"
                             ".map(r => [r.dataset.status, Number(r.dataset.count)])")
    counts: dict[str, int] = {}
    for status, n in bars:
        counts[status] = counts.get(status, 0) + n
    assert counts.get("succeeded", 0) >= 13 and counts.get("dead", 0) >= 2, counts
    lines = browser.execute_script("return Array.from(document.querySelectorAll('#chart-task path.series'))"
                                   ".map(p => [p.dataset.name, Number(p.dataset.total), p.getAttribute('d')])")
    totals = {name: total for name, total, _ in lines}
    assert {t: totals.get(t, 0) >= n for t, n in [("echo", 8), ("sleep", 4), ("always_fails", 2), ("flaky", 1)]} \
        == dict.fromkeys(["echo", "sleep", "always_fails", "flaky"], True), totals
    assert all(d.count("L") >= 5 for _, _, d in lines)  # a line across the window, not an empty path
    assert browser.execute_script("return document.querySelectorAll('#chart-throughput circle.point').length") > 0
    tiles = browser.find_element(By.ID, "tiles").text
    assert "duration p50" in tiles and "queue wait p99" in tiles and "in the dead-letter queue" in tiles

    # A dead job's traceback opens from the failures table.
    target = run["dead"][0]
    row = wait_for(browser, f"document.querySelector('#failures tr.failure[data-id=\"{target}\"]')")
    traceback_row = browser.find_element(By.CSS_SELECTOR, f'#failures tr.traceback[data-id="{target}"]')
    assert not traceback_row.is_displayed()
    row.click()
    assert traceback_row.is_displayed()
    text = traceback_row.find_element(By.TAG_NAME, "pre").text
    assert "Traceback (most recent call last)" in text and "RuntimeError: dashboard test" in text
    assert "always_fails" in text
    browser.save_screenshot(str(tmp_path / "dashboard.png"))
    if os.environ.get("KINDLING_SCREENSHOT"):
        shutil.copy(tmp_path / "dashboard.png", os.environ["KINDLING_SCREENSHOT"])

    # Its detail, then the retry button: a new generation, and the worker runs it again.
    traceback_row.find_element(By.CSS_SELECTOR, "button.open-job").click()
    wait_for(browser, "document.querySelector('#job-status') && document.querySelector('#job-status').textContent"
                      " === 'dead'")
    clicked_ms = int(time.time() * 1000)
    browser.find_element(By.ID, "retry").click()
    result = wait_for(browser, "(document.querySelector('#retry-result') || {}).textContent"
                               " && document.querySelector('#retry-result').textContent.includes('enqueued again')"
                               " && document.querySelector('#retry-result').textContent")
    assert "generation 2" in result, result
    job = get_job(ops_stack, target)
    assert job["generation"] == 2 and [p["status"] for p in job["previous"]] == ["dead"]
    again = records(ops_stack.table, [target], after_ms=clicked_ms, timeout=90)[target]
    assert again["status"] == "dead" and again["attempts"] == 4  # run again from attempt 1, not bounced
    assert get_job(ops_stack, target)["generation"] == 2


def test_the_cli_lists_the_runs_dead_jobs_and_redrive_revives_and_moves_the_dlq_in_chunks(run, ops_stack, capsys):
    table = ["--table", ops_stack.table]
    assert cli.main(["jobs", "list", "--status", "dead", "--task", "always_fails", "--since", "30m", *table]) == 0
    out = capsys.readouterr().out
    assert all(i in out for i in run["dead"]) and "RuntimeError: dashboard test" in out

    other = run["dead"][1]
    before = get_job(ops_stack, other)
    assert before["status"] == "dead" and before["generation"] == 1
    lines: list[str] = []
    started_ms = int(time.time() * 1000)
    report = redrive(ops_stack, progress=lines.append, poll_s=0.5)
    assert report["method"] == "receive/send/delete" and report["status"] == "COMPLETED", (report, lines)
    assert report["revived"] >= 1 and report["moved"] >= 1
    assert any(line.startswith("chunk 1: received") for line in lines), lines
    assert get_job(ops_stack, other)["generation"] == 2
    # The worker ran the revived job again (from attempt 1) and it ended dead once more.
    again = records(ops_stack.table, [other], after_ms=started_ms, timeout=90)[other]
    assert again["status"] == "dead" and again["attempts"] == 4
