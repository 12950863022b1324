"""A nested pod's wiring on real kernel networking: kuberaven-cni and the node agent on two "VMs", no OVS.

Each VM is a network namespace of the test's whose eth0 (the trunk's parent
port, by its MAC) is one end of a veth to the other VM's eth0: the wire
between them carries 802.1Q frames as a Neutron trunk's parent port does.
Each VM's node is a Node no fake kubelet serves, with its own agent
(`kuberaven node --node-netns <VM>`); the pods' VIFs (binding vlan) are
written by hand, as the translator would write them. Traffic stays between
the test's namespaces, all removed at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kuberaven.cni.spec import ErrorCode, host_ifname
from kuberaven.kube.client import KubeClient
from kuberaven.network.vif import PORT_ACTIVE, PORT_DOWN, VIF_ANNOTATION, Binding, Vif
from kuberaven.testing.env import TestEnv
from tests.datapath import connect, serving
from tests.helpers import NO_8021Q, bound_pod, kernel_makes_vlan_links
from tests.integration.test_cni import Agent, cni, ip, links_of

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
    pytest.mark.skipif(os.geteuid() == 0 and not kernel_makes_vlan_links(), reason=NO_8021Q),
]

CIDR, GATEWAY = "10.77.0.0/24", "10.77.0.1"
MERGE_PATCH = "application/merge-patch+json"
ISOLATED_WITHIN = 1.5  # seconds a connection across two VLANs is given (it is never made)


@dataclasses.dataclass
class Vm:
    netns: str
    parent_mac: str  # its eth0's: the trunk's parent port
    agent: Agent


def vif(node: str, address: str, mac: str, vlan_id: int, parent_mac: str, status: str = PORT_ACTIVE) -> Vif:
    return Vif(port=f"sub-{vlan_id}-{address}", network="n", subnet="s", cidr=CIDR, gateway=GATEWAY, mac=mac,
               ip=address, node=node, binding=Binding.VLAN, mtu=1400, status=status, vlan_id=vlan_id,
               trunk=f"trunk-{node}", parent_mac=parent_mac)  # fmt: skip


@pytest.fixture
def vm_netns() -> Iterator[list[str]]:
    """Two VMs' network namespaces, their eth0s joined by a veth; always removed."""
    names = [f"krvt-vm-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    try:
        for name in names:
            ip("netns", "add", name)
        ip("link", "add", "eth0", "netns", names[0], "type", "veth", "peer", "name", "eth0", "netns", names[1])
        for index, name in enumerate(names):
            ip("-n", name, "link", "set", "eth0", "address", f"fa:16:3e:aa:00:0{index}", "up")
        yield names
    finally:
        for name in names:
            ip_quiet("netns", "del", name)


def ip_quiet(*args: str) -> None:
    with contextlib.suppress(Exception):
        ip(*args)


@pytest.fixture
async def vms(testenv: TestEnv, kube: KubeClient, vm_netns: list[str], tmp_path: Path) -> AsyncIterator[list[Vm]]:
    """A Node and its running agent for each VM (the agent's node side is the VM's netns)."""
    made: list[Vm] = []
    try:
        for index, netns in enumerate(vm_netns):
            node = f"vm-node-{uuid.uuid4().hex[:6]}"
            await kube.request("POST", "/api/v1/nodes", body={"metadata": {"name": node}})
            agent = Agent(node, testenv.control_plane.kubeconfig, tmp_path / f"vm{index}.sock", netns,
                          tmp_path / f"vm{index}.log")  # fmt: skip
            made.append(Vm(netns, f"fa:16:3e:aa:00:0{index}", agent))
            agent.start()
        await asyncio.gather(*(vm.agent.ready() for vm in made))
        yield made
    finally:
        for vm in made:
            if vm.agent.process is not None and vm.agent.process.poll() is None:
                vm.agent.kill()
            with contextlib.suppress(Exception):
                await kube.request("DELETE", f"/api/v1/nodes/{vm.agent.node}")


@pytest.fixture
def sandboxes() -> Iterator[list[str]]:
    """Pods' network namespaces (one per sandbox), made by ``new`` and always removed."""
    names: list[str] = []
    yield names
    for name in names:
        ip_quiet("netns", "del", name)


def sandbox(names: list[str]) -> str:
    name = f"krvt-{uuid.uuid4().hex[:8]}"
    ip("netns", "add", name)
    names.append(name)
    return name


async def pod(kube: KubeClient, namespace: str, name: str, vm: Vm, wired: Vif) -> None:
    """A pod bound to the VM's node with the VIF the translator would have written."""
    await bound_pod(kube, namespace, name, vm.agent.node)
    patch = {"metadata": {"annotations": {VIF_ANNOTATION: wired.to_json()}}}
    await kube.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}", body=patch, content_type=MERGE_PATCH)


def vlan_of(netns: str, name: str = "eth0") -> tuple[str, int, str]:
    """(kind, VLAN id, MAC) of a link."""
    found = json.loads(ip("-n", netns, "-j", "-d", "link", "show", "dev", name))[0]
    info = found.get("linkinfo", {})
    return info.get("info_kind"), info.get("info_data", {}).get("id"), found["address"]


async def test_nested_pods_are_vlan_links_on_the_vms_nic_wired_checked_and_removed(
    kube: KubeClient, namespace: str, vms: list[Vm], sandboxes: list[str]
) -> None:
    one, two = vms
    a = vif(one.agent.node, "10.77.0.5", "fa:16:3e:00:00:05", 101, one.parent_mac)
    b = vif(two.agent.node, "10.77.0.6", "fa:16:3e:00:00:06", 101, two.parent_mac)
    c = vif(two.agent.node, "10.77.0.7", "fa:16:3e:00:00:07", 102, two.parent_mac)  # same subnet, another VLAN
    down = vif(one.agent.node, "10.77.0.8", "fa:16:3e:00:00:08", 103, one.parent_mac, status=PORT_DOWN)
    for name, vm, wired in (("a", one, a), ("b", two, b), ("c", two, c), ("down", one, down)):
        await pod(kube, namespace, name, vm, wired)
    sa, sb, sc, sdown = (sandbox(sandboxes) for _ in range(4))

    # ADD: three pods at once on two VMs; each is an 802.1Q link of its VLAN id with its subport's MAC.
    added = await asyncio.gather(
        cni(one.agent, "ADD", sa, namespace, "a"), cni(two.agent, "ADD", sb, namespace, "b"),
        cni(two.agent, "ADD", sc, namespace, "c"),
    )  # fmt: skip
    assert [code for code, _ in added] == [0, 0, 0], added
    assert added[0][1] is not None and added[0][1]["interfaces"][0] == {"name": "eth0", "mac": one.parent_mac}
    assert [vlan_of(s) for s in (sa, sb, sc)] == [("vlan", 101, a.mac), ("vlan", 101, b.mac), ("vlan", 102, c.mac)]
    assert sorted(links_of(one.netns)) == sorted(links_of(two.netns)) == ["eth0", "lo"]  # nothing left in the VMs

    # Traffic on VLAN 101 between the VMs, with the pods' own addresses; none across to VLAN 102.
    async with serving(sb, 8080, "b"), serving(sc, 8080, "c"):
        assert await connect(sa, b.ip, 8080) == f"b {a.ip}"
        assert await connect(sa, c.ip, 8080, timeout=ISOLATED_WITHIN) is None

    # A subport that is not ACTIVE: ADD answers 11 naming the trunk, and wires nothing.
    code, error = await cni(one.agent, "ADD", sdown, namespace, "down", activeTimeout=1)
    assert (code, error and error["code"]) == (1, ErrorCode.TRY_AGAIN_LATER), error
    assert error is not None and f"of trunk trunk-{one.agent.node} is DOWN" in error["msg"]
    assert links_of(sdown) == ["lo"] and sorted(links_of(one.netns)) == ["eth0", "lo"]

    # CHECK passes; finds a removed address; a second ADD repairs it.
    assert await cni(one.agent, "CHECK", sa, namespace, "a") == (0, None)
    ip("-n", sa, "address", "flush", "dev", "eth0")
    code, error = await cni(one.agent, "CHECK", sa, namespace, "a")
    assert (code, error and error["code"]) == (1, ErrorCode.NOT_AS_WIRED), error
    assert (await cni(one.agent, "ADD", sa, namespace, "a"))[0] == 0
    assert await cni(one.agent, "CHECK", sa, namespace, "a") == (0, None)

    # A new sandbox of pod a while the old one holds VLAN 101: an error saying so. DEL (twice) frees the id.
    sa2 = sandbox(sandboxes)
    code, error = await cni(one.agent, "ADD", sa2, namespace, "a")
    assert code == 1 and error is not None and "VLAN id 101 on eth0 is held by another link" in error["msg"], error
    assert await cni(one.agent, "DEL", sa, namespace, "a") == (0, None)
    assert await cni(one.agent, "DEL", sa, namespace, "a") == (0, None)
    assert links_of(sa) == ["lo"]
    assert (await cni(one.agent, "ADD", sa2, namespace, "a"))[0] == 0
    async with serving(sb, 8080, "b"):
        assert await connect(sa2, b.ip, 8080) == f"b {a.ip}"

    # GC: a link an ADD left in the VM before moving it goes; the pod the runtime lists stays wired.
    cut = host_ifname("ctr-gone", "eth0")
    ip("-n", one.netns, "link", "add", "link", "eth0", "name", cut, "type", "vlan", "id", "300")
    valid = {"cni.dev/valid-attachments": [{"containerID": f"ctr-{sa2}", "ifname": "eth0"}]}
    assert await cni(one.agent, "GC", extra=valid) == (0, None)
    assert sorted(links_of(one.netns)) == ["eth0", "lo"]
    assert await cni(one.agent, "CHECK", sa2, namespace, "a") == (0, None)
