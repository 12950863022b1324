"""The web UI in real headless Chromium (Debian's chromium + chromedriver, driven by Selenium),
served by a real ``kuberaven run`` against the local control plane.

Screenshots go to test-artifacts/ (KUBERAVEN_TEST_ARTIFACTS moves them).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from kuberaven.kube.client import KubeClient
from kuberaven.testing.env import TestEnv
from tests.helpers import daemon_running

PAUSE = "registry.local:5000/library/pause:3.2"
ARTIFACTS = Path(os.environ.get("KUBERAVEN_TEST_ARTIFACTS", "test-artifacts"))


@pytest.fixture
def daemon(testenv: TestEnv, tmp_path: Path) -> Iterator[str]:
    """``kuberaven run`` (without network translation) against the local control plane; yields its UI's URL."""
    with daemon_running(testenv.control_plane.kubeconfig, tmp_path, "--no-network") as running:
        yield running.url


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    # The machine has no network beyond loopback: keep Chromium from calling home.
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--window-size=1400,1000",
    ):  # fmt: skip
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tempfile.mkdtemp(prefix='kuberaven-chromium-')}")
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(browser: WebDriver, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def cell(browser: WebDriver, instance: str, column: str) -> str | None:
    """The text of one column of an instance's row, or None while the row is not shown."""
    rows = browser.find_elements(By.CSS_SELECTOR, f'tr[data-instance="{instance}"] td.{column}')
    # textContent, not .text: with a busy cluster the row may be scrolled out of the window.
    return (rows[0].get_attribute("textContent") or "").strip() if rows else None


def wait_for(browser: WebDriver, condition: object, timeout: float = 60, what: str = "") -> None:
    try:
        WebDriverWait(browser, timeout, poll_frequency=0.25).until(lambda _: condition())  # type: ignore[operator]
    except Exception:
        screenshot(browser, f"failed-{uuid.uuid4().hex[:6]}")
        raise AssertionError(f"the page never showed {what}") from None


async def test_a_pod_created_in_the_cluster_appears_live(
    daemon: str, browser: WebDriver, kube: KubeClient, namespace: str
) -> None:
    browser.get(daemon)
    wait_for(browser, lambda: browser.find_element(By.ID, "connection").text == "live", 20, "the live badge")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "outside", "labels": {"app": "outside"}},
        "spec": {"containers": [{"name": "main", "image": PAUSE}]},
    }
    await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod)
    instance = f"kubernetes/{namespace}/outside"
    wait_for(browser, lambda: cell(browser, instance, "phase") == "Running", 60, f"{instance} Running")
    assert cell(browser, instance, "managed") == "external"  # created by someone else than kuberaven
    assert (cell(browser, instance, "ip") or "").count(".") == 3

    def created_in_feed() -> bool:  # the event feed is its own stream: it may show the event a poll later
        feed = browser.find_elements(By.CSS_SELECTOR, f'#events li[data-pod="{namespace}/outside"]')
        return any(item.get_attribute("data-status") == "created" for item in feed)

    wait_for(browser, created_in_feed, 10, f"the created event of {namespace}/outside in the feed")
    screenshot(browser, "pod-appears")


async def test_an_instance_created_from_the_form_reaches_running(
    daemon: str, browser: WebDriver, kube: KubeClient
) -> None:
    trust_domain = f"ui-{uuid.uuid4().hex[:6]}"
    browser.get(daemon)
    wait_for(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#f-cluster option"), 20, "the cluster list")
    for field, value in (
        ("f-trust-domain", trust_domain), ("f-slice", "web"), ("f-image", PAUSE), ("f-name", "web-0"),
    ):  # fmt: skip
        browser.find_element(By.ID, field).send_keys(value)
    browser.find_element(By.CSS_SELECTOR, "#create-form button[type=submit]").click()
    result = browser.find_element(By.ID, "create-result")
    wait_for(browser, lambda: "KubernetesServiceInstance web-0 created" in result.text, 20, "the instance created")
    instance = f"kubernetes/{trust_domain}/web-0"
    try:
        wait_for(browser, lambda: cell(browser, instance, "phase") == "Running", 90, f"{instance} Running")
        assert cell(browser, instance, "managed") == "kuberaven"
        assert cell(browser, instance, "status") == "OK"
        pod = await kube.request("GET", f"/api/v1/namespaces/{trust_domain}/pods/web-0")
        assert pod["spec"]["containers"][0]["image"] == PAUSE
        screenshot(browser, "instance-from-form")

        # Bad input in the form: the API's message is shown, nothing is created.
        browser.find_element(By.ID, "f-name").clear()
        browser.find_element(By.ID, "f-name").send_keys("web-1")
        browser.find_element(By.ID, "f-image").clear()
        browser.find_element(By.ID, "f-image").send_keys("Not An Image!")
        browser.find_element(By.CSS_SELECTOR, "#create-form button[type=submit]").click()
        wait_for(browser, lambda: "error" in (result.get_attribute("class") or ""), 20, "the error")
        assert "Image" in result.text
        screenshot(browser, "form-error")
        assert cell(browser, f"kubernetes/{trust_domain}/web-1", "phase") is None
    finally:
        await kube.request("DELETE", f"/api/v1/namespaces/{trust_domain}")
