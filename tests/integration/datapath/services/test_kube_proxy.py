"""What kube-proxy does with a Service, on real packets through Octavia's ovn provider: multi-port Services with
named target ports (TCP and UDP), hairpin, selector-less Services, publishNotReadyAddresses, readiness, scaling
to zero and back, type changes with and without keep-floatingip, a Service re-created under its name. ClientIP
affinity is test_affinity.py's. The table in docs/network.md ("Services: what kube-proxy does, here") says which
test proves which row.

Against the package's data path (conftest.py here, tests/datapath.py; as test_traffic.py). Each test proves
several points on the same pods and Services in one namespace; every wait is for an outcome, with short
connect timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections import Counter
from typing import Any

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.testing.kubelet import crash, restart_container
from kuberaven.testing.processes import STDLIB_PYTHON
from tests.datapath import (
    CONFIRM,
    SERVICES_GROUP,
    DataPath,
    Pod,
    Sandboxes,
    connect,
    ingress_address,
    refused,
    serving,
)
from tests.helpers import eventually

pytestmark = [pytest.mark.xdist_group(SERVICES_GROUP), pytest.mark.timeout(900)]

TIMEOUT = 1.0  # seconds a client waits: OVN answers on the node itself, well within it
WAIT = 120  # seconds an outcome may take to reach OVN (it takes a few on a loaded 2-core machine)
TRIES = 12  # connections that show which members answer (each new one is hashed anew)
MAX_TRIES = 40
PORT = {"port": 80, "targetPort": 8080}
KEEP = "loadbalancer.openstack.org/keep-floatingip"
UDP_SERVER = """
import socket, sys
server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
server.bind(("0.0.0.0", int(sys.argv[1])))
print("up", flush=True)
while True:
    data, peer = server.recvfrom(200)
    server.sendto(f"{sys.argv[2]} {peer[0]}".encode(), peer)
"""
# One socket (one source port) sends a datagram per try: the answers, "!" for none in time.
UDP_CLIENT = """
import socket, sys
client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
client.settimeout(float(sys.argv[3]))
for _ in range(int(sys.argv[4])):
    client.sendto(b"?", (sys.argv[1], int(sys.argv[2])))
    try:
        print(client.recv(200).decode())
    except OSError:
        print("!")
"""


async def udp_answers(netns: str, address: str, port: int, tries: int) -> list[str]:
    client = await asyncio.create_subprocess_exec(
        *("ip", "netns", "exec", netns, *STDLIB_PYTHON, "-c", UDP_CLIENT, address, str(port), str(TIMEOUT)),
        str(tries),
        stdout=subprocess.PIPE,
    )
    out, _ = await client.communicate()
    return out.decode().split("\n")[:tries]


async def answered_by(netns: str, address: str, port: int, wanted: set[str], at_least: int = TRIES) -> None:
    """Exactly the servers ``wanted`` answer new TCP connections: ``at_least`` of them, more (up to
    MAX_TRIES) until each has answered, as hashing may favour one ({"none"}: no connection made, twice)."""
    found: Counter[str] = Counter()
    tries = 0
    while tries < (2 if wanted == {"none"} else max(at_least, MAX_TRIES)):
        answer = await connect(netns, address, port, TIMEOUT)
        found[(answer or "none").split()[0]] += 1
        tries += 1
        if tries >= at_least and set(found) == wanted:
            break
    assert set(found) == wanted, found


async def create(kube: KubeClient, namespace: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return await kube.request("POST", f"/api/v1/namespaces/{namespace}/{kind}", body=body)


async def patch(kube: KubeClient, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    path = f"/api/v1/namespaces/{namespace}/services/{name}"
    return await kube.request("PATCH", path, body=body, content_type="application/merge-patch+json")


def service(name: str, ports: list[dict[str, Any]], selector: dict[str, str] | None, **spec: Any) -> dict[str, Any]:
    annotations = spec.pop("annotations", {})
    body = {"ports": ports, **({"selector": selector} if selector else {}), **spec}
    return {"metadata": {"name": name, "annotations": annotations}, "spec": body}


async def test_ports_hairpin_and_hand_written_endpoints(
    dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    """A two-port Service (TCP and UDP) whose named target port is 8080 on one pod and 8081 on the other; a pod
    reaching itself through it; a Service without a selector whose Endpoints are written by hand. No affinity:
    one client's new connections are hashed anew, and reach both pods."""
    ns = dp_namespace
    pods = []
    for name, number in (("web-1", 8080), ("web-2", 8081)):
        ports = [{"name": "http", "containerPort": number}, {"name": "dns", "containerPort": 5353, "protocol": "UDP"}]
        pods.append(await boxes.pod(ns, name, labels={"app": "web"}, ports=ports))
    web1, web2 = pods
    client = await boxes.pod(ns, "client")
    ports = [
        {"name": "http", "port": 80, "targetPort": "http"},
        {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": "dns"},
    ]
    multi = await create(dp_kube, ns, "services", service("multi", ports, {"app": "web"}))
    manual = await create(dp_kube, ns, "services", service("manual", [{"port": 80, "targetPort": 8081}], None))
    subsets = [{"addresses": [{"ip": web2.ip}], "ports": [{"port": 8081}]}]
    await create(dp_kube, ns, "endpoints", {"metadata": {"name": "manual"}, "subsets": subsets})
    vip, manual_vip = multi["spec"]["clusterIP"], manual["spec"]["clusterIP"]
    async with contextlib.AsyncExitStack() as stack:
        for pod, number in ((web1, 8080), (web2, 8081)):
            await stack.enter_async_context(serving(pod.sandbox, number, f"{pod.name}:{number}"))
            await stack.enter_async_context(serving(pod.sandbox, 5353, f"{pod.name}:udp", UDP_SERVER))
        # Each pod's own number behind port 80; one client's connections reach both.
        await eventually(lambda: answered_by(client.sandbox, vip, 80, {"web-1:8080", "web-2:8081"}), timeout=WAIT)
        await _udp_sticks_to_one_member(client, vip)
        await _hairpin(web1, vip)
        await eventually(lambda: answered_by(client.sandbox, manual_vip, 80, {"web-2:8081"}), timeout=WAIT)


async def _udp_sticks_to_one_member(client: Pod, vip: str) -> None:
    """UDP through the VIP: the datagrams of one socket (one source port) all reach one member, as
    SOURCE_IP_PORT hashes; new sockets reach both members."""

    async def each_socket_one_member() -> set[str]:
        answers = await udp_answers(client.sandbox, vip, 53, 4)
        assert all(answers) and "!" not in answers and len({a.split()[0] for a in answers}) == 1, answers
        assert all(a.endswith(f" {client.ip}") for a in answers), answers  # the client's own address
        return {answers[0].split()[0]}

    seen: set[str] = set()

    async def both_members() -> None:
        seen.update(await each_socket_one_member())
        assert seen == {"web-1:udp", "web-2:udp"}, seen

    await eventually(both_members, timeout=WAIT)


async def _hairpin(pod: Pod, vip: str) -> None:
    """The pod reaches itself through its Service; OVN gives the hairpinned connection the VIP as its source."""

    async def itself() -> str:
        answer = await connect(pod.sandbox, vip, 80, TIMEOUT)
        assert answer is not None and answer.startswith(f"{pod.name}:"), answer
        return answer

    answer = await eventually(itself, timeout=WAIT)
    assert answer == f"{pod.name}:8080 {vip}", answer


async def test_readiness_publish_not_ready_and_scaling_to_zero_and_back(
    dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    """A pod that turns not ready leaves the Service's members and comes back when ready again, but stays in a
    Service that publishes not-ready addresses; three pods, none, three new ones."""
    ns = dp_namespace
    client = await boxes.pod(ns, "client")
    first = [await boxes.pod(ns, f"r-{i}", labels={"app": "r"}) for i in (1, 2, 3)]
    port = [PORT]
    vip = (await create(dp_kube, ns, "services", service("r", port, {"app": "r"})))["spec"]["clusterIP"]
    body = service("r-all", port, {"app": "r"}, publishNotReadyAddresses=True)
    all_vip = (await create(dp_kube, ns, "services", body))["spec"]["clusterIP"]
    names = {pod.name for pod in first}
    async with contextlib.AsyncExitStack() as stack:
        for pod in first:
            await stack.enter_async_context(serving(pod.sandbox, 8080, pod.name))
        await eventually(lambda: answered_by(client.sandbox, vip, 80, names), timeout=WAIT)
        await eventually(lambda: answered_by(client.sandbox, all_vip, 80, names), timeout=WAIT)
        await crash(dp_kube, ns, "r-1")
        await eventually(lambda: answered_by(client.sandbox, vip, 80, names - {"r-1"}), timeout=WAIT)
        # Once more, on a new sample: a check retried until it passes could pass by chance with r-1 still there.
        await answered_by(client.sandbox, vip, 80, names - {"r-1"}, CONFIRM)
        await answered_by(client.sandbox, all_vip, 80, names)  # its slice changed with r's: r-1 still serves
        await restart_container(dp_kube, ns, "r-1", "c")
        await eventually(lambda: answered_by(client.sandbox, vip, 80, names), timeout=WAIT)
        for pod in first:
            await dp_kube.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{pod.name}")
        # No member: the connection is refused at once, as kube-proxy refuses it.
        await eventually(lambda: refused(client.sandbox, vip, 80), timeout=WAIT)
    again = [await boxes.pod(ns, f"r-{i}", labels={"app": "r"}) for i in (4, 5, 6)]
    async with contextlib.AsyncExitStack() as stack:
        for pod in again:
            await stack.enter_async_context(serving(pod.sandbox, 8080, pod.name))
        await eventually(lambda: answered_by(client.sandbox, vip, 80, {p.name for p in again}), timeout=WAIT)


async def test_type_changes_keep_floatingip_and_a_service_recreated_under_its_name(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    """ClusterIP → LoadBalancer → ClusterIP with keep-floatingip: the floating IP answers, then is kept
    unattached; the Service deleted and made again under its name, asking for that address: the new one
    answers there, through its new VIP; → ClusterIP without keep-floatingip: the floating IP is deleted."""
    ns, external = dp_namespace, datapath.openstack["external_netns"]
    web = await boxes.pod(ns, "web-1", labels={"app": "web"})
    client = await boxes.pod(ns, "client")
    port = [PORT]
    network = datapath.connection().network
    first = await create(dp_kube, ns, "services", service("flip", port, {"app": "web"}, annotations={KEEP: "true"}))
    async with serving(web.sandbox, 8080, "web-1"):
        await eventually(lambda: answered_by(client.sandbox, first["spec"]["clusterIP"], 80, {"web-1"}), timeout=WAIT)
        await patch(dp_kube, ns, "flip", {"spec": {"type": "LoadBalancer"}})
        address = await eventually(lambda: ingress_address(dp_kube, ns, "flip"), timeout=WAIT)
        await eventually(lambda: answered_by(external, address, 80, {"web-1"}), timeout=WAIT)
        await patch(dp_kube, ns, "flip", _cluster_ip_again())
        await eventually(lambda: _no_ingress(dp_kube, ns, "flip"), timeout=WAIT)
        await eventually(lambda: answered_by(external, address, 80, {"none"}), timeout=WAIT)
        kept = list(network.ips(floating_ip_address=address))
        assert len(kept) == 1 and kept[0].port_id is None, kept  # kept, unattached
        await answered_by(client.sandbox, first["spec"]["clusterIP"], 80, {"web-1"})

        await dp_kube.request("DELETE", f"/api/v1/namespaces/{ns}/services/flip")
        body = service("flip", port, {"app": "web"}, type="LoadBalancer", loadBalancerIP=address)
        second = await create(dp_kube, ns, "services", body)
        assert second["metadata"]["uid"] != first["metadata"]["uid"]
        assert await eventually(lambda: ingress_address(dp_kube, ns, "flip"), timeout=WAIT) == address
        await eventually(lambda: answered_by(external, address, 80, {"web-1"}), timeout=WAIT)
        old_vip, new_vip = first["spec"]["clusterIP"], second["spec"]["clusterIP"]
        await eventually(lambda: answered_by(client.sandbox, new_vip, 80, {"web-1"}), timeout=WAIT)
        if new_vip != old_vip:  # the old VIP went with its load balancer
            await eventually(lambda: answered_by(client.sandbox, old_vip, 80, {"none"}), timeout=WAIT)
        await patch(dp_kube, ns, "flip", _cluster_ip_again())
        await eventually(lambda: _no_ingress(dp_kube, ns, "flip"), timeout=WAIT)
        await eventually(lambda: not list(network.ips(floating_ip_address=address)), timeout=WAIT, off_loop=True)


def _cluster_ip_again() -> dict[str, Any]:
    """A LoadBalancer Service made ClusterIP again (its node ports and traffic policy go with the type)."""
    return {"spec": {"type": "ClusterIP", "externalTrafficPolicy": None, "ports": [{**PORT, "nodePort": None}]}}


async def _no_ingress(kube: KubeClient, namespace: str, name: str) -> None:
    status = (await kube.request("GET", f"/api/v1/namespaces/{namespace}/services/{name}"))["status"]
    assert not (status.get("loadBalancer") or {}).get("ingress"), status
