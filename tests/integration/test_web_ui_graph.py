"""The network as a picture in real headless Chromium (Cytoscape.js): a namespace with a Service behind a
floating IP and NetworkPolicies, translated by a real ``kuberaven run`` (embedded backend), and a can-reach
answer drawn on it with the hop that decides; and an openstack Service's row drawn by the same graph.js.
"""

from __future__ import annotations

from typing import Any

from selenium.webdriver.remote.webdriver import WebDriver

from kuberaven.kube.client import KubeClient
from kuberaven.network.drivers.load_balancers import MemberSpec
from kuberaven.network.rules.listing import POOLS, Translated, load_balancer_rows, recorded_pools
from kuberaven.network.rules.services import ListenerSpec
from tests.helpers import Daemon
from tests.integration.test_web_ui import ask_reach, browser, make_shop, network_daemon, screenshot, wait_for

__all__ = ["browser", "network_daemon"]  # the fixtures, shared with test_web_ui.py


def graph(browser: WebDriver) -> dict[str, Any]:
    """The picture's nodes (id → kind) and edges (kind, source, target, classes), read from Cytoscape."""
    return browser.execute_script(
        """
        if (typeof netGraph === "undefined" || netGraph === null) return {nodes: {}, edges: []};
        return {
          nodes: Object.fromEntries(netGraph.nodes().map((n) => [n.id(), n.data("kind")])),
          decides: netGraph.nodes(".decides").map((n) => [n.id(), n.data("verdict")]),
          edges: netGraph.edges().map((e) => [e.data("kind"), e.source().id(), e.target().id(), e.classes().join(" ")]),
        };
        """
    )


def shot(browser: WebDriver, name: str) -> None:
    browser.execute_script("document.getElementById('net-graph').scrollIntoView()")
    screenshot(browser, name)


def edge(browser: WebDriver, kind: str, source: str, target: str) -> bool:
    return any(e[:3] == [kind, source, target] for e in graph(browser)["edges"])


def openstack_member_edges(browser: WebDriver) -> list[list[str]]:
    """The member arrows graph.js draws for an openstack Service's row, which has its listeners' members from
    the translation state (Octavia holds the pools): the same function of the rows as for the embedded one."""
    listener = ListenerSpec("shop/api:TCP:80", "TCP", 80, (MemberSpec("shop/api-0:8080", "10.9.0.5", 8080),))
    state = {"load_balancer": "lb-uuid", "listeners": [listener.name], "members": 1, POOLS: recorded_pools([listener])}
    [row] = load_balancer_rows([Translated("k", "Service", "shop", "api", "openstack", state)], [])
    rows = {
        "networks": [{"cluster": "k", "namespace": "shop", "cidr": "10.9.0.0/24", "gateway": "10.9.0.1", "ports": 1}],
        "ports": [{"cluster": "k", "namespace": "shop", "pod": "api-0", "address": "10.9.0.5"}],
        "loadbalancers": [row],
        "policies": [],
    }
    elements = browser.execute_script("return networkElements(arguments[0]);", rows)
    return [
        [e["data"]["source"], e["data"]["target"]]
        for e in elements
        if e["group"] == "edges" and e["data"]["kind"] == "member"
    ]


async def test_the_picture_of_a_namespace_and_a_can_reach_path_on_it(
    network_daemon: Daemon, browser: WebDriver, kube: KubeClient, namespace: str
) -> None:
    await make_shop(kube, namespace)
    browser.get(f"{network_daemon.url}/#network?namespace={namespace}")
    web, client, front = f"port:{namespace}/web", f"port:{namespace}/client", f"lb:{namespace}/front"
    subnet = f"subnet:kubernetes/{namespace}"
    wait_for(browser, lambda: edge(browser, "on", web, subnet) and edge(browser, "on", client, subnet), 90, "the ports")
    assert edge(browser, "interface", subnet, "router:kubernetes")  # the subnet joined to the router
    assert edge(browser, "has", f"net:kubernetes/{namespace}", subnet)
    wait_for(browser, lambda: front in graph(browser)["nodes"], 60, "the Service's load balancer")
    listener = f"listener:{namespace}/front/80"
    wait_for(browser, lambda: edge(browser, "member", listener, web), 60, "the listener pointing to its member")
    assert edge(browser, "listens", front, listener)
    assert openstack_member_edges(browser) == [["listener:shop/api/80", "port:shop/api-0"]]  # no backend branch
    wait_for(
        browser,
        lambda: any(e[0] == "floats" and e[2] == front for e in graph(browser)["edges"]),
        60,
        "the floating IP to its load balancer",
    )
    policy = f"policy:{namespace}/from-clients"
    wait_for(browser, lambda: edge(browser, "guards", policy, web), 60, "the policy's group on web's port")
    assert not edge(browser, "guards", policy, client)  # only the pods it selects
    shot(browser, "network-graph")

    allowed = ask_reach(browser, f"{namespace}/client", f"{namespace}/web", "8080")
    assert allowed.get_attribute("data-allowed") == "true", allowed.text
    wait_for(browser, lambda: graph(browser)["decides"] == [[web, "#1a7f37"]], 10, "the deciding hop in green")
    reach = [e for e in graph(browser)["edges"] if e[0] == "reach"]
    assert [e[1:3] for e in reach] == [[client, web]] and "allowed" in reach[0][3], reach
    shot(browser, "network-graph-reach")

    # From outside to the Service: floating IP → listener → the member, whose policies keep it out (red).
    denied = ask_reach(browser, "203.0.113.7", f"{namespace}/svc/front", "80")
    assert denied.get_attribute("data-allowed") == "false", denied.text
    wait_for(browser, lambda: graph(browser)["decides"] == [[web, "#cf222e"]], 10, "the deciding hop in red")
    path = [e[1:3] for e in graph(browser)["edges"] if e[0] == "reach"]
    assert path[0][0] == "outside:203.0.113.7" and path[-1][1] == web, path
    assert listener in {target for _, target in path}, path
    shot(browser, "network-graph-denied")
