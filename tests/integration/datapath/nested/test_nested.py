"""Nested pods on real packets: Kubernetes nodes in "VMs" whose pods are subports of the VMs' Neutron trunks.

Against this package's own data path (conftest.py here, tests/datapath.py), started with two VMs
(`testenv up --nested 2`): network namespaces whose eth0 is a trunk's parent port on the chassis' br-int,
each a Node (InternalIP: that port's address) with its own node agent. A nested pod is a sandbox netns of
the test's wired by kuberaven-cni through its VM's agent (cni_config): an 802.1Q link on the VM's eth0, so
its packets reach OVN tagged with the subport's VLAN id. Traffic stays between the test's namespaces, the
VMs and the external netns.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
from collections import Counter
from typing import Any

import pytest

from kuberaven.kube.client import KubeClient
from kuberaven.model.bootstrap import DEFAULT_CLUSTER
from kuberaven.network.backend import CLUSTER_TAG
from kuberaven.network.vif import PORT_ACTIVE, Binding, Vif
from tests.datapath import (
    PORTS_GROUP,
    DataPath,
    Pod,
    Sandboxes,
    cni,
    connect,
    create_pod,
    dropped,
    ingress_address,
    serving,
)
from tests.helpers import NO_8021Q, eventually, kernel_makes_vlan_links, vif_of

pytestmark = [pytest.mark.xdist_group(PORTS_GROUP), pytest.mark.timeout(900)]

AGENT_BACK_WITHIN = 60  # seconds for the supervisor to start a VM's agent again and its watch to sync
NETPOL = "/apis/networking.k8s.io/v1/namespaces/{}/networkpolicies"
TRANSLATION = "kuberaven.network.rules.trunks"  # the nested translation: nodes' trunks, pods' subports
NO_TRANSLATION = f"the nested translation ({TRANSLATION}: nodes' trunks, pods' subports) is not on this branch"


async def test_the_vms_are_nodes_on_trunk_parents_and_their_pods_get_active_subports(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    """What `testenv up --nested 2` made: a Node per VM whose InternalIP is its port's, the port ACTIVE on the
    chassis and a trunk's parent, the VM's eth0 with its MAC; the VMs reach each other through OVN. A pod bound
    to a VM gets a VIF of binding vlan on that VM's trunk, whose subport turns ACTIVE with no OVS in the VM;
    where the kernel makes no 802.1Q links, its ADD says so naming the trunk and leaves nothing behind."""
    vms = datapath.nested
    assert len(vms) == 2
    connection = datapath.connection()
    for vm in vms:
        node = await dp_kube.request("GET", f"/api/v1/nodes/{vm['node']}")
        assert {"type": "InternalIP", "address": vm["address"]} in node["status"]["addresses"]
        port = connection.network.get_port(vm["port"])
        assert (port.status, port.binding_host_id, port.mac_address) == ("ACTIVE", datapath.node, vm["mac"])
        assert connection.network.get_trunk(vm["trunk"]).port_id == vm["port"]
        nic = json.loads(await _ip(vm["netns"], "-j", "address", "show", "dev", "eth0"))[0]
        assert nic["address"] == vm["mac"] and vm["address"] in [a["local"] for a in nic["addr_info"]]
    one, two = vms
    async with serving(two["netns"], 8080, "vm-1"):
        assert await connect(one["netns"], two["address"], 8080) == f"vm-1 {one['address']}"
    # A VM's agent SIGKILLed is started again by the environment, as the kubelet restarts a DaemonSet's pod.
    killed = datapath.kill_agent(one)

    async def agent_back() -> None:
        assert datapath.agent_pid(one) != killed
        assert await cni(datapath, "STATUS", "", "", "", one) == (0, None)

    await eventually(agent_back, timeout=AGENT_BACK_WITHIN)
    if importlib.util.find_spec(TRANSLATION) is None:
        pytest.skip(NO_TRANSLATION)
    await create_pod(dp_kube, datapath, dp_namespace, "a", node=one["node"])

    async def active() -> Vif:
        vif = await vif_of(dp_kube, dp_namespace, "a", timeout=1)
        assert vif.status == PORT_ACTIVE, vif
        return vif

    vif = await eventually(active, timeout=60)
    assert (vif.binding, vif.trunk, vif.parent_mac) == (Binding.VLAN, one["trunk"], one["mac"])
    subports = connection.network.get_trunk(one["trunk"]).sub_ports
    assert {"port_id": vif.port, "segmentation_id": vif.vlan_id, "segmentation_type": "vlan"} in subports
    if not kernel_makes_vlan_links():  # where it can, the next test wires nested pods
        sandbox = boxes.new()
        code, error = await cni(datapath, "ADD", sandbox, dp_namespace, "a", one)
        assert code == 1 and error is not None, error
        assert f"trunk {one['trunk']}: the VM's kernel makes no 802.1Q links" in error["msg"], error
        assert await _links(one["netns"]) == ["eth0", "lo"] and await _links(sandbox) == ["lo"]


@pytest.mark.skipif(importlib.util.find_spec(TRANSLATION) is None, reason=NO_TRANSLATION)
@pytest.mark.skipif(os.geteuid() == 0 and not kernel_makes_vlan_links(), reason=NO_8021Q)
async def test_nested_pods_on_packets_through_services_policies_and_a_sigkill_of_kuberaven(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes
) -> None:
    """One namespace for all of it (each costs Neutron a pool per node and trunk): nested pods on two VMs and a
    bare pod talk both ways; a ClusterIP Service reaches both nested members; a floating IP reaches a nested
    pod's Service from outside; a NetworkPolicy holds on a subport; a nested pod deleted while kuberaven is
    SIGKILLed loses its subport once kuberaven is back, and the namespace gone leaves no subport on a trunk
    and no trunk of kuberaven's."""
    one, two = datapath.nested
    a = await boxes.pod(dp_namespace, "a", labels={"app": "web", "pod": "a"}, vm=one)
    b = await boxes.pod(dp_namespace, "b", labels={"app": "web", "pod": "b"}, vm=two)
    bare = await boxes.pod(dp_namespace, "bare", labels={"pod": "bare"})
    for pod, vm in ((a, one), (b, two)):
        assert (pod.vif.binding, pod.vif.trunk, pod.vif.parent_mac) == (Binding.VLAN, vm["trunk"], vm["mac"])
    assert a.vif.vlan_id is not None and bare.vif.binding == Binding.OVS
    async with serving(a.sandbox, 8080, "a"), serving(b.sandbox, 8080, "b"), serving(bare.sandbox, 8080, "bare"):
        await _talk_both_ways(a, b, bare)
        await _services(datapath, dp_kube, dp_namespace, a, b, bare)
        await _policy_on_a_subport(dp_kube, dp_namespace, a, b, bare)
    await _sigkill_leaves_no_subport(datapath, dp_kube, dp_namespace, b)


async def _talk_both_ways(a: Pod, b: Pod, bare: Pod) -> None:
    """Nested ↔ nested on two VMs, nested ↔ bare: each sees the other's own address."""
    for source, target in ((a, b), (b, a), (a, bare), (bare, a)):
        assert await connect(source.sandbox, target.ip, 8080) == f"{target.name} {source.ip}"


async def _services(datapath: DataPath, kube: KubeClient, namespace: str, a: Pod, b: Pod, bare: Pod) -> None:
    """A ClusterIP Service whose members are the nested pods answers from both; a LoadBalancer Service of the
    same pods answers the external netns at its floating IP."""
    vip = (await _service(kube, namespace, "web", "ClusterIP"))["spec"]["clusterIP"]

    async def both_members() -> None:
        answers = [await connect(bare.sandbox, vip, 80) for _ in range(12)]
        assert set(Counter(str(answer).split()[0] for answer in answers)) == {"a", "b"}, answers

    await eventually(both_members, timeout=120)
    await _service(kube, namespace, "web-lb", "LoadBalancer")

    address = await eventually(lambda: ingress_address(kube, namespace, "web-lb"), timeout=120)
    external = datapath.openstack["external_netns"]

    async def answered() -> None:
        answer = await connect(external, address, 80)
        assert answer is not None and answer.split()[0] in {"a", "b"}, answer

    await eventually(answered, timeout=120)


async def _policy_on_a_subport(kube: KubeClient, namespace: str, a: Pod, b: Pod, bare: Pod) -> None:
    """Only pod a may reach pod b (a subport), on 8080: the bare pod is kept out, a still gets in."""
    only_a = [{"from": [{"podSelector": {"matchLabels": {"pod": "a"}}}], "ports": [{"port": 8080}]}]
    policy = {
        "metadata": {"name": "only-a"},
        "spec": {"podSelector": {"matchLabels": {"pod": "b"}}, "policyTypes": ["Ingress"], "ingress": only_a},
    }
    await kube.request("POST", NETPOL.format(namespace), body=policy)

    async def bare_kept_out() -> None:
        await dropped(bare.sandbox, b.ip, 8080)

    await eventually(bare_kept_out, timeout=60)
    assert await connect(a.sandbox, b.ip, 8080) == f"b {a.ip}"


async def _sigkill_leaves_no_subport(datapath: DataPath, kube: KubeClient, namespace: str, b: Pod) -> None:
    """b deleted while kuberaven is SIGKILLed: once it is back, no subport is b's; the namespace deleted, no
    subport of its network is left on a trunk, and no trunk carries kuberaven's tag (the VMs' are the cloud's)."""
    connection = datapath.connection()
    datapath.kill_daemon()
    uid = (await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/b"))["metadata"]["uid"]
    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/b")
    await asyncio.to_thread(datapath.restart_daemon)

    def subports() -> list[Any]:
        ids = [s["port_id"] for vm in datapath.nested for s in connection.network.get_trunk(vm["trunk"]).sub_ports]
        return [connection.network.get_port(port) for port in ids]

    async def b_released() -> None:
        assert uid not in {port.device_id for port in subports()}

    await eventually(b_released, timeout=120)
    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}")

    async def nothing_left() -> None:
        assert not [port.id for port in subports() if port.network_id == b.vif.network], "a subport left"
        assert not list(connection.network.trunks(tags=f"{CLUSTER_TAG}{DEFAULT_CLUSTER}")), "a trunk of kuberaven's"

    await eventually(nothing_left, timeout=180)


async def _service(kube: KubeClient, namespace: str, name: str, kind: str) -> dict[str, Any]:
    body = {
        "metadata": {"name": name},
        "spec": {"type": kind, "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    return await kube.request("POST", f"/api/v1/namespaces/{namespace}/services", body=body)


async def _links(netns: str) -> list[str]:
    return sorted(link["ifname"] for link in json.loads(await _ip(netns, "-j", "link", "show")))


async def _ip(netns: str, *args: str) -> str:
    process = await asyncio.create_subprocess_exec("ip", "-n", netns, *args, stdout=asyncio.subprocess.PIPE)
    out, _ = await process.communicate()
    assert process.returncode == 0, args
    return out.decode()
