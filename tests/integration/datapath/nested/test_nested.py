"""Nested pods on real packets: Kubernetes nodes in QEMU VMs whose pods are subports of the VMs' Neutron trunks.

Against this package's own data path (conftest.py here, tests/datapath.py), started with two VMs
(`testenv up --nested 2`, testing/vm.py): guests of Debian's kernel (with 8021q), each NIC a tap on the chassis'
br-int as its trunk's parent port, each a Node (InternalIP: that port's address) whose agent, `kuberaven node`,
runs in the guest with no Open vSwitch. A nested pod is a sandbox netns in the guest, wired by kuberaven-cni run
in the guest (guest.py): an 802.1Q link on the guest's eth0, so its packets leave the VM tagged with the subport's
VLAN id and OVN takes them to the subport. Traffic stays between the VMs, the test's namespaces and the
external netns.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kuberaven.cni.spec import ErrorCode, host_ifname
from kuberaven.kube.client import KubeClient
from kuberaven.model.bootstrap import DEFAULT_CLUSTER
from kuberaven.network.backend import CLUSTER_TAG
from kuberaven.network.vif import PORT_ACTIVE, Binding, Vif
from tests.datapath import (
    PORTS_GROUP,
    DataPath,
    Pod,
    Sandboxes,
    connect,
    create_pod,
    holders,
    ingress_address,
    serving,
)
from tests.helpers import eventually, vif_of

from .guest import (
    GuestSandboxes,
    attempt_from,
    dropped_from,
    guest_sandboxes,
    in_vm,
    in_vm_ok,
    reaches,
    vlan_links,
    vm_cni,
    vm_links,
    vm_serving,
)

pytestmark = [pytest.mark.xdist_group(PORTS_GROUP), pytest.mark.timeout(1200)]

AGENT_BACK_WITHIN = 240  # seconds for the supervisor to start a VM's agent again (≈5 s of imports under TCG)
NETPOL = "/apis/networking.k8s.io/v1/namespaces/{}/networkpolicies"
OTHER_PORT = 8081  # a second server on pod b: the port a policy does not open
GC_VLAN = 300  # the VLAN id of a link no sandbox holds, left in a VM for GC to remove


@pytest.fixture
async def guests(datapath: DataPath, dp_kube: KubeClient) -> AsyncIterator[GuestSandboxes]:
    async with guest_sandboxes(datapath, dp_kube) as made:
        yield made


async def test_the_vms_are_nodes_on_trunk_parents_and_a_pods_add_names_a_missing_8021q(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, guests: GuestSandboxes
) -> None:
    """What `testenv up --nested 2` made: a Node per VM whose InternalIP is its port's, the port ACTIVE on the
    chassis and a trunk's parent, the guest's eth0 with its MAC and address; the VMs reach each other through OVN.
    A VM's agent SIGKILLed in the guest is started again. A pod bound to a VM gets a VIF of binding vlan on that
    VM's trunk, whose subport turns ACTIVE; with the guest's 8021q module unloaded (and no other to load), its ADD
    says so naming the trunk, and leaves nothing behind; with the module back, kuberaven-cni's verbs on the guest's
    802.1Q links (below)."""
    vms = datapath.nested
    assert len(vms) == 2 and all(vm["kind"] == "qemu" for vm in vms)
    connection = datapath.connection()
    for vm in vms:
        node = await dp_kube.request("GET", f"/api/v1/nodes/{vm['node']}")
        assert {"type": "InternalIP", "address": vm["address"]} in node["status"]["addresses"]
        port = connection.network.get_port(vm["port"])
        assert (port.status, port.binding_host_id, port.mac_address) == ("ACTIVE", datapath.node, vm["mac"])
        assert connection.network.get_trunk(vm["trunk"]).port_id == vm["port"]
        nic = json.loads(await in_vm_ok(vm, "ip", "-j", "address", "show", "dev", "eth0"))[0]
        assert nic["address"] == vm["mac"] and vm["address"] in [a["local"] for a in nic["addr_info"]]
    one, two = vms
    async with vm_serving(two, None, 8080, "vm-1"):
        _, answer, _ = await in_vm(one, one["python"], "-I", "-S", "-c", _CLIENT_ONCE, two["address"], "8080")
        assert answer.strip() == f"vm-1 {one['address']}"
    await _kill_agent_in_vm(datapath, one)

    await create_pod(dp_kube, datapath, dp_namespace, "a", node=one["node"])

    async def active() -> Vif:
        vif = await vif_of(dp_kube, dp_namespace, "a", timeout=1)
        assert vif.status == PORT_ACTIVE, vif
        return vif

    vif = await eventually(active, timeout=120)
    assert (vif.binding, vif.trunk, vif.parent_mac) == (Binding.VLAN, one["trunk"], one["mac"])
    subports = connection.network.get_trunk(one["trunk"]).sub_ports
    assert {"port_id": vif.port, "segmentation_id": vif.vlan_id, "segmentation_type": "vlan"} in subports
    await in_vm_ok(one, "rmmod", "8021q")  # the guest's /sbin/modprobe finds no module of its kernel to load
    try:
        sandbox = await guests.new(one)
        code, error = await vm_cni(one, "ADD", sandbox, dp_namespace, "a")
        assert code == 1 and error is not None, error
        assert f"trunk {one['trunk']}: the VM's kernel makes no 802.1Q links" in error["msg"], error
        assert [link["ifname"] for link in await vm_links(one, sandbox)] == ["lo"]
        assert not vlan_links(await vm_links(one))
    finally:
        await in_vm_ok(one, "insmod", "/modules/8021q.ko")
    await _verbs_on_the_guests_kernel(one, guests, dp_namespace, "a", vif)


async def _verbs_on_the_guests_kernel(
    vm: dict[str, Any], guests: GuestSandboxes, namespace: str, pod: str, vif: Vif
) -> None:
    """kuberaven-cni's verbs on a real kernel's 802.1Q links: ADD makes a link of the subport's VLAN id and MAC as
    the pod's eth0; CHECK passes, finds an address removed, and a second ADD repairs it; a second sandbox of the
    pod while the first holds the VLAN id is refused naming it (the kernel's own words for it); DEL, twice, frees
    the id; GC removes a link an ADD left in the VM and keeps the sandbox the runtime lists; nothing is left."""
    first = await guests.new(vm)
    assert (await vm_cni(vm, "ADD", first, namespace, pod))[0] == 0
    eth0 = next(link for link in await vm_links(vm, first) if link["ifname"] == "eth0")
    kind, data = eth0["linkinfo"]["info_kind"], eth0["linkinfo"]["info_data"]
    assert (kind, data["id"], eth0["address"]) == ("vlan", vif.vlan_id, vif.mac), eth0
    assert await vm_cni(vm, "CHECK", first, namespace, pod) == (0, None)
    await in_vm_ok(vm, "ip", "-n", first, "address", "flush", "dev", "eth0")
    code, error = await vm_cni(vm, "CHECK", first, namespace, pod)
    assert (code, error and error["code"]) == (1, ErrorCode.NOT_AS_WIRED), error
    assert (await vm_cni(vm, "ADD", first, namespace, pod))[0] == 0
    assert await vm_cni(vm, "CHECK", first, namespace, pod) == (0, None)

    second = await guests.new(vm)
    code, error = await vm_cni(vm, "ADD", second, namespace, pod)
    held = f"VLAN id {vif.vlan_id} on eth0 is held by another link"
    assert code == 1 and error is not None and held in error["msg"], error
    for _ in range(2):
        assert await vm_cni(vm, "DEL", first, namespace, pod) == (0, None)
    assert [link["ifname"] for link in await vm_links(vm, first)] == ["lo"]
    assert (await vm_cni(vm, "ADD", second, namespace, pod))[0] == 0

    left = host_ifname("ctr-gone", "eth0")
    await in_vm_ok(vm, "ip", "link", "add", "link", "eth0", "name", left, "type", "vlan", "id", str(GC_VLAN))
    valid = {"cni.dev/valid-attachments": [{"containerID": f"ctr-{second}", "ifname": "eth0"}]}
    assert await vm_cni(vm, "GC", "", "", "", extra=valid) == (0, None)
    assert not vlan_links(await vm_links(vm)), "GC left an 802.1Q link in the VM"
    assert await vm_cni(vm, "CHECK", second, namespace, pod) == (0, None)
    assert await vm_cni(vm, "DEL", second, namespace, pod) == (0, None)
    assert [link["ifname"] for link in await vm_links(vm, second)] == ["lo"]


async def test_nested_pods_on_packets_through_services_policies_recycling_and_sigkills(
    datapath: DataPath, dp_kube: KubeClient, dp_namespace: str, boxes: Sandboxes, guests: GuestSandboxes
) -> None:
    """One namespace for all of it (each costs Neutron a pool per node and trunk): nested pods on two VMs (a, b)
    and on the same VM (a, c), and a bare pod, talk both ways; a ClusterIP Service reaches both nested members; a
    floating IP reaches a nested pod's Service from outside; NetworkPolicies on a subport deny, allow one port,
    and are removed; a recycled subport's next pod carries traffic; kuberaven and a VM's agent SIGKILLed and
    started again keep the traffic; the namespace gone leaves no subport on a trunk and no 802.1Q link in a VM."""
    one, two = datapath.nested
    a = await guests.pod(dp_namespace, "a", one, labels={"app": "web", "pod": "a"})
    b = await guests.pod(dp_namespace, "b", two, labels={"app": "web", "pod": "b"})
    c = await guests.pod(dp_namespace, "c", one, labels={"pod": "c"})
    bare = await boxes.pod(dp_namespace, "bare", labels={"pod": "bare"})
    for pod, vm in ((a, one), (b, two), (c, one)):
        assert (pod.vif.binding, pod.vif.trunk, pod.vif.parent_mac) == (Binding.VLAN, vm["trunk"], vm["mac"])
    assert len({a.vif.vlan_id, c.vif.vlan_id}) == 2 and bare.vif.binding == Binding.OVS
    async with (
        vm_serving(one, a.sandbox, 8080, "a"),
        vm_serving(two, b.sandbox, 8080, "b"),
        vm_serving(two, b.sandbox, OTHER_PORT, "b"),
        vm_serving(one, c.sandbox, 8080, "c"),
        serving(bare.sandbox, 8080, "bare"),
    ):
        for source, target in ((a, b), (b, a), (a, c), (c, a), (a, bare), (bare, b)):
            await reaches(source, target)
        await _services(datapath, dp_kube, dp_namespace, bare)
        await _policies(dp_kube, dp_namespace, a, b, bare)
        datapath.kill_daemon()
        await reaches(a, b)  # the data path needs no kuberaven: OVN's flows stay
        await asyncio.to_thread(datapath.restart_daemon)
        await _kill_agent_in_vm(datapath, one)
        await reaches(a, b)  # a pod wired stays wired without its agent
        d = await _recycled(datapath, guests, dp_namespace, c, one)
        async with vm_serving(one, d.sandbox, 8080, "d"):
            await reaches(bare, d)
            await reaches(d, b)
    await _nothing_left(datapath, dp_kube, dp_namespace, guests, a)


async def _services(datapath: DataPath, kube: KubeClient, namespace: str, bare: Pod) -> None:
    """A ClusterIP Service whose members are the nested pods a and b answers from both; a LoadBalancer Service of
    the same pods answers the external netns at its floating IP."""
    vip = (await _service(kube, namespace, "web", "ClusterIP"))["spec"]["clusterIP"]

    async def both_members() -> None:
        answers = [await connect(bare.sandbox, vip, 80) for _ in range(12)]
        assert set(Counter(str(answer).split()[0] for answer in answers)) == {"a", "b"}, answers

    await eventually(both_members, timeout=120)
    await _service(kube, namespace, "web-lb", "LoadBalancer")
    address = await eventually(lambda: ingress_address(kube, namespace, "web-lb"), timeout=180)
    external = datapath.openstack["external_netns"]

    async def answered() -> None:
        answer = await connect(external, address, 80)
        assert answer is not None and answer.split()[0] in {"a", "b"}, answer

    await eventually(answered, timeout=180)


async def _policies(kube: KubeClient, namespace: str, a: Pod, b: Pod, bare: Pod) -> None:
    """On pod b (a subport): a policy with no ingress keeps everyone out; then only a, on 8080 only; then none."""
    deny = {"podSelector": {"matchLabels": {"pod": "b"}}, "policyTypes": ["Ingress"]}
    await kube.request("POST", NETPOL.format(namespace), body={"metadata": {"name": "deny"}, "spec": deny})

    async def denied() -> None:
        await dropped_from(bare, b.ip, 8080)
        await dropped_from(a, b.ip, 8080)

    await eventually(denied, timeout=90)
    only_a = [{"from": [{"podSelector": {"matchLabels": {"pod": "a"}}}], "ports": [{"port": 8080}]}]
    policy = {"metadata": {"name": "only-a"}, "spec": {**deny, "ingress": only_a}}
    await kube.request("POST", NETPOL.format(namespace), body=policy)

    async def a_on_8080_only() -> None:
        await reaches(a, b)
        await dropped_from(a, b.ip, OTHER_PORT)
        await dropped_from(bare, b.ip, 8080)

    await eventually(a_on_8080_only, timeout=90)
    for name in ("deny", "only-a"):
        await kube.request("DELETE", f"{NETPOL.format(namespace)}/{name}")

    async def open_again() -> None:
        await reaches(bare, b)
        answer = await attempt_from(a, b.ip, OTHER_PORT)
        assert answer == f"b {a.ip}", answer

    await eventually(open_again, timeout=90)


async def _kill_agent_in_vm(datapath: DataPath, vm: dict[str, Any]) -> None:
    """SIGKILL the agent inside the guest; the environment starts it again (as the kubelet restarts a DaemonSet's
    pod) and its STATUS succeeds in the guest."""
    killed = (await in_vm_ok(vm, "cat", vm["agent_pid_file"])).strip()
    await in_vm_ok(vm, "kill", "-9", killed)

    async def agent_back() -> None:
        assert (await in_vm_ok(vm, "cat", vm["agent_pid_file"])).strip() != killed
        assert (await vm_cni(vm, "STATUS", "", "", ""))[0] == 0

    await eventually(agent_back, timeout=AGENT_BACK_WITHIN, interval=2)


async def _recycled(datapath: DataPath, guests: GuestSandboxes, namespace: str, gone: Pod, vm: dict[str, Any]) -> Pod:
    """``gone`` deleted (DEL, then the pod): its subport goes back to its pool, still on the trunk, and the next
    pod on that VM takes it (a pool hands out the port it got back last first)."""
    await guests.delete(gone)
    await guests.kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{gone.name}")
    await eventually(lambda: holders(datapath)[gone.vif.port] is None, timeout=60, off_loop=True)
    assert not vlan_links(await vm_links(vm)), "the DEL left an 802.1Q link in the VM"
    recycled = await guests.pod(namespace, "d", vm, labels={"pod": "d"})
    assert (recycled.vif.port, recycled.vif.vlan_id) == (gone.vif.port, gone.vif.vlan_id), "not the recycled subport"
    return recycled


async def _nothing_left(datapath: DataPath, kube: KubeClient, namespace: str, guests: GuestSandboxes, a: Pod) -> None:
    """The runtime's DELs and sandboxes gone, then the namespace: no subport of its network on a trunk, no trunk
    of kuberaven's (the VMs' are the cloud's), no 802.1Q link in either VM."""
    for pod in list(guests.pods):
        await guests.delete(pod)
    connection = datapath.connection()
    await kube.request("DELETE", f"/api/v1/namespaces/{namespace}")

    def nothing() -> None:
        ids = [s["port_id"] for vm in datapath.nested for s in connection.network.get_trunk(vm["trunk"]).sub_ports]
        left = [port for port in ids if connection.network.get_port(port).network_id == a.vif.network]
        assert not left, f"subports left: {left}"
        assert not list(connection.network.trunks(tags=f"{CLUSTER_TAG}{DEFAULT_CLUSTER}")), "a trunk of kuberaven's"

    await eventually(nothing, timeout=180, off_loop=True)
    for vm in datapath.nested:
        assert not vlan_links(await vm_links(vm)), f"an 802.1Q link left in {vm['node']}"


async def _service(kube: KubeClient, namespace: str, name: str, kind: str) -> dict[str, Any]:
    body = {
        "metadata": {"name": name},
        "spec": {"type": kind, "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    return await kube.request("POST", f"/api/v1/namespaces/{namespace}/services", body=body)


_CLIENT_ONCE = """
import socket, sys
print(socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10).recv(200).decode())
"""
