"""Pods networked in seconds, on real packets: pooled ports, wired at ADD, in bursts, recycled, across SIGKILLs.

Against the package's data path (conftest.py here, tests/datapath.py). The test plays the node's container
runtime as a kubelet does: ADD is called the moment a pod is created bound to the node, not once its VIF
exists (the node agent waits for the VIF itself), and an ADD that answers "try again later" is tried
again. Each pod's first TCP connection is made right after its ADD returns, and must be answered.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from kuberaven.cni.spec import ATTACHMENT_KEY, VALID_ATTACHMENTS
from kuberaven.kube.client import KubeClient
from kuberaven.testing.namespaces import create_namespace
from tests.datapath import (
    PORTS_GROUP,
    DataPath,
    Pod,
    Sandboxes,
    cni,
    connect,
    create_pod,
    delete_netns,
    holders,
    serving,
    vsctl,
)
from tests.helpers import eventually

pytestmark = [pytest.mark.xdist_group(PORTS_GROUP), pytest.mark.timeout(900)]

PORT = 8080
NETPOL = "/apis/networking.k8s.io/v1/namespaces/{}/networkpolicies"
BURST = 12  # pods created at once
VALID = VALID_ATTACHMENTS[0]  # GC's list of the attachments the runtime knows


async def first_try(pod: Pod, server: Pod) -> str | None:
    return await connect(pod.sandbox, server.ip, PORT)


async def burst(
    boxes: Sandboxes, kube: KubeClient, namespace: str, names: list[str], server: Pod, retry_for: float = 0.0
) -> list[tuple[Pod, int, str | None]]:
    """``names`` created at once, each ADDed as soon as it exists, then its first connection to ``server``."""

    async def one(name: str) -> tuple[Pod, int, str | None]:
        await create_pod(kube, boxes.datapath, namespace, name)
        pod, calls = await boxes.wire(namespace, name, retry_for=retry_for)
        return pod, calls, await first_try(pod, server)

    return await asyncio.gather(*(one(name) for name in names))


def assert_distinct(pods: list[Pod]) -> None:
    assert len({p.ip for p in pods}) == len(pods), "no two pods share an address"
    assert len({p.vif.port for p in pods}) == len(pods), "no two pods share a port"


async def test_a_burst_is_wired_at_add_on_the_first_call_and_every_first_connection_is_answered(
    dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    server = await boxes.pod(dp_namespace, "server")
    async with serving(server.sandbox, PORT, "server"):
        wired = await burst(boxes, dp_kube, dp_namespace, [f"p{i:02d}" for i in range(BURST)], server)
    assert [calls for _, calls, _ in wired] == [1] * BURST, "every ADD succeeded on its first call"
    assert [answer for pod, _, answer in wired] == [f"server {pod.ip}" for pod, _, _ in wired]
    assert_distinct([server, *(pod for pod, _, _ in wired)])


async def test_a_gone_pods_port_is_recycled_with_its_pair_and_carries_the_next_pods_packets(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    """DEL parks the old pod's pair, bound; the pod taking its port takes the pair: the same OVS interface, never
    released, so Neutron's port stays ACTIVE with no status change between (each would bump its revision). A GC
    that lists the new pod keeps that interface though it has the old pod's name."""
    server = await boxes.pod(dp_namespace, "server")
    old = await boxes.pod(dp_namespace, "old")
    assert holders(datapath)[old.vif.port] is not None
    host = old.result["interfaces"][0]["name"]
    interface = vsctl(datapath, "get", "Interface", host, "_uuid").stdout
    network = datapath.connection().network
    await eventually(lambda: _assert_status(network.get_port(old.vif.port), "ACTIVE"), timeout=60)
    revision = network.get_port(old.vif.port).revision_number
    await cni(datapath, "DEL", old.sandbox, dp_namespace, "old")  # the kubelet's teardown, then the pod goes
    await dp_kube.request("DELETE", f"/api/v1/namespaces/{dp_namespace}/pods/old", body={"gracePeriodSeconds": 0})
    delete_netns([old.sandbox])  # as the runtime deletes the sandbox: the parked pair lives on
    await eventually(lambda: _free(datapath, old.vif.port), timeout=60)

    # The freed port is the last one into its pool: the next pods take it (a refill may come between).
    async with serving(server.sandbox, PORT, "server"):
        for i in range(6):
            await create_pod(dp_kube, datapath, dp_namespace, f"new{i}")
            new, calls = await boxes.wire(dp_namespace, f"new{i}")
            assert calls == 1 and await first_try(new, server) == f"server {new.ip}"
            if new.vif.port == old.vif.port:
                break
        else:
            pytest.fail(f"no new pod took the recycled port {old.vif.port}")
    assert new.ip == old.ip and new.vif.mac == old.vif.mac, "the same port: its address and MAC"
    assert holders(datapath)[old.vif.port] == (await _uid(dp_kube, dp_namespace, new.name))
    assert new.result["interfaces"][0]["name"] == host, "the old pod's pair, handed over"
    assert vsctl(datapath, "get", "Interface", host, "_uuid").stdout == interface, "the same OVS interface"
    serves = vsctl(datapath, "get", "Interface", host, f"external_ids:{ATTACHMENT_KEY}").stdout.strip()
    assert serves == f'"ctr-{new.sandbox}/eth0"', "the interface names the pod it serves now"
    port = network.get_port(old.vif.port)
    assert (port.status, port.revision_number) == ("ACTIVE", revision), "no status change"
    gc: dict[str, Any] = {
        VALID: [{"containerID": f"ctr-{p.sandbox}", "ifname": "eth0"} for p in boxes.pods if p != old]
    }
    assert await cni(datapath, "GC", new.sandbox, dp_namespace, new.name, **gc) == (0, None)
    async with serving(server.sandbox, PORT, "server"):
        assert await first_try(new, server) == f"server {new.ip}", "GC kept the handed-over pair"


async def test_a_pod_that_a_policy_selects_has_its_groups_before_its_first_packet(
    dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    datapath = boxes.datapath
    for name, labels in (("client", {}), ("api", {"role": "api"}), ("db0", {"role": "db"})):
        await create_pod(dp_kube, datapath, dp_namespace, name, labels)
    # The namespace's first pods wait for its network and pool like any (a kubelet retries "try again later");
    # what this test holds to its first call is db1 below, once the pool has ports.
    client, _ = await boxes.wire(dp_namespace, "client", retry_for=120)
    api, _ = await boxes.wire(dp_namespace, "api", retry_for=120)
    db0, _ = await boxes.wire(dp_namespace, "db0", retry_for=120)
    only_api = [{"from": [{"podSelector": {"matchLabels": {"role": "api"}}}], "ports": [{"port": PORT}]}]
    policy = {"metadata": {"name": "db"}, "spec": {"podSelector": {"matchLabels": {"role": "db"}}, "ingress": only_api}}
    await dp_kube.request("POST", NETPOL.format(dp_namespace), body=policy)
    async with serving(db0.sandbox, PORT, "db0"):
        # The policy's group exists and holds: a pod made now is created into it.
        await eventually(lambda: _reaches(client, db0, False), timeout=90)
        await eventually(lambda: _reaches(api, db0, True), timeout=90)

    # A new pod the policy selects takes a port of the namespace's pool (its groups: open to all) and gets the
    # policy's group before the VIF exists: its very first packet from the client is already refused.
    await create_pod(dp_kube, datapath, dp_namespace, "db1", {"role": "db"})
    db1, calls = await boxes.wire(dp_namespace, "db1")
    async with serving(db1.sandbox, PORT, "db1"):
        assert await first_try(client, db1) is None, "the client's first connection is not answered"
        assert calls == 1 and db1.vif.security_groups != client.vif.security_groups
        await eventually(lambda: _reaches(api, db1, True), timeout=90)


async def test_a_sigkill_of_kuberaven_mid_burst_loses_no_port_and_gives_none_twice(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    server = await boxes.pod(dp_namespace, "server")
    async with serving(server.sandbox, PORT, "server"):
        wiring = asyncio.create_task(
            burst(boxes, dp_kube, dp_namespace, [f"k{i:02d}" for i in range(BURST)], server, retry_for=120)
        )
        await asyncio.sleep(0.5)
        datapath.kill_daemon()
        await asyncio.sleep(2)
        restarted = time.monotonic()
        await asyncio.to_thread(datapath.restart_daemon)
        wired = await wiring
        took = time.monotonic() - restarted
    assert took < 60, f"every pod wired within 60 s of the restart: {took:.0f} s"
    assert [answer for pod, _, answer in wired] == [f"server {pod.ip}" for pod, _, _ in wired]
    pods = [server, *(pod for pod, _, _ in wired)]
    assert_distinct(pods)
    held = holders(datapath)
    uids = [await _uid(dp_kube, dp_namespace, pod.name) for pod in pods]
    assert [held.get(pod.vif.port) for pod in pods] == uids, "each port's row names its pod"


async def test_a_sigkill_of_the_node_agent_mid_burst_leaves_wired_pods_wired_and_the_retried_adds_succeed(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    server = await boxes.pod(dp_namespace, "server")
    before = await boxes.pod(dp_namespace, "before")
    async with serving(server.sandbox, PORT, "server"):
        wiring = asyncio.create_task(
            burst(boxes, dp_kube, dp_namespace, [f"a{i:02d}" for i in range(BURST)], server, retry_for=120)
        )
        await asyncio.sleep(0.5)
        killed = datapath.kill_agent()
        assert await first_try(before, server) == f"server {before.ip}", "a pod wired before the kill keeps talking"
        wired = await wiring
    assert datapath.agent_pid() != killed, "another agent serves the socket"
    assert any(calls > 1 for _, calls, _ in wired), "the kill cut ADDs, which the runtime tried again"
    assert [answer for pod, _, answer in wired] == [f"server {pod.ip}" for pod, _, _ in wired]
    assert_distinct([server, before, *(pod for pod, _, _ in wired)])


async def test_a_namespace_deleted_leaves_no_port_in_neutron(
    datapath: DataPath, dp_kube: KubeClient, boxes: Sandboxes
) -> None:
    namespace = f"dp-gone-{uuid.uuid4().hex[:6]}"
    await create_namespace(dp_kube, namespace)
    web = await boxes.pod(namespace, "web")
    await cni(datapath, "DEL", web.sandbox, namespace, "web")
    boxes.pods.remove(web)
    await dp_kube.request("DELETE", f"/api/v1/namespaces/{namespace}")
    connection = datapath.connection()

    def nothing_left() -> None:
        assert not list(connection.network.ports(network_id=web.vif.network)), "no port on the namespace's network"
        assert connection.network.find_network(web.vif.network) is None
        assert web.vif.port not in holders(datapath)

    await eventually(nothing_left, timeout=180, interval=1)


def _assert_status(port: Any, status: str) -> None:
    assert port.status == status, port.status


def _free(datapath: DataPath, port: str) -> None:
    held = holders(datapath)
    assert port in held and held[port] is None, held.get(port, "no row")


async def _reaches(client: Pod, server: Pod, expected: bool) -> None:
    answer = await connect(client.sandbox, server.ip, PORT)
    assert (answer is not None) is expected, answer


async def _uid(kube: KubeClient, namespace: str, name: str) -> Any:
    return (await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}"))["metadata"]["uid"]
