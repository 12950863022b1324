"""loadBalancerSourceRanges as Kubernetes means them, on real packets through Octavia's ovn provider: outside
clients through the floating IP are admitted only from the ranges, and so are the cluster's pods that come
through it (refused where they send: OVN ACLs on the pods' networks), while a pod of the cluster always reaches
the ClusterIP; can-reach (the daemon's REST answer) says the same as each TCP connection, by either way.

Against the package's data path (conftest.py here, tests/datapath.py; as test_traffic.py). The outside
clients are two addresses the test adds to the external netns (one inside the ranges, one outside), each
connection bound to one of them; the router sends replies to either through the external netns, the
external network's gateway.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx2 as httpx
import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.model.bootstrap import DEFAULT_CLUSTER
from kuberaven.testing.namespaces import create_namespace
from kuberaven.testing.processes import STDLIB_PYTHON
from tests.datapath import (
    CONNECT_TIMEOUT,
    REFUSED,
    SERVICES_GROUP,
    DataPath,
    Pod,
    Sandboxes,
    acls_of,
    attempt,
    connect,
    serving,
)
from tests.helpers import eventually

pytestmark = [pytest.mark.xdist_group(SERVICES_GROUP), pytest.mark.timeout(900)]

RANGE, INSIDE, OUTSIDE = "198.51.100.0/24", "198.51.100.7", "203.0.113.7"
CONDITION = "kuberaven.io/SourceRangesEnforced"
MERGE = "application/merge-patch+json"
CLIENT_FROM = """
import socket, sys
try:
    connection = socket.create_connection(
        (sys.argv[2], int(sys.argv[3])), timeout=float(sys.argv[4]), source_address=(sys.argv[1], 0)
    )
    connection.settimeout(float(sys.argv[4]))
    print(connection.recv(200).decode())
except OSError as error:
    print(f"! {error}")
"""


@contextlib.contextmanager
def addresses(netns: str, *added: str) -> Iterator[None]:
    """``added`` (host addresses) on the external netns' interface while the test runs."""
    for address in added:
        subprocess.run(["ip", "-n", netns, "addr", "add", f"{address}/32", "dev", "eth0"], check=True)
    try:
        yield
    finally:
        for address in added:
            subprocess.run(["ip", "-n", netns, "addr", "del", f"{address}/32", "dev", "eth0"], check=False)


async def connect_from(netns: str, source: str, address: str, port: int) -> str | None:
    """A TCP connection from ``source`` in ``netns``: what the server answered, or None (none made in time)."""
    client = await asyncio.create_subprocess_exec(
        *("ip", "netns", "exec", netns, *STDLIB_PYTHON, "-c", CLIENT_FROM),
        *(source, address, str(port), str(CONNECT_TIMEOUT)),
        stdout=subprocess.PIPE,
    )
    out, _ = await client.communicate()
    answer = out.decode().strip()
    return None if answer.startswith("!") or not answer else answer


def ask(datapath: DataPath, source: str, target: str, port: int, via: str = "cluster-ip") -> dict[str, Any]:
    found = httpx.get(
        f"{datapath.daemon.url}/api/v1/network/can-reach",
        params={"from": source, "to": target, "port": port, "via": via},
        timeout=30,
    )
    assert found.status_code == 200, found.text
    return dict(found.json())


async def test_source_ranges_admit_outside_clients_from_the_ranges_and_pods_always(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    ns = dp_namespace
    web = await boxes.pod(ns, "web-1", labels={"app": "web"})
    client = await boxes.pod(ns, "client")
    spec: dict[str, Any] = {"type": "LoadBalancer", "selector": {"app": "web"}, "loadBalancerSourceRanges": [RANGE]}
    spec["ports"] = [{"port": 80, "targetPort": 8080}]
    body = {"metadata": {"name": "web"}, "spec": spec}
    service = await dp_kube.request("POST", f"/api/v1/namespaces/{ns}/services", body=body)
    vip, external, svc = service["spec"]["clusterIP"], datapath.openstack["external_netns"], f"{ns}/svc/web"

    async def enforced_on_members() -> str:
        found = await dp_kube.request("GET", f"/api/v1/namespaces/{ns}/services/web")
        ingress = found["status"].get("loadBalancer", {}).get("ingress") or []
        condition = next((c for c in found["status"].get("conditions") or [] if c["type"] == CONDITION), None)
        assert ingress and condition, json.dumps(found["status"])
        assert (condition["status"], condition["reason"]) == ("True", "MemberSecurityGroups"), condition
        address = str(ingress[0]["ip"])
        refused = f"pods of the cluster outside them are refused at {address}"
        assert condition["message"] == f"security group rules on the members (1): {RANGE}; {refused}", condition
        return address

    async def agrees(source: str, address: str, port: int, asked: str, allowed: bool) -> str:
        """can-reach's answer about ``asked`` is ``allowed``, and so is a connection from ``source``."""
        answer = ask(datapath, asked, svc, port)
        assert answer["allowed"] is allowed, answer
        if source.startswith("/"):  # a pod's sandbox
            connected = await connect(source.removeprefix("/"), address, port)
        else:
            connected = await connect_from(external, source, address, port)
        assert (connected is not None) is allowed, (connected, answer["reason"])
        return str(answer["reason"])

    fip = await eventually(enforced_on_members, timeout=120)
    with addresses(external, INSIDE, OUTSIDE):
        async with serving(web.sandbox, 8080, "web-1"):
            why = await eventually(lambda: agrees(INSIDE, fip, 80, INSIDE, True), timeout=120)
            assert f"allowed by policy source ranges of Service {ns}/web" in why, why
            assert await connect_from(external, INSIDE, fip, 80) == f"web-1 {INSIDE}"  # OVN keeps the source
            why = await eventually(lambda: agrees(OUTSIDE, fip, 80, OUTSIDE, False), timeout=60)
            assert why.startswith("no member lets it in"), why
            # A pod of the cluster reaches the ClusterIP whatever the ranges.
            why = await eventually(lambda: agrees(f"/{client.sandbox}", vip, 80, f"{ns}/client", True), timeout=60)
            assert "the cluster's own addresses" in why, why
            assert await connect(client.sandbox, vip, 80) == f"web-1 {client.ip}"

    events = await dp_kube.request("GET", f"/api/v1/namespaces/{ns}/events", params={"limit": 500})
    said = [e for e in events["items"] if e.get("reason") == "SourceRanges"]
    assert any(e["type"] == "Normal" and RANGE in e["message"] for e in said), said
    # The member's port carries the cluster's group and the Service's in place of its namespace's; once the
    # Service is gone, its namespace's group again, and the Service's group is deleted.
    network = datapath.connection().network

    def groups_of_web() -> set[str]:
        return {network.get_security_group(group).name for group in network.get_port(web.vif.port).security_group_ids}

    ranged = {f"kuberaven-{DEFAULT_CLUSTER}-in-cluster", f"source-ranges:{ns}/web"}
    assert groups_of_web() == ranged
    # A policy selecting the member: its groups, left alone (a rule added to them could only widen it); the
    # policy gone, the NetworkPolicy reconciler gives the port the ranges' groups again, not its namespace's.
    policies = f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies"
    spec = {"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress"], "ingress": [{}]}
    await dp_kube.request("POST", policies, body={"metadata": {"name": "all-in"}, "spec": spec})

    def policy_s() -> None:
        assert f"policy:{ns}/all-in" in groups_of_web() and not groups_of_web() & ranged, groups_of_web()

    await eventually(policy_s, timeout=120, off_loop=True)
    await dp_kube.request("DELETE", f"{policies}/all-in")
    await eventually(lambda: _equal(groups_of_web(), ranged), timeout=120, off_loop=True)
    await dp_kube.request("DELETE", f"/api/v1/namespaces/{ns}/services/web")

    def namespace_group_again() -> None:
        assert groups_of_web() == {f"namespace-{ns}"}
        assert not list(network.security_groups(name=f"source-ranges:{ns}/web"))

    await eventually(namespace_group_again, timeout=120, off_loop=True)


async def test_pods_are_held_to_the_source_ranges_at_the_ingress_address_only(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    """Kubernetes' e2e case "should only allow access from service loadbalancer source ranges" (service.go), step
    by step: an accepted pod and a dropped pod; the ranges hold the accepted one's address, then the dropped
    one's, then none; each time the ingress address admits only the pods in the ranges. Besides upstream: the
    dropped pod always reaches the ClusterIP, a namespace made later is held to the ranges too, and once the
    Service is gone its ACLs are."""
    ns = dp_namespace
    web = await boxes.pod(ns, "web-1", labels={"app": "web"})
    accept, drop = await boxes.pod(ns, "accept"), await boxes.pod(ns, "drop")
    path = f"/api/v1/namespaces/{ns}/services/ranged"
    spec = {"type": "LoadBalancer", "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}
    body = {"metadata": {"name": "ranged"}, "spec": {**spec, "loadBalancerSourceRanges": [f"{accept.ip}/32"]}}
    service = await dp_kube.request("POST", path.rsplit("/", 1)[0], body=body)
    vip, svc = service["spec"]["clusterIP"], f"{ns}/svc/ranged"

    async def ingress_ip() -> str:
        found = await dp_kube.request("GET", path)
        ingress = found["status"].get("loadBalancer", {}).get("ingress") or []
        assert ingress, json.dumps(found["status"])
        return str(ingress[0]["ip"])

    async def reaches(pod: Pod, address: str, via: str, allowed: bool) -> str:
        """can-reach's answer for ``pod`` by ``via`` is ``allowed``, and so is its TCP connection (else refused)."""
        answer = ask(datapath, f"{pod.namespace}/{pod.name}", svc, 80, via)
        assert answer["allowed"] is allowed, answer
        assert await attempt(pod.sandbox, address, 80) == (f"web-1 {pod.ip}" if allowed else REFUSED), answer
        return str(answer["reason"])

    async def ranges(*pods: Pod) -> None:
        held = [f"{pod.ip}/32" for pod in pods] or None
        await dp_kube.request("PATCH", path, body={"spec": {"loadBalancerSourceRanges": held}}, content_type=MERGE)

    fip = await eventually(ingress_ip, timeout=120)
    async with serving(web.sandbox, 8080, "web-1"):
        await eventually(lambda: reaches(accept, fip, "ingress", True), timeout=120)
        why = await eventually(lambda: reaches(drop, fip, "ingress", False), timeout=60)
        assert why.startswith(f"the pods' networks refuse {ns}/drop ({drop.ip}) at {fip}"), why
        await reaches(drop, vip, "cluster-ip", True)  # the ClusterIP stays open
        await ranges(drop)
        await eventually(lambda: reaches(drop, fip, "ingress", True), timeout=120)
        await eventually(lambda: reaches(accept, fip, "ingress", False), timeout=60)
        await reaches(accept, vip, "cluster-ip", True)
        later = f"{ns}-later"
        await create_namespace(dp_kube, later)
        try:
            late = await boxes.pod(later, "late")
            await eventually(lambda: reaches(late, fip, "ingress", False), timeout=120)
        finally:
            await dp_kube.request("DELETE", f"/api/v1/namespaces/{later}")
        await ranges()
        await eventually(lambda: reaches(accept, fip, "ingress", True), timeout=120)
        await reaches(drop, fip, "ingress", True)
    owner = service["metadata"]["uid"]
    assert acls_of(datapath, owner) == 0  # no ranges, no filter
    await ranges(accept)
    await eventually(lambda: _positive(acls_of(datapath, owner)), timeout=120, off_loop=True)
    await dp_kube.request("DELETE", path)
    await eventually(lambda: _equal(acls_of(datapath, owner), 0), timeout=120, off_loop=True)


def _positive(count: int) -> None:
    assert count > 0


def _equal(found: Any, wanted: Any) -> None:
    assert found == wanted, found
