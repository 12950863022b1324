"""The web UI in real headless Chromium (Debian's chromium + chromedriver, driven by Selenium),
served by a real ``kuberaven run`` against the local control plane.

Screenshots go to test-artifacts/ (KUBERAVEN_TEST_ARTIFACTS moves them).
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from kuberaven.kube.client import KubeClient
from kuberaven.kube.errors import NotFound
from kuberaven.testing.env import TestEnv
from tests.browser import chromium
from tests.helpers import Daemon, daemon_running, eventually, http_status, kuberaven

PAUSE = "registry.local:5000/library/pause:3.2"
ARTIFACTS = Path(os.environ.get("KUBERAVEN_TEST_ARTIFACTS", "test-artifacts"))


@pytest.fixture
def daemon(testenv: TestEnv, tmp_path: Path) -> Iterator[str]:
    """``kuberaven run`` (without network translation) against the local control plane; yields its UI's URL."""
    with daemon_running(testenv.control_plane.kubeconfig, tmp_path, "--no-network") as running:
        yield running.url


# The readiness test's daemon: a watch without its stream this long makes /readyz 503 (the default, 30 s,
# would have the test wait that out); the test waits less than the default, so the setting must reach them.
NOT_READY_AFTER = 3.0


@pytest.fixture
def impatient_daemon(testenv: TestEnv, tmp_path: Path) -> Iterator[str]:
    """As ``daemon``, with ``watch_not_ready_after`` set to NOT_READY_AFTER seconds."""
    env = {"KUBERAVEN_WATCH_NOT_READY_AFTER": str(NOT_READY_AFTER)}
    with daemon_running(testenv.control_plane.kubeconfig, tmp_path, "--no-network", env=env) as running:
        yield running.url


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    with chromium() as driver:
        yield driver


def screenshot(browser: WebDriver, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def cell(browser: WebDriver, instance: str, column: str) -> str | None:
    """The text of one column of an instance's row, or None while the row is not shown."""
    # textContent, not .text: with a busy cluster the row may be scrolled out of the window.
    text = row_text(browser, f'tr[data-instance="{instance}"] td.{column}')
    return text.strip() if text is not None else None


def wait_for(browser: WebDriver, condition: object, timeout: float = 60, what: str = "") -> None:
    try:
        # The views re-render their tables as data arrives: an element found a moment ago may be gone.
        WebDriverWait(browser, timeout, poll_frequency=0.25, ignored_exceptions=[StaleElementReferenceException]).until(
            lambda _: condition()  # type: ignore[operator]
        )
    except Exception:
        screenshot(browser, f"failed-{uuid.uuid4().hex[:6]}")
        raise AssertionError(f"the page never showed {what}") from None


async def test_a_pod_created_in_the_cluster_appears_live(
    daemon: str, browser: WebDriver, kube: KubeClient, namespace: str
) -> None:
    browser.get(f"{daemon}/#inventory?namespace={namespace}")  # the pods of one namespace, whatever else runs
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
    browser.get(f"{daemon}/#inventory?q={trust_domain}")  # the search matches the pods' namespace
    wait_for(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#f-cluster option"), 20, "the cluster list")
    for field, value in (
        ("f-trust-domain", trust_domain),
        ("f-slice", "web"),
        ("f-image", PAUSE),
        ("f-name", "web-0"),
    ):
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
        # Located by the document it is about (the Image, third of the four the form sends), not "request body:1:".
        assert result.text.startswith("document 3: Image.name:"), result.text
        screenshot(browser, "form-error")
        assert cell(browser, f"kubernetes/{trust_domain}/web-1", "phase") is None

        # Delete the trust domain: the preview lists what goes with it, then the namespace goes in Kubernetes.
        click(browser, f'tr[data-trust-domain="kubernetes/{trust_domain}"]')
        wait_for(
            browser,
            lambda: f"TrustDomain {trust_domain}" in browser.find_element(By.ID, "detail-title").text,
            10,
            "the trust domain's details",
        )
        browser.find_element(By.ID, "delete-preview").click()
        plan = browser.find_element(By.ID, "delete-rows")
        wait_for(browser, lambda: "KubernetesServiceInstance" in plan.text, 10, "the delete preview")
        assert f"Slice kubernetes/{trust_domain}/web" in plan.text and "(deleted in Kubernetes)" in plan.text
        assert await kube.request("GET", f"/api/v1/namespaces/{trust_domain}/pods/web-0")  # nothing deleted yet
        screenshot(browser, "delete-preview")
        browser.find_element(By.ID, "delete-confirm").click()
        outcome = browser.find_element(By.ID, "delete-result")
        wait_for(browser, lambda: outcome.text.startswith("deleted TrustDomain"), 20, "the delete's result")
        wait_for(browser, lambda: cell(browser, instance, "phase") is None, 20, "the instance gone from the tree")

        async def namespace_going() -> None:
            with contextlib.suppress(NotFound):  # gone already
                found = await kube.request("GET", f"/api/v1/namespaces/{trust_domain}")
                assert found["status"]["phase"] == "Terminating", found["status"]

        await eventually(namespace_going, 60)
    finally:
        with contextlib.suppress(NotFound):
            await kube.request("DELETE", f"/api/v1/namespaces/{trust_domain}")


# --- the health, network and inventory views (issue 23) ---------------------------------------------------

SECRET_VALUE = "s3cr3t-never-shown"
LONG_NAME = "a-config-map-with-a-name-far-longer-than-any-table-column-" + "x" * 120


@pytest.fixture
def network_daemon(testenv: TestEnv, tmp_path: Path) -> Iterator[Daemon]:
    """``kuberaven run`` with the network translation (embedded backend) against the local control plane."""
    with daemon_running(testenv.control_plane.kubeconfig, tmp_path) as running:
        yield running


def state(browser: WebDriver) -> str:
    return browser.find_element(By.ID, "connection").get_attribute("data-state") or ""


def tab(browser: WebDriver, name: str) -> None:
    browser.find_element(By.CSS_SELECTOR, f'#tabs button[data-tab="{name}"]').click()


def click(browser: WebDriver, selector: str) -> None:
    """Click what ``selector`` finds now (the tree is re-rendered every few seconds: no stale handle)."""
    browser.execute_script("document.querySelector(arguments[0]).click()", selector)


def row_text(browser: WebDriver, selector: str) -> str | None:
    try:
        rows = browser.find_elements(By.CSS_SELECTOR, selector)
        return (rows[0].get_attribute("textContent") or "") if rows else None
    except StaleElementReferenceException:  # re-rendered meanwhile: as if not shown yet
        return None


async def test_the_health_view_and_the_live_badge_follow_readyz(
    impatient_daemon: str, browser: WebDriver, testenv: TestEnv
) -> None:
    daemon = impatient_daemon
    browser.get(daemon)
    wait_for(browser, lambda: state(browser) == "live", 20, "the live badge")
    tab(browser, "health")
    wait_for(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#health-watches tr[data-watch]"), 10, "watches")
    summary = browser.find_element(By.ID, "health-summary")
    assert summary.get_attribute("data-ready") == "true"
    components = [
        c.get_attribute("data-component") or ""
        for c in browser.find_elements(By.CSS_SELECTOR, "#health-components tr[data-component]")
    ]
    assert any(name.startswith("inventory") for name in components), components
    restarts = browser.find_elements(By.CSS_SELECTOR, "#health-components tr[data-component] td:nth-child(4)")
    assert restarts and all((r.get_attribute("textContent") or "").isdigit() for r in restarts)
    screenshot(browser, "health")

    testenv.control_plane.kill_apiserver()  # the watches lose their streams: /readyz answers 503
    try:
        # Well within the default 30 s: the setting, not the default, made the daemon not ready.
        wait_for(browser, lambda: state(browser) != "live", 20, "the badge leaving 'live'")
        assert http_status(f"{daemon}/readyz") == 503
        assert browser.find_element(By.ID, "connection").text.startswith("not ready")
        wait_for(browser, lambda: summary.get_attribute("data-ready") == "false", 10, "the health view's not ready")
        assert browser.find_elements(By.CSS_SELECTOR, "#health-watches tr.error"), "the disconnected watches in red"
        screenshot(browser, "health-not-ready")
    finally:
        testenv.control_plane.start_apiserver()
    wait_for(browser, lambda: state(browser) == "live", 90, "the live badge back once /readyz is 200")


def test_the_page_and_docs_work_through_any_loopback_name_offline(daemon: str, browser: WebDriver) -> None:
    """Styles and scripts load whatever name the page was opened by (a port-forward, say), and /docs
    renders with no network at all (this Chromium reaches nothing beyond loopback)."""
    port = daemon.rpartition(":")[2]
    for base in (daemon, f"http://localhost:{port}"):
        browser.get(base)
        wait_for(browser, lambda: state(browser) == "live", 20, f"the page's script running at {base}")
        header = browser.find_element(By.TAG_NAME, "header").value_of_css_property("background-color")
        assert header == "rgba(29, 36, 48, 1)", f"the stylesheet did not load at {base}"
        assets = [e.get_attribute("href") or "" for e in browser.find_elements(By.CSS_SELECTOR, "link[rel=stylesheet]")]
        assets += [e.get_attribute("src") or "" for e in browser.find_elements(By.CSS_SELECTOR, "script[src]")]
        assert assets and all(a.startswith((f"{base}/static/", f"{base}/libs/")) for a in assets), assets
    browser.get(f"{daemon}/docs")
    wait_for(browser, lambda: "kuberaven" in (row_text(browser, ".swagger-ui .info .title") or ""), 30, "Swagger UI")
    assert browser.find_elements(By.CSS_SELECTOR, ".opblock-tag"), "the API's operations"
    screenshot(browser, "docs")


def pod(name: str, labels: dict[str, str]) -> dict[str, object]:
    ports = [{"name": "http", "containerPort": 8080}]
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": PAUSE, "ports": ports}]},
    }


def netpol(name: str, spec: dict[str, object]) -> dict[str, object]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": name}, "spec": spec}


async def make_shop(kube: KubeClient, namespace: str) -> None:
    """Two pods, a LoadBalancer Service in front of one, policies that let only the client in, and a ConfigMap
    with a very long name and a Secret."""
    core = f"/api/v1/namespaces/{namespace}"
    for name, labels in (("web", {"app": "web"}), ("client", {"app": "client"})):
        await kube.request("POST", f"{core}/pods", body=pod(name, labels))
    service = {
        "metadata": {"name": "front"},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": "web"},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080}],
        },
    }
    await kube.request("POST", f"{core}/services", body=service)
    policies = f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies"
    await kube.request("POST", policies, body=netpol("deny-ingress", {"podSelector": {}, "policyTypes": ["Ingress"]}))
    await kube.request(
        "POST",
        policies,
        body=netpol(
            "from-clients",
            {
                "podSelector": {"matchLabels": {"app": "web"}},
                "ingress": [
                    {"from": [{"podSelector": {"matchLabels": {"app": "client"}}}], "ports": [{"port": "http"}]}
                ],
            },
        ),
    )
    await kube.request("POST", f"{core}/configmaps", body={"metadata": {"name": LONG_NAME}, "data": {"k" * 90: "v"}})
    await kube.request(
        "POST", f"{core}/secrets", body={"metadata": {"name": "creds"}, "stringData": {"password": SECRET_VALUE}}
    )


def ask_reach(browser: WebDriver, source: str, target: str, port: str) -> WebElement:
    for field, value in (("r-from", source), ("r-to", target), ("r-port", port)):
        browser.find_element(By.ID, field).clear()
        browser.find_element(By.ID, field).send_keys(value)
    result = browser.find_element(By.ID, "reach-result")
    browser.execute_script("arguments[0].dataset.allowed = 'asking'", result)
    browser.find_element(By.CSS_SELECTOR, "#reach-form button[type=submit]").click()
    wait_for(browser, lambda: result.get_attribute("data-allowed") != "asking", 20, f"can-reach {source} → {target}")
    return result


async def test_the_network_view_shows_the_translation_and_who_may_reach_whom(
    network_daemon: Daemon, browser: WebDriver, kube: KubeClient, namespace: str
) -> None:
    await make_shop(kube, namespace)
    browser.get(f"{network_daemon.url}/#network")
    browser.find_element(By.ID, "net-namespace").send_keys(namespace)
    browser.find_element(By.CSS_SELECTOR, "#net-filter button[type=submit]").click()
    web, client = f'#net-ports tr[data-net="{namespace}/web"]', f'#net-ports tr[data-net="{namespace}/client"]'
    wait_for(browser, lambda: row_text(browser, web) and row_text(browser, client), 90, "both pods' ports")

    def web_address() -> str:
        # None while the table re-renders (the row found a moment ago is gone): read it again.
        return (row_text(browser, f"{web} td:nth-child(3)") or "").strip()

    wait_for(browser, lambda: web_address().count(".") == 3, 30, "web's port address")
    address = web_address()
    network = f'#net-networks tr[data-net="kubernetes/{namespace}"]'
    wait_for(browser, lambda: "/" in (row_text(browser, network) or ""), 30, "the namespace's network and CIDR")
    balancer = f'#net-loadbalancers tr[data-net="{namespace}/front"]'
    wait_for(browser, lambda: f"{address}:8080" in (row_text(browser, balancer) or ""), 60, "the member in its pool")
    # Read again through wait_for: the table may be re-rendered between two reads (row_text() says None then).
    wait_for(browser, lambda: "TCP:80 → pool" in (row_text(browser, balancer) or ""), 10, "the listener and its pool")
    policy = f'#net-policies tr[data-net="{namespace}/from-clients"]'
    wait_for(browser, lambda: "ingress tcp 8080" in (row_text(browser, policy) or ""), 60, "the policy's rule")
    # The pod whose port carries the group (moved onto it after the group is made).
    wait_for(browser, lambda: "web" in (row_text(browser, f"{policy} td:last-child") or ""), 60, "the policy's pods")
    wait_for(browser, lambda: "policy " in (row_text(browser, web) or ""), 30, "the policy's group on web's port")
    screenshot(browser, "network")

    allowed = ask_reach(browser, f"{namespace}/client", f"{namespace}/web", "8080")
    assert allowed.get_attribute("data-allowed") == "true", allowed.text
    assert f"{namespace}/from-clients" in allowed.text  # the deciding policy and rule
    denied = ask_reach(browser, f"{namespace}/web", f"{namespace}/client", "8080")
    assert denied.get_attribute("data-allowed") == "false", denied.text
    assert f"{namespace}/deny-ingress" in denied.text
    # From outside, to the Service: its floating IP, listener and source ranges let it on, its member keeps it out.
    outside = ask_reach(browser, "203.0.113.7", f"{namespace}/svc/front", "80")
    assert outside.get_attribute("data-allowed") == "false", outside.text
    assert f"floating IP of {namespace}/front" in outside.text, outside.text
    assert f"entering {namespace}/web:8080: denied" in outside.text and "no member lets it in" in outside.text
    screenshot(browser, "can-reach-service")
    denied = ask_reach(browser, f"{namespace}/web", f"{namespace}/client", "8080")
    screenshot(browser, "can-reach")
    unknown = ask_reach(browser, f"{namespace}/web", f"{namespace}/nobody", "8080")
    assert "no port" in unknown.text and "error" in (unknown.get_attribute("class") or "")

    # `kuberaven net get` reads the same state from the daemon's database.
    db = ("--db", network_daemon.database_url)
    ports = kuberaven("net", "get", "ports", "-n", namespace, "-o", "json", *db)
    assert ports.returncode == 0, ports.stderr
    assert {p["pod"]: p["address"] for p in json.loads(ports.stdout)}["web"] == address
    balancers = json.loads(kuberaven("net", "get", "loadbalancers", "-n", namespace, "-o", "json", *db).stdout)
    assert [m["address"] for m in balancers[0]["listeners"][0]["pool"]["members"]] == [address]
    table = kuberaven("net", "get", "policies", "-n", namespace, *db)
    assert table.returncode == 0 and "from-clients" in table.stdout and "deny-ingress" in table.stdout
    wrong = kuberaven("net", "get", "routers", *db)
    assert wrong.returncode == 1 and "no such network listing" in wrong.stderr


async def test_services_config_maps_and_secrets_in_the_tree_with_details_and_no_secret_values(
    network_daemon: Daemon, browser: WebDriver, kube: KubeClient, namespace: str
) -> None:
    await make_shop(kube, namespace)
    browser.get(f"{network_daemon.url}/#inventory?cluster=kubernetes&namespace={namespace}")
    domain = f"kubernetes/{namespace}"
    secret = f'[data-object="KubernetesSecret/{domain}/creds"]'
    wait_for(browser, lambda: "password" in (row_text(browser, secret) or ""), 60, "the Secret's keys")
    service = f'[data-object="Service/{domain}/front"]'
    wait_for(browser, lambda: "8080" in (row_text(browser, service) or ""), 30, "the Service and its port")
    config_map = f'[data-object="KubernetesConfigMap/{domain}/{LONG_NAME}"]'
    wait_for(browser, lambda: row_text(browser, config_map), 30, "the ConfigMap")
    # bootstrap's "default" namespace, seen by the inventory: in step, not "Provisioning in progress".
    default = 'tr[data-trust-domain="kubernetes/default"] td.status'
    wait_for(browser, lambda: (row_text(browser, default) or "").strip() == "OK", 10, "the default namespace OK")
    # A very long name wraps inside the table: nothing sticks out of the inventory's section. (In one script:
    # the tree is re-rendered every few seconds.)
    overflow = browser.execute_script(
        """
        const section = document.getElementById("inventory-section").getBoundingClientRect();
        const cells = [...document.querySelectorAll(arguments[0] + " td")];
        return cells.length ? Math.max(...cells.map((c) => c.getBoundingClientRect().right)) - section.right : null;
    """,
        config_map,
    )
    assert overflow is not None and overflow <= 0, f"the row sticks out by {overflow}px"
    browser.execute_script("document.querySelector(arguments[0]).scrollIntoView()", secret)
    screenshot(browser, "inventory-objects")

    click(browser, secret)
    title = browser.find_element(By.ID, "detail-title")
    wait_for(browser, lambda: title.text == "KubernetesSecret creds", 10, "the Secret's details")
    fields = {row.get_attribute("data-field") for row in browser.find_elements(By.CSS_SELECTOR, "#detail tr")}
    assert {"name", "keys", "uid", "trust_domain", "backend_status"} <= fields
    assert SECRET_VALUE not in browser.page_source
    screenshot(browser, "detail")
