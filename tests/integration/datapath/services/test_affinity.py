"""sessionAffinity: ClientIP on real packets through Octavia's ovn provider, with `kuberaven run` given OVN's
northbound database (network_ovn_nb_connection, as tests/datapath.py configures it): the affinity is OVN's
own (options:affinity_timeout on the provider's Load_Balancer rows), switched off and on, timed out, through
a ClusterIP and through a LoadBalancer Service's floating IP from the external netns.

Kubernetes' e2e cases (test/e2e/network/service.go, 1.20), step by step: three pods serving their name, a
client making new connections (AFFINITY_CONFIRM of them in a row to one pod is affinity, as upstream's
checkAffinity judges; tried until AFFINITY_WAIT, upstream's AffinityTimeout), the Service switched to None
(connections reach more than one pod) and back; with timeoutSeconds short, after the client stays idle
longer than it, a new connection may reach another pod (upstream tries up to ten times, sleeping
timeoutSeconds + 5 after each answered one). Clients wait 2 s for an answer, as upstream's curl does.
Against the package's data path (conftest.py here, tests/datapath.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.network.backends.ovn_affinity import AFFINITY_OPTION, DEFAULT_AFFINITY_SECONDS
from kuberaven.testing.processes import STDLIB_PYTHON
from tests.datapath import SERVICES_GROUP, DataPath, Pod, Sandboxes, ingress_address, run_process, serving
from tests.helpers import eventually
from tests.integration.datapath.services.test_kube_proxy import UDP_SERVER

pytestmark = [pytest.mark.xdist_group(SERVICES_GROUP), pytest.mark.timeout(900)]

AFFINITY_CONFIRM = 15  # upstream's AffinityConfirmCount: this many new connections in a row to one pod
AFFINITY_WAIT = 120.0  # upstream's AffinityTimeout: how long a check may take to see what it expects
AFTER_TIMEOUT_TRIES = 10  # upstream's tries for another pod once the affinity timed out
SHORT_TIMEOUT = 10  # timeoutSeconds of the timeout test (upstream: 15, its AffinityConfirmCount)
IDLE_MARGIN = 5  # upstream sleeps timeoutSeconds + 5 between those tries
# Seconds a client waits for an answer, as upstream's curl --connect-timeout 2. OVN drops the first packets of a
# client's new affinity session (a SYN, sometimes its retransmission a second later; a UDP socket's datagram).
TIMEOUT = 2.0
BATCH_PAUSE = 0.5  # seconds between two batches of a check, as upstream polls
WAIT = 120  # seconds an outcome may take to reach OVN (a few on a loaded 2-core machine)
OPTIONS = "kuberaven.io/LoadBalancerOptionsApplied"
HTTP = {"name": "http", "port": 80, "targetPort": 8080}
DNS = {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 5353}
PORTS = [HTTP, DNS]  # a ClusterIP Service's; a LoadBalancer Service takes one protocol (Kubernetes 1.20)
# ``count`` new connections (TCP), or new sockets sending one datagram each (UDP), one after another: each
# answer's first word (the pod), "!" for none in time, and the seconds it took. One process per batch: a process
# per connection would cost the shared cores more than the packets do.
CLIENTS = """
import socket, sys, time
address, port, timeout, count, udp = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
for _ in range(count):
    started = time.monotonic()
    try:
        if udp == "udp":
            client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            client.settimeout(timeout)
            client.sendto(b"?", (address, port))
        else:
            client = socket.create_connection((address, port), timeout=timeout)
            client.settimeout(timeout)
        print(client.recv(200).decode().split()[0], time.monotonic() - started)
        client.close()
    except OSError as error:
        print("!", time.monotonic() - started, type(error).__name__)
"""


async def timed_answers(
    netns: str, address: str, port: int, count: int, protocol: str = "tcp"
) -> list[tuple[str | None, float]]:
    """``count`` new connections (or UDP sockets) from ``netns``, in order: the pod that answered (None: none
    within TIMEOUT) and the seconds it took."""
    command = ["ip", "netns", "exec", netns, *STDLIB_PYTHON, "-c", CLIENTS, address, str(port), str(TIMEOUT)]
    _, out, _ = await run_process([*command, str(count), protocol])
    found = [line.split() for line in out.splitlines() if line.strip()]
    return [(None if words[0] == "!" else words[0], float(words[1])) for words in found]


async def answers(netns: str, address: str, port: int, count: int, protocol: str = "tcp") -> list[str]:
    """The pods that answered ``count`` new connections (or UDP sockets) from ``netns``, in order."""
    return [pod for pod, _ in await timed_answers(netns, address, port, count, protocol) if pod is not None]


def host_trace(trace: list[str], count: int) -> tuple[bool, bool]:
    """Upstream's checkHostTrace: whether ``count`` answers were recorded, and whether the last ``count`` (all,
    while fewer) came from one pod."""
    last = trace[-count:]
    return len(trace) >= count, len(set(last)) <= 1


async def check_affinity(netns: str, address: str, port: int, should_hold: bool, protocol: str = "tcp") -> None:
    """Upstream's checkAffinity: new connections in batches of AFFINITY_CONFIRM until the last AFFINITY_CONFIRM
    went to one pod (``should_hold``) or to more than one (not), within AFFINITY_WAIT."""
    trace: list[str] = []
    deadline = time.monotonic() + AFFINITY_WAIT
    while True:
        batch = await timed_answers(netns, address, port, AFFINITY_CONFIRM, protocol)
        trace += [pod for pod, _ in batch if pod is not None]
        fulfilled, holds = host_trace(trace, AFFINITY_CONFIRM)
        if fulfilled and holds == should_hold:
            return
        verdict = "should hold but did not" if should_hold else "should not hold but did"
        assert time.monotonic() < deadline, f"{protocol} to {address}:{port}: affinity {verdict}: {trace}"
        await asyncio.sleep(BATCH_PAUSE)


async def another_pod_after_the_timeout(netns: str, address: str, port: int, timeout_seconds: int) -> None:
    """Upstream's step after the timeout: one connection, and once one was answered the client idle for
    timeoutSeconds + 5, up to AFTER_TIMEOUT_TRIES connections, until a second pod has answered. A connection
    not answered is tried again at once, as upstream's loop does: OVN drops the first packets of a client's new
    affinity session (its learned flow is not there yet), and the next connection meets it."""
    seen: list[tuple[str | None, float]] = []
    for _ in range(AFTER_TIMEOUT_TRIES):
        seen += await timed_answers(netns, address, port, 1)
        if len({pod for pod, _ in seen if pod is not None}) > 1:
            return
        if seen[-1][0] is not None:
            await asyncio.sleep(timeout_seconds + IDLE_MARGIN)
    raise AssertionError(f"session is sticky after reaching the timeout: {seen}")


def service(name: str, selector: dict[str, str], ports: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"ports": ports, "selector": selector, **spec}}


async def patch(kube: KubeClient, namespace: str, name: str, spec: dict[str, Any]) -> None:
    path = f"/api/v1/namespaces/{namespace}/services/{name}"
    await kube.request("PATCH", path, body={"spec": spec}, content_type="application/merge-patch+json")


async def ovn_rows(datapath: DataPath, kube: KubeClient, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    """The provider's OVN Load_Balancer rows of the Service's load balancer: protocol → its options and vips."""
    load_balancer = await eventually(lambda: load_balancer_id(kube, namespace, name), timeout=WAIT)
    nbctl = ["ovn-nbctl", f"--db={datapath.nb_connection}", "--format=json", "--columns=protocol,options,vips"]
    code, out, err = await run_process([*nbctl, "find", "Load_Balancer", f"name={load_balancer}"])
    assert code == 0, err
    return {
        protocol if isinstance(protocol, str) else "": {"options": dict(options[1]), "vips": dict(vips[1])}
        for protocol, options, vips in json.loads(out)["data"]
    }


async def load_balancer_id(kube: KubeClient, namespace: str, name: str) -> str:
    """The Service's Octavia load balancer, from its kuberaven.io/network annotation (written after its sync)."""
    service = await kube.request("GET", f"/api/v1/namespaces/{namespace}/services/{name}")
    summary = (service["metadata"].get("annotations") or {}).get("kuberaven.io/network")
    assert summary, service["metadata"]
    return str(json.loads(summary)["load_balancer"])


async def ovn_affinity(datapath: DataPath, kube: KubeClient, namespace: str, name: str) -> dict[str, str | None]:
    """protocol → the affinity_timeout of the Service's OVN rows (None: not set)."""
    rows = await ovn_rows(datapath, kube, namespace, name)
    return {protocol: row["options"].get(AFFINITY_OPTION) for protocol, row in rows.items()}


async def a_backend(datapath: DataPath, kube: KubeClient, namespace: str, name: str, pod: Pod) -> None:
    """``pod`` is one of the backends of the Service's TCP row (the provider wrote its vips)."""
    rows = await ovn_rows(datapath, kube, namespace, name)
    assert any(pod.ip in backends for backends in rows["tcp"]["vips"].values()), rows


async def nothing_left_out(kube: KubeClient, namespace: str, name: str) -> None:
    """The Service's options condition does not say its affinity was left out (it is absent, or True)."""
    status = (await kube.request("GET", f"/api/v1/namespaces/{namespace}/services/{name}"))["status"]
    condition = next((c for c in status.get("conditions") or [] if c["type"] == OPTIONS), None)
    assert condition is None or condition["status"] == "True", condition


@contextlib.asynccontextmanager
async def served(pods: list[Pod]) -> AsyncIterator[None]:
    """Each pod answering with its name on TCP 8080 and UDP 5353."""
    async with contextlib.AsyncExitStack() as stack:
        for pod in pods:
            await stack.enter_async_context(serving(pod.sandbox, 8080, pod.name))
            await stack.enter_async_context(serving(pod.sandbox, 5353, pod.name, UDP_SERVER))
        yield


async def three_pods(boxes: Sandboxes, namespace: str) -> list[Pod]:
    return [await boxes.pod(namespace, f"aff-{i}", labels={"app": "aff"}) for i in (1, 2, 3)]


async def test_clusterip_affinity_holds_on_tcp_and_udp_switches_off_and_on_and_survives_members_changing(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    """Upstream: "should have session affinity work for service with type clusterIP" and "should be able to
    switch session affinity for service with type clusterIP". Also UDP (new sockets of one client stick to
    one pod), and a member added (the provider rewrites the row's vips) keeps the affinity."""
    ns = dp_namespace
    pods = await three_pods(boxes, ns)
    client = await boxes.pod(ns, "client")
    created = await dp_kube.request(
        "POST",
        f"/api/v1/namespaces/{ns}/services",
        body=service("aff", {"app": "aff"}, PORTS, sessionAffinity="ClientIP"),
    )
    vip = created["spec"]["clusterIP"]
    async with contextlib.AsyncExitStack() as serving_pods:
        await serving_pods.enter_async_context(served(pods))
        await check_affinity(client.sandbox, vip, 80, should_hold=True)
        await check_affinity(client.sandbox, vip, 53, should_hold=True, protocol="udp")
        default = str(DEFAULT_AFFINITY_SECONDS)
        assert await ovn_affinity(datapath, dp_kube, ns, "aff") == {"tcp": default, "udp": default}
        await eventually(lambda: nothing_left_out(dp_kube, ns, "aff"), timeout=WAIT)
        fourth = await boxes.pod(ns, "aff-4", labels={"app": "aff"})
        await serving_pods.enter_async_context(served([fourth]))  # a member from now on: it answers until the end
        await eventually(lambda: a_backend(datapath, dp_kube, ns, "aff", fourth), timeout=WAIT)
        await check_affinity(client.sandbox, vip, 80, should_hold=True)
        assert await ovn_affinity(datapath, dp_kube, ns, "aff") == {"tcp": default, "udp": default}
        await patch(dp_kube, ns, "aff", {"sessionAffinity": "None", "sessionAffinityConfig": None})
        await check_affinity(client.sandbox, vip, 80, should_hold=False)
        await check_affinity(client.sandbox, vip, 53, should_hold=False, protocol="udp")
        assert await ovn_affinity(datapath, dp_kube, ns, "aff") == {"tcp": None, "udp": None}
        await patch(dp_kube, ns, "aff", {"sessionAffinity": "ClientIP"})
        await check_affinity(client.sandbox, vip, 80, should_hold=True)


async def test_affinity_times_out_on_the_clusterip_and_through_the_floating_ip(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    """Upstream: "should have session affinity timeout work for service with type clusterIP"; then the same
    Service made type LoadBalancer (its TCP port only), through its floating IP from the external netns."""
    ns, external = dp_namespace, datapath.openstack["external_netns"]
    pods = await three_pods(boxes, ns)
    client = await boxes.pod(ns, "client")
    config = {"clientIP": {"timeoutSeconds": SHORT_TIMEOUT}}
    body = service("aff-timeout", {"app": "aff"}, PORTS, sessionAffinity="ClientIP", sessionAffinityConfig=config)
    vip = (await dp_kube.request("POST", f"/api/v1/namespaces/{ns}/services", body=body))["spec"]["clusterIP"]
    async with served(pods):
        await check_affinity(client.sandbox, vip, 80, should_hold=True)
        short = str(SHORT_TIMEOUT)
        assert await ovn_affinity(datapath, dp_kube, ns, "aff-timeout") == {"tcp": short, "udp": short}
        await another_pod_after_the_timeout(client.sandbox, vip, 80, SHORT_TIMEOUT)
        await patch(dp_kube, ns, "aff-timeout", {"type": "LoadBalancer", "ports": [HTTP]})
        address = await eventually(lambda: ingress_address(dp_kube, ns, "aff-timeout"), timeout=WAIT)
        await check_affinity(external, address, 80, should_hold=True)
        await another_pod_after_the_timeout(external, address, 80, SHORT_TIMEOUT)


async def test_loadbalancer_affinity_through_the_floating_ip_with_either_traffic_policy_and_switched(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    """Upstream: "should have session affinity work for LoadBalancer service with ESIPP on" and "… with ESIPP
    off", "should be able to switch session affinity for LoadBalancer service with ESIPP off": from the
    external netns through each Service's floating IP."""
    ns, external = dp_namespace, datapath.openstack["external_netns"]
    pods = await three_pods(boxes, ns)
    for name, policy in (("aff-lb", "Cluster"), ("aff-lb-esipp", "Local")):
        body = service(name, {"app": "aff"}, [HTTP], type="LoadBalancer", externalTrafficPolicy=policy)
        body["spec"]["sessionAffinity"] = "ClientIP"
        await dp_kube.request("POST", f"/api/v1/namespaces/{ns}/services", body=body)
    async with served(pods):
        local = await eventually(lambda: ingress_address(dp_kube, ns, "aff-lb-esipp"), timeout=WAIT)
        await check_affinity(external, local, 80, should_hold=True)
        address = await eventually(lambda: ingress_address(dp_kube, ns, "aff-lb"), timeout=WAIT)
        await check_affinity(external, address, 80, should_hold=True)
        await patch(dp_kube, ns, "aff-lb", {"sessionAffinity": "None", "sessionAffinityConfig": None})
        await check_affinity(external, address, 80, should_hold=False)
        await patch(dp_kube, ns, "aff-lb", {"sessionAffinity": "ClientIP"})
        await check_affinity(external, address, 80, should_hold=True)
