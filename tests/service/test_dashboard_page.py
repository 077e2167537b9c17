"""The dashboard page's own settings, read in Chromium from a dashboard served over moto: a
link's ``?refresh=`` must not make the operator's page poll faster (or slower) than the
bounds allow, whatever the link says."""

from __future__ import annotations

import threading

import pytest
from kindling.tools.dashboard import make_server
from kindling.tools.ops import Stack
from support.chromium import chromium

pytestmark = pytest.mark.slow

FLOOR_MS, DEFAULT_MS, CEILING_MS = 1000, 5000, 3_600_000


@pytest.fixture(scope="module")
def page(moto_endpoint, tmp_path_factory):
    server = make_server(Stack(table="absent", queue_url=f"{moto_endpoint}/123456789012/absent"),
                         host="127.0.0.1", port=0, tasks=["t"])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield driver, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("given, used", [
    ("1", FLOOR_MS), ("0", FLOOR_MS), ("-5", FLOOR_MS), ("999", FLOOR_MS),
    ("2000", 2000), ("", DEFAULT_MS), ("abc", DEFAULT_MS), ("Infinity", CEILING_MS), ("1e12", CEILING_MS),
])
def test_a_links_refresh_is_clamped_to_the_pages_bounds(page, given, used):
    driver, url = page
    driver.get(f"{url}?refresh={given}")
    assert driver.execute_script("return REFRESH_MS") == used


@pytest.mark.parametrize("n", [1, 9, 15, 40])
def test_every_task_gets_a_colour_of_its_own(page, n):
    driver, url = page
    driver.get(url)
    colours = driver.execute_script(f"return palette({n})")
    assert len(colours) == n and len(set(colours)) == n


@pytest.fixture
def scheduled_page(moto_endpoint, table, tmp_path_factory):
    from kindling.core.envelope import new_job, now_ms
    from kindling.core.records import scheduled_record
    from kindling.stores.dynamo import DynamoResultStore

    job = new_job("t", [1], job_id="later-1", not_before=now_ms() + 2 * 3_600_000 - 30_000)
    DynamoResultStore(table).write([scheduled_record(job)])
    server = make_server(Stack(table=table, queue_url=f"{moto_endpoint}/123456789012/absent"),
                         host="127.0.0.1", port=0, tasks=["t"], token="page-test-token")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield driver, f"http://127.0.0.1:{server.server_address[1]}/", job
    server.shutdown()
    server.server_close()


def test_a_scheduled_jobs_page_says_when_it_is_due(scheduled_page):
    from support.chromium import wait_for

    driver, url, job = scheduled_page
    driver.get(f"{url}login#token=page-test-token")  # the login link kindling dashboard prints
    wait_for(driver, "document.querySelector('#view-login').hidden")
    driver.get(f"{url}#/job/{job.id}")
    wait_for(driver, "(document.querySelector('#job-status') || {}).textContent === 'scheduled'")
    due = driver.execute_script("return document.querySelector('#job-due').textContent")
    at = driver.execute_script(f"return utc({job.not_before})")
    assert due in (f"{at} (in 1h 59m)", f"{at} (in 1h 58m)")  # a minute's slack for a slow page
    options = driver.execute_script("return [...document.querySelectorAll('#f-status option')].map(o => o.value)")
    assert "scheduled" in options  # the status search lists scheduled jobs


def test_a_due_time_reads_as_the_terminal_says_it(page):
    driver, url = page
    driver.get(url)
    now = 1_800_000_000_000
    assert driver.execute_script(f"return dueIn({now + 7_170_000}, {now})") == "2027-01-15 09:59:30 (in 1h 59m)"
    assert driver.execute_script(f"return dueIn({now + 90_000_000}, {now})") == "2027-01-16 09:00:00 (in 1d 1h 0m)"
    assert driver.execute_script(f"return dueIn({now - 5_000}, {now})") == "2027-01-15 07:59:55 (due now)"
