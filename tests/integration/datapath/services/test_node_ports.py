"""Node ports served by kube-proxy beside kuberaven, on real packets (docs/network.md, "Node ports"): each node
has a port into OVN (its InternalIP) and runs kube-proxy in iptables mode in its netns (testing/node_ports.py);
kuberaven serves the Service's cluster IP through Octavia's ovn provider. Upstream's "should be able to create a
functioning NodePort service" (test/e2e/network/service.go, 1.20): two serve-hostname pods, an exec pod that
reaches the cluster IP and every node's InternalIP:nodePort; here also an outside client, through each node's
floating IP; the Service deleted, no node port answers.

Against the package's data path (conftest.py here, tests/datapath.py), started with node ports; every wait is
for an outcome.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.model.bootstrap import DEFAULT_CLUSTER
from kuberaven.testing.node_ports import join, leave
from kuberaven.testing.processes import wait_for
from tests.datapath import SERVICES_GROUP, DataPath, Sandboxes, connect, full_checksums
from tests.helpers import eventually
from tests.integration.datapath.services.test_kube_proxy import answered_by, create, service
from tests.integration.datapath.services.test_service_types import PORT, serve_hostname

pytestmark = [pytest.mark.xdist_group(SERVICES_GROUP), pytest.mark.timeout(900)]

WAIT = 120  # seconds an outcome may take (kube-proxy's rules, OVN's flows) on a loaded 2-core machine
ROUTER_WITHIN = 240  # seconds for kuberaven to make the cluster's router (with its first namespace at the latest)
DOWN_TRIES = 3  # connections that must all fail for a node port to count as closed
DOWN_TIMEOUT = 1.0


def node_ports(datapath: DataPath) -> dict[str, Any]:
    described = datapath.openstack["node_ports"]
    if described is None:
        pytest.skip("the package's data path was started without node ports")
    return dict(described)


@pytest.fixture(scope="module")
def floating(datapath: DataPath) -> Iterator[dict[str, str]]:
    """The nodes' subnet joined to the cluster's router, each node's floating IP: node name → it."""
    described = node_ports(datapath)
    conn = datapath.connection()
    name = f"kuberaven-{DEFAULT_CLUSTER}"
    routers = lambda: list(conn.network.routers(name=name))  # noqa: E731
    wait_for(lambda: bool(routers()), ROUTER_WITHIN, f"kuberaven's router {name}", interval=1)
    router = routers()[0]
    try:
        yield join(conn, router, described)
    finally:
        leave(conn, router, described)
        conn.close()


async def closed(netns: str, address: str, port: int) -> None:
    """No connection to ``address``:``port`` from ``netns`` is made."""
    for _ in range(DOWN_TRIES):
        answer = await connect(netns, address, port, DOWN_TIMEOUT)
        assert answer is None, f"{address}:{port} answered {answer!r}"


async def test_a_node_port_answers_on_every_node_until_the_service_goes(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes, floating: dict[str, str]
) -> None:
    """A NodePort Service of two pods: an exec pod reaches its cluster IP (kuberaven's load balancer) and each
    node's InternalIP:nodePort (that node's kube-proxy), an outside client each node's floating IP:nodePort,
    all answered by both pods; once the Service is deleted, none of the node ports answers."""
    ns, outside = dp_namespace, datapath.openstack["external_netns"]
    addresses = {n["node"]: n["address"] for n in node_ports(datapath)["nodes"]}
    async with contextlib.AsyncExitStack() as stack:
        pods = await serve_hostname(boxes, ns, "nodeport", 2, stack)
        for pod in boxes.pods:  # a node port of the second node crosses the tunnel both ways
            await full_checksums(pod.sandbox)
        spec = (await create(dp_kube, ns, "services", service("nodeport", [PORT], {"app": "nodeport"},
                                                              type="NodePort")))["spec"]  # fmt: skip
        vip, node_port = spec["clusterIP"], spec["ports"][0]["nodePort"]
        execpod = await boxes.pod(ns, "execpod")
        await full_checksums(execpod.sandbox)
        await eventually(lambda: answered_by(execpod.sandbox, vip, 80, pods), timeout=WAIT)
        for node, address in addresses.items():
            await eventually(partial(answered_by, execpod.sandbox, address, node_port, pods), timeout=WAIT)
            fip = floating[node]
            await eventually(partial(answered_by, outside, fip, node_port, pods), timeout=WAIT)
        await dp_kube.request("DELETE", f"/api/v1/namespaces/{ns}/services/nodeport")
        for fip in floating.values():
            await eventually(partial(closed, outside, fip, node_port), timeout=WAIT)
        for address in addresses.values():
            await eventually(partial(closed, execpod.sandbox, address, node_port), timeout=WAIT)
