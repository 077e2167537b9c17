#!/usr/bin/env python3
"""Take a screenshot of a page with Debian's Chromium, headless (Selenium, Debian's chromedriver).

    .venv/bin/python infra/chromium/screenshot.py http://127.0.0.1:8080/ docs/dashboard.png \
        [--wait-for '#chart-status rect.bar'] [--click '#failures tr.failure' ...] [--size 1400x1100]

It waits until the CSS selector given with --wait-for matches (the charts are drawn), clicks
what each --click names (first match, in order), and saves a PNG. No browser or driver is downloaded:
infra/chromium/ctl install puts both in /usr/bin.
"""

from __future__ import annotations

import argparse
import tempfile
import time

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# Without the background-networking flags Chromium reaches for Google hosts at start.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars"]


def chromium(user_data_dir: str, size: tuple[int, int] = (1400, 1000)):
    """A Selenium WebDriver on Debian's Chromium, headless, with a fresh profile."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={user_data_dir}")
    options.add_argument(f"--window-size={size[0]},{size[1]}")
    return webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url")
    ap.add_argument("out")
    ap.add_argument("--wait-for", default="body")
    ap.add_argument("--click", action="append", default=[], help="CSS selector to click (repeatable, in order)")
    ap.add_argument("--size", default="1400x1000")
    ap.add_argument("--timeout", type=float, default=30)
    ns = ap.parse_args()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    width, height = (int(n) for n in ns.size.split("x"))
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        driver = chromium(profile, (width, height))
        try:
            driver.get(ns.url)
            WebDriverWait(driver, ns.timeout).until(ec.presence_of_element_located((By.CSS_SELECTOR, ns.wait_for)))
            for selector in ns.click:
                WebDriverWait(driver, ns.timeout).until(ec.element_to_be_clickable((By.CSS_SELECTOR, selector))).click()
                time.sleep(0.5)
            time.sleep(0.5)
            driver.save_screenshot(ns.out)
        finally:
            driver.quit()
    print(ns.out)


if __name__ == "__main__":
    main()
