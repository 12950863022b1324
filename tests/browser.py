"""Headless Chromium for the web UI's tests and bench/ui_bench.py (Debian's chromium and chromedriver)."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

# The machine has no network beyond loopback: keep Chromium from calling home.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)


@contextlib.contextmanager
def chromium() -> Iterator[WebDriver]:
    """A headless Chromium with a profile of its own (a few MiB), quit and its profile removed on leaving."""
    with tempfile.TemporaryDirectory(prefix="kuberaven-chromium-", ignore_cleanup_errors=True) as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={profile}")
        driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
        try:
            yield driver
        finally:
            driver.quit()
