"""Debian's Chromium, headless, driven by Selenium through Debian's chromedriver
(infra/chromium/ctl installs both), for the dashboard's browser tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support import ROOT


@contextmanager
def chromium(profile: Path, size: tuple[int, int] = (1400, 1100)) -> Iterator:
    """A Selenium driver on a fresh profile; quit on exit."""
    subprocess.run([str(ROOT / "infra/chromium/ctl"), "install"], check=True, capture_output=True, timeout=900)
    sys.path.insert(0, str(ROOT / "infra/chromium"))
    try:
        from screenshot import chromium as start
    finally:
        sys.path.remove(str(ROOT / "infra/chromium"))
    driver = start(str(profile), size)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver, script: str, timeout: float = 30.0):
    """Poll a JavaScript expression in the page until it is truthy; return its value."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.2).until(lambda d: d.execute_script(f"return {script}"))
