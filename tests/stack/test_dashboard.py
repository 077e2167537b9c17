"""The operator's tools on a real run: template.yaml deployed into LocalStack, jobs sent through
the producer client and run by LocalStack's event source mapping and the Lambda worker.

The dashboard is opened in Debian's Chromium (headless, driven by Selenium through Debian's
chromedriver; infra/chromium/ctl installs both) and each view is loaded and its key elements
found: the login, the overview (charts drawn from the run's records, the backlog over time,
the search with its filters and paging), the per-task charts, a job page (arguments,
generations, chain), a chord found by its handle's id (members, retry). A dead job's retry
button revives it, after which the worker runs it again from attempt 1. The CLI's listing and
the DLQ redrive run against the same stack. With KINDLING_SCREENSHOTS=<dir> each view's
screenshot is saved there.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import boto3
import pytest
from kindling.core.status import FINAL
from kindling.producer.client import Call, Client
from kindling.stores.results import from_item
from kindling.tools import cli
from kindling.tools.dashboard import make_server
from kindling.tools.ops import Stack
from kindling.tools.ops.dlq import redrive
from kindling.tools.ops.query import get_job
from support.chromium import chromium, wait_for

pytestmark = [pytest.mark.localstack, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TASKS = ["echo", "sleep", "always_fails", "flaky", "add", "total"]
TOKEN = "stack-test-token"


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
    """A small real run: successes, a flaky job, two jobs that end dead in the DLQ, a revoked
    job, a chain of three and a chord whose second member dies."""
    import kindling.producer.dispatch as dispatch
    import tasks as worker_tasks  # functions/worker: the tasks the deployed worker runs
    from kindling import chain, group

    client = Client(queue_url=stack["QueueUrl"], table=stack["ResultsTableName"])
    dispatch.set_producer(client)
    handles = client.enqueue_many([("echo", [i], {}) for i in range(8)] + [("sleep", [30], {})] * 4
                                  + [("flaky", [], {"fails": 1})] + [("always_fails", ["dashboard test"], {})] * 2)
    revoked = client.send(Call("echo", ["never runs"], delay=10))  # skipped when delivered: the queue drains
    revoked.revoke()
    steps = chain(worker_tasks.add.s(1, 2), worker_tasks.add.s(10), worker_tasks.add.s(y=100)).delay()
    chord = group([worker_tasks.add.s(1, 1), worker_tasks.always_fails.s("member down").set(max_attempts=1)]).then(
        worker_tasks.total.s()).delay()
    got = records(client.table, [h.id for h in handles] + [revoked.id] + chord.member_ids)
    assert steps.result(timeout=120) == 113
    dead = sorted(h.id for h in handles if h.task == "always_fails")
    assert [got[i]["status"] for i in dead] == ["dead", "dead"] and got[revoked.id]["status"] == "revoked"
    dispatch.set_producer(None)
    return {"client": client, "ids": [h.id for h in handles], "dead": dead, "records": got, "revoked": revoked.id,
            "chain": steps.ids, "chord": chord}


@pytest.fixture(scope="module")
def ops_stack(stack):
    return Stack(table=stack["ResultsTableName"], queue_url=stack["QueueUrl"], dlq_url=stack["DeadLetterQueueUrl"])


@pytest.fixture(scope="module")
def dashboard(ops_stack, run):
    server = make_server(ops_stack, host="127.0.0.1", port=0, tasks=TASKS, token=TOKEN)
    server.sampler.interval_s = 1
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    time.sleep(3)  # a few backlog samples
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.sampler.stop()
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with chromium(tmp_path_factory.mktemp("chromium-profile"), size=(1400, 1300)) as driver:
        yield driver


def shot(browser, name: str) -> None:
    where = os.environ.get("KINDLING_SCREENSHOTS")
    if where:
        time.sleep(0.5)  # the last chart drawn
        browser.save_screenshot(str(Path(where) / f"dashboard-{name}.png"))


def test_each_view_of_the_dashboard_loads_in_chromium_with_its_key_elements(browser, dashboard, run, ops_stack):
    from selenium.webdriver.common.by import By

    # Login: no session yet, so the page asks for the token.
    browser.get(f"{dashboard}/login?refresh=2000")
    wait_for(browser, "!document.querySelector('#view-login').hidden")
    shot(browser, "login")
    browser.find_element(By.ID, "login-token").send_keys(TOKEN)
    browser.find_element(By.ID, "login-submit").click()

    # Overview: charts drawn from the run's records, the backlog over time, the search.
    bars = wait_for(browser, "document.querySelector('#chart-status rect.bar') && Array.from("
                             "document.querySelectorAll('#chart-status rect.bar')).map(r => [r.dataset.status,"
                             " Number(r.dataset.count)])")
    counts: dict[str, int] = {}
    for status, n in bars:
        counts[status] = counts.get(status, 0) + n
    assert counts.get("succeeded", 0) >= 13 and counts.get("dead", 0) >= 2 and counts.get("revoked", 0) >= 1, counts
    lines = browser.execute_script("return Array.from(document.querySelectorAll('#chart-task path.series'))"
                                   ".map(p => [p.dataset.name, Number(p.dataset.total), p.getAttribute('stroke')])")
    totals = {name: total for name, total, _ in lines}
    assert all(totals.get(t, 0) >= n for t, n in [("echo", 8), ("sleep", 4), ("always_fails", 2), ("flaky", 1)]), totals
    assert len({color for _, _, color in lines}) == len(lines)  # a colour of its own per task
    assert browser.execute_script("return document.querySelectorAll('#chart-backlog path.series').length") == 3
    statuses = browser.execute_script("return Array.from(document.querySelectorAll('#f-status option'))"
                                      ".map(o => o.value)")
    assert {"revoked", "chord", "dead", "succeeded"} <= set(statuses)
    wait_for(browser, f"document.querySelector('#results tr.row[data-id=\"{run['dead'][0]}\"]')")
    shot(browser, "search")

    # Filter: revoked jobs are found.
    browser.find_element(By.CSS_SELECTOR, "#f-status option[value='revoked']").click()
    browser.find_element(By.ID, "f-go").click()
    shown = wait_for(browser, "Array.from(document.querySelectorAll('#results tr.row td.status'))"
                              ".map(td => td.textContent).every(s => s === 'revoked') && Array.from("
                              "document.querySelectorAll('#results tr.row')).map(r => r.dataset.id)")
    assert run["revoked"] in shown, shown

    # Per-task charts: one card per task, each with throughput, duration and queue wait.
    browser.find_element(By.CSS_SELECTOR, "#nav a[data-view='tasks']").click()
    cards = wait_for(browser, "document.querySelectorAll('#taskgrid .task-card').length >= 4 && "
                              "Array.from(document.querySelectorAll('#taskgrid .task-card')).map(c => c.dataset.task)")
    assert {"echo", "sleep", "always_fails"} <= set(cards)
    wait_for(browser, "document.querySelectorAll('#taskgrid .task-card[data-task=\"sleep\"] path.series').length === 7")
    shot(browser, "tasks")

    # A job page: arguments, generations, chain with links.
    browser.get(f"{dashboard}/#/job/{run['chain'][1]}")
    wait_for(browser, "document.querySelectorAll('#job-chain a').length === 3")
    assert browser.find_element(By.ID, "job-args").text.startswith('{"args":[3,10]')
    assert "generation 1" in browser.find_element(By.ID, "job-generations").text
    shot(browser, "job")

    # A chord by its handle's id, typed in the search box.
    chord = run["chord"]
    box = browser.find_element(By.ID, "lookup-id")
    box.clear()
    box.send_keys(chord.id)
    box.submit()
    wait_for(browser, "document.querySelector('#chord-status') && document.querySelector('#chord-status')"
                      ".textContent === 'dead'")
    members = browser.execute_script("return Array.from(document.querySelectorAll('#chord-members tbody tr'))"
                                     ".map(r => r.dataset.id)")
    assert members == chord.member_ids
    assert not browser.find_element(By.ID, "chord-retry").get_property("disabled")
    shot(browser, "chord")


def test_a_dead_jobs_retry_button_revives_it_and_the_worker_runs_it_again(browser, dashboard, run, ops_stack):
    from selenium.webdriver.common.by import By

    target = run["dead"][0]
    browser.get(f"{dashboard}/#/job/{target}")
    wait_for(browser, "document.querySelector('#job-status') && document.querySelector('#job-status').textContent"
                      " === 'dead'")
    assert "RuntimeError: dashboard test" in browser.find_element(By.ID, "job-traceback").text
    assert browser.find_element(By.ID, "job-args").text == '{"args":["dashboard test"],"kwargs":{}}'
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
    browser.get(f"{dashboard}/#/job/{target}")
    wait_for(browser, "document.querySelectorAll('#job-generations li').length === 2")
    shot(browser, "job-revived")


def test_the_chord_retry_button_sends_its_dead_member_again(browser, dashboard, run):
    chord = run["chord"]
    browser.get(f"{dashboard}/#/chord/{chord.id}")
    wait_for(browser, "document.querySelector('#chord-retry') && !document.querySelector('#chord-retry').disabled")
    browser.execute_script("document.querySelector('#chord-retry').click()")  # the button as it stands now
    text = wait_for(browser, "document.querySelector('#chord-retry-result').textContent.includes('sent again:') && "
                             "document.querySelector('#chord-retry-result').textContent")
    assert chord.member_ids[1] in text


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
