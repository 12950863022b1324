"""The Health tab's plots in real headless Chromium: the last hour of the daemon's own metrics, drawn with uPlot
(served by the daemon from make's node_modules), moving as pod events flow; and the page without the libraries.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from kuberaven.kube.client import KubeClient
from kuberaven.model import Database
from kuberaven.testing.env import TestEnv
from kuberaven.web.app import create_app
from kuberaven.web.libs import LIBS, MODULES
from tests.helpers import daemon_running, serving
from tests.integration.test_web_ui import PAUSE, browser, screenshot, wait_for
from tests.pod_rows import add_pods

__all__ = ["browser"]  # the fixture, shared with test_web_ui.py

SAMPLE_EVERY = 1.0  # seconds between the plots' points: the test waits a few, not minutes


@pytest.fixture
def sampling_daemon(testenv: TestEnv, tmp_path: Path) -> Iterator[str]:
    env = {"KUBERAVEN_METRICS_SAMPLE_EVERY": str(SAMPLE_EVERY)}
    with daemon_running(testenv.control_plane.kubeconfig, tmp_path, "--no-network", env=env) as running:
        yield running.url


def peaks(browser: WebDriver, plot: str) -> dict[str, float]:
    found = browser.execute_script(f"return document.querySelector('[data-plot=\"{plot}\"]')?.dataset.peaks ?? null")
    return json.loads(found) if found else {}


async def test_the_events_plot_moves_when_pod_events_flow(
    sampling_daemon: str, browser: WebDriver, kube: KubeClient, namespace: str
) -> None:
    assert all((MODULES / path).is_file() for path in LIBS.values()), "make web-libs installs the libraries"
    browser.get(f"{sampling_daemon}/#health")
    wait_for(browser, lambda: browser.find_elements(By.CSS_SELECTOR, '[data-plot="events"] canvas'), 20, "uPlot's plot")
    assert not browser.find_elements(By.CSS_SELECTOR, ".lib-missing")
    for i in range(3):
        pod = {"metadata": {"name": f"p{i}"}, "spec": {"containers": [{"name": "c", "image": PAUSE}]}}
        await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod)
    wait_for(browser, lambda: peaks(browser, "events").get("written", 0) > 0, 60, "events written drawn above 0")
    # The plot's own legend names the line (uPlot's, not ours).
    legend = browser.find_element(By.CSS_SELECTOR, '[data-plot="events"] .u-legend').text
    assert "written" in legend and "relayed" in legend, legend
    assert peaks(browser, "backlog"), "the work queues' depth plotted"
    browser.execute_script("document.getElementById('health-plots').scrollIntoView()")
    screenshot(browser, "health-plots")


@pytest.fixture
def without_libraries(database: Database, tmp_path: Path) -> Iterator[str]:
    add_pods(database, "shop", 60, bare=True)
    with serving(create_app(database, libs=tmp_path / "node_modules")) as url:  # nothing installed there
        yield url


def test_without_the_libraries_the_lists_work_and_notes_stand_for_the_plots(
    without_libraries: str, browser: WebDriver
) -> None:
    browser.get(f"{without_libraries}/#inventory?q=pod-00042")
    rows = "return [...document.querySelectorAll('#inventory tr[data-instance]')].map((r) => r.dataset.instance)"
    wait_for(browser, lambda: browser.execute_script(rows) == ["kubernetes/shop/pod-00042"], 20, "the search answered")
    browser.find_element(By.CSS_SELECTOR, '#tabs button[data-tab="health"]').click()
    wait_for(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#health-plots .lib-missing"), 20, "the note")
    assert browser.find_elements(By.CSS_SELECTOR, '[data-plot="events"] strong'), "the latest values instead"
    screenshot(browser, "without-libraries")
