"""Real packets through what kuberaven made on OpenStack: Neutron ports, security groups, OVN load balancers,
floating IPs.

Against the package's data path (conftest.py here, tests/datapath.py). Every pod is a network
namespace of the test's, wired by kuberaven-cni; the servers are Python
sockets inside them, and clients connect with a timeout ("blocked" is a
connection not made within it). Policies and Services take a moment to reach
OVN: checks wait for the outcome, never for a time.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.model.bootstrap import DEFAULT_CLUSTER
from kuberaven.network.backend import CLUSTER_TAG
from kuberaven.network.backends.openstack_ports import DEVICE_OWNER
from kuberaven.testing.namespaces import create_namespace
from tests.datapath import (
    CONFIRM,
    SERVICES_GROUP,
    DataPath,
    Sandboxes,
    attempt,
    connect,
    dropped,
    holders,
    ingress_address,
    serving,
    steadily,
)
from tests.helpers import eventually

pytestmark = [pytest.mark.xdist_group(SERVICES_GROUP), pytest.mark.timeout(900)]

NETPOL = "/apis/networking.k8s.io/v1/namespaces/{}/networkpolicies"
STRETCH = 3  # tries in a row that judge an allowed or denied path once it holds (a dropped try: CONNECT_TIMEOUT)


async def test_two_pods_of_a_namespace_talk_tcp_both_ways(dp_namespace: str, boxes: Sandboxes) -> None:
    a = await boxes.pod(dp_namespace, "a")
    b = await boxes.pod(dp_namespace, "b")
    async with serving(b.sandbox, 8080, "b"), serving(a.sandbox, 8080, "a"):
        assert await connect(a.sandbox, b.ip, 8080) == f"b {a.ip}"  # the source address is the pod's own
        assert await connect(b.sandbox, a.ip, 8080) == f"a {b.ip}"


async def test_network_policies_are_enforced_on_packets(
    dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    a = await boxes.pod(dp_namespace, "a", labels={"app": "a"})
    b = await boxes.pod(dp_namespace, "b", labels={"app": "b"})
    policies = NETPOL.format(dp_namespace)

    async def reaches(port: int, expected: bool) -> None:
        """b's server on ``port`` answers a, or (not ``expected``) a's connection is dropped: b's groups let
        nothing in there; a refusal would say the server is gone, not the policy."""
        if expected:
            assert await connect(a.sandbox, b.ip, port) == f"b{port} {a.ip}"
        else:
            await dropped(a.sandbox, b.ip, port)

    async def both(open_8080: bool, open_9090: bool) -> None:
        await reaches(8080, open_8080)
        await reaches(9090, open_9090)

    async with serving(b.sandbox, 8080, "b8080"), serving(b.sandbox, 9090, "b9090"):
        await steadily(lambda: both(True, True), STRETCH)
        await dp_kube.request("POST", policies, body=_policy("deny", {"app": "b"}, []))
        await eventually(lambda: reaches(8080, False), timeout=60)
        await steadily(lambda: both(False, False), STRETCH)
        allow = [{"from": [{"podSelector": {"matchLabels": {"app": "a"}}}], "ports": [{"port": 8080}]}]
        await dp_kube.request("POST", policies, body=_policy("allow-a", {"app": "b"}, allow))
        await eventually(lambda: reaches(8080, True), timeout=60)
        await steadily(lambda: both(True, False), STRETCH)  # the rule opens its port alone
        for name in ("deny", "allow-a"):
            await dp_kube.request("DELETE", f"{policies}/{name}")
        await eventually(lambda: reaches(9090, True), timeout=60)
        await steadily(lambda: both(True, True), STRETCH)


async def test_pods_of_two_namespaces_reach_each_other_through_the_router(
    dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    """Each namespace has its own network and subnet, joined by the cluster's router: as in Kubernetes, pods
    reach the pods of other namespaces unless policies say otherwise (docs/network.md)."""
    other = f"{dp_namespace}-b"
    await create_namespace(dp_kube, other)
    try:
        a = await boxes.pod(dp_namespace, "a")
        b = await boxes.pod(other, "b")
        assert a.vif.network != b.vif.network and a.vif.cidr != b.vif.cidr
        async with serving(b.sandbox, 8080, "b"):
            assert await connect(a.sandbox, b.ip, 8080) == f"b {a.ip}"  # routed, not translated
    finally:
        await dp_kube.request("DELETE", f"/api/v1/namespaces/{other}")


async def test_a_cluster_ip_service_reaches_both_endpoints_until_one_goes(
    dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    web = [await boxes.pod(dp_namespace, f"web-{i}", labels={"app": "web"}) for i in (1, 2)]
    client = await boxes.pod(dp_namespace, "client")
    service = await _service(dp_kube, dp_namespace, "web", "ClusterIP")
    vip = service["spec"]["clusterIP"]
    async with serving(web[0].sandbox, 8080, "web-1"), serving(web[1].sandbox, 8080, "web-2"):
        await eventually(lambda: _answered(client.sandbox, vip, 80), timeout=120)
        answers = await _answers(client.sandbox, vip, 20)
        assert set(Counter(answer.split()[0] for answer in answers)) == {"web-1", "web-2"}, answers
        assert all(answer.endswith(f" {client.ip}") for answer in answers), answers  # OVN keeps the source
        await dp_kube.request("DELETE", f"/api/v1/namespaces/{dp_namespace}/pods/web-2")
        # Its server still listens in its sandbox: only the load balancer can keep traffic from it. Once a
        # sample says it is gone, a new one of CONFIRM connections must say so too: a check retried until it
        # passes could pass by chance with web-2 still a member.
        await eventually(lambda: _only(client.sandbox, vip, "web-1", 10), timeout=120)
        await _only(client.sandbox, vip, "web-1", CONFIRM)


async def test_a_policy_holds_for_traffic_through_a_service_vip(
    dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    """The OVN load balancer keeps the client's address, so the member's groups judge the client itself: a pod
    a policy keeps from web does not reach it through the Service either."""
    web = await boxes.pod(dp_namespace, "web-1", labels={"app": "web"})
    allowed = await boxes.pod(dp_namespace, "a", labels={"app": "a"})
    denied = await boxes.pod(dp_namespace, "c", labels={"app": "c"})
    vip = (await _service(dp_kube, dp_namespace, "web", "ClusterIP"))["spec"]["clusterIP"]
    only_a = [{"from": [{"podSelector": {"matchLabels": {"app": "a"}}}], "ports": [{"port": 8080}]}]
    await dp_kube.request("POST", NETPOL.format(dp_namespace), body=_policy("only-a", {"app": "web"}, only_a))
    async with serving(web.sandbox, 8080, "web-1"):
        await eventually(lambda: _answered(allowed.sandbox, vip, 80), timeout=120)

        async def denied_directly_and_through_the_vip() -> None:
            await dropped(denied.sandbox, web.ip, 8080)
            await dropped(denied.sandbox, vip, 80)
            assert await connect(allowed.sandbox, vip, 80) == f"web-1 {allowed.ip}"

        await eventually(denied_directly_and_through_the_vip, timeout=60)
        await steadily(denied_directly_and_through_the_vip, STRETCH)


async def test_a_load_balancer_service_is_reached_from_the_external_network(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    web = await boxes.pod(dp_namespace, "web-1", labels={"app": "web"})
    await _service(dp_kube, dp_namespace, "web", "LoadBalancer")

    address = await eventually(lambda: ingress_address(dp_kube, dp_namespace, "web"), timeout=120)
    external = datapath.openstack["external_netns"]
    async with serving(web.sandbox, 8080, "web-1"):
        answer = await eventually(lambda: _answered(external, address, 80), timeout=120)
        assert answer.startswith("web-1 "), answer


async def test_traffic_flows_while_kuberaven_is_killed_and_restarted_and_nothing_is_left_over(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    """The data path is Neutron's and OVN's: kuberaven's death stops nothing. A pod deleted meanwhile gives its
    pooled port back once kuberaven is back, and every port kuberaven holds belongs to a live pod."""
    a = await boxes.pod(dp_namespace, "a")
    b = await boxes.pod(dp_namespace, "b")
    gone = await boxes.pod(dp_namespace, "gone")
    async with serving(b.sandbox, 8080, "b"):
        assert await connect(a.sandbox, b.ip, 8080) == f"b {a.ip}"
        datapath.kill_daemon()
        await dp_kube.request("DELETE", f"/api/v1/namespaces/{dp_namespace}/pods/gone")
        restart = asyncio.create_task(asyncio.to_thread(datapath.restart_daemon))
        answers = [await attempt(a.sandbox, b.ip, 8080)]
        while not restart.done():
            answers.append(await attempt(a.sandbox, b.ip, 8080))
        await restart
        answers.append(await attempt(a.sandbox, b.ip, 8080))
        failed = [(i, answer) for i, answer in enumerate(answers) if answer != f"b {a.ip}"]
        assert len(answers) > 2 and not failed, f"{len(failed)} of {len(answers)} connections failed: {failed}"

    def gone_port_freed() -> None:
        held = holders(datapath)
        assert gone.vif.port in held and held[gone.vif.port] is None, held.get(gone.vif.port, "no row")

    await eventually(gone_port_freed, timeout=120)
    connection = datapath.connection()

    async def every_port_has_a_pod() -> None:
        pods = await dp_kube.request("GET", "/api/v1/pods", params={"limit": 500})
        live = {pod["metadata"]["uid"] for pod in pods["items"]}
        held = connection.network.ports(tags=f"{CLUSTER_TAG}{DEFAULT_CLUSTER}", device_owner=DEVICE_OWNER)
        assert {port.device_id for port in held if port.device_id} <= live, "a port made for one pod"
        assert set(holders(datapath).values()) - {None} <= live, "a pooled port held"

    await eventually(every_port_has_a_pod, timeout=120)


async def _answers(netns: str, address: str, tries: int) -> list[str]:
    """The answers to ``tries`` connections to ``address``:80 (each a new connection, hashed anew)."""
    answers = []
    for _ in range(tries):
        answer = await connect(netns, address, 80)
        assert answer is not None, f"no answer from {address}:80"
        answers.append(answer)
    return answers


async def _only(netns: str, address: str, name: str, tries: int) -> None:
    answers = Counter(answer.split()[0] for answer in await _answers(netns, address, tries))
    assert set(answers) == {name}, answers


async def _answered(netns: str, address: str, port: int) -> str:
    answer = await connect(netns, address, port)
    assert answer is not None, f"no answer from {address}:{port} in {netns}"
    return answer


def _policy(name: str, selected: dict[str, str], ingress: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"podSelector": {"matchLabels": selected}, "policyTypes": ["Ingress"], "ingress": ingress},
    }


async def _service(kube: KubeClient, namespace: str, name: str, kind: str) -> dict[str, Any]:
    body = {
        "metadata": {"name": name},
        "spec": {"type": kind, "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    return await kube.request("POST", f"/api/v1/namespaces/{namespace}/services", body=body)
