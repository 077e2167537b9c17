"""The dashboard page's own settings, read in Chromium from a dashboard served over moto: a
link's ``?refresh=`` must not make the operator's page poll faster (or slower) than the
bounds allow, whatever the link says."""

from __future__ import annotations

import threading

import pytest
from kindling.dashboard import make_server
from kindling.ops import Stack
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
