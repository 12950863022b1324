"""Kubernetes nodes in namespace "VMs" on the local OVN data path (testing/): `testenv up --openstack --nested N
--nested-netns`, the fast mode (QEMU VMs: testing/vm.py), and the VMs' Neutron records, which both modes make.

    Neutron: network kuberaven-vms + subnet ──► per VM a port (bound to the chassis) + a trunk on it (the parent)
    chassis netns: br-int ── vmnic<i> (iface-id = the port, as Nova's os-vif plugs a VM) ══ veth ══╗
    VM netns <prefix>-vm<i>: eth0 = the port's MAC, IP/prefix, MTU  ◄══════════════════════════════╝
    the fake kubelet: node kuberaven-vm-<i>, InternalIP = the port's IP (how kuberaven finds its trunk)
    testing/env.py: `kuberaven node --node kuberaven-vm-<i> --node-netns <VM netns>` serving cni-vm<i>.sock

A VM here is a network namespace whose eth0 is plugged into the chassis'
br-int as a Nova instance's NIC would be, so OVN binds its port (and the
trunk's subports, which follow their parent) to the chassis. No Open vSwitch
and no kuberaven runs inside it: the VM's agent runs beside the other
processes with the VM's netns as its node side (`--node-netns`), because
the control plane listens on 127.0.0.1 of the root netns, which a process
inside the VM's netns cannot reach. The pods' 802.1Q links are made in the VM's netns all the same, by this
host's kernel, which may not make any.
Its namespaces are named after the environment's directory, so `down` finds
them again from it alone; Neutron's records go with the environment's
database.
"""

from __future__ import annotations

import ipaddress
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .ovn import INTEGRATION_BRIDGE, namespaces
from .processes import Process, wait_for

if TYPE_CHECKING:
    from .openstack import LocalOpenStack

VM_NETWORK = "kuberaven-vms"
VM_CIDR = "192.168.240.0/24"  # the VMs' own addresses: none of kuberaven's default CIDRs, nor the external one
NESTED_PREFIX = "kuberaven-vm-"  # the nested nodes' names
VM_NIC = "eth0"
ACTIVE_WITHIN = 60.0  # seconds for OVN to bind a VM's port and Neutron to report it ACTIVE


@dataclass(frozen=True)
class Vm:
    """One VM: its Kubernetes node, network namespace, and trunk parent port."""

    node: str
    netns: str
    port: str
    mac: str
    ip: str
    trunk: str


def vm_prefix(ovn_dir: Path) -> str:
    """The start of every VM netns name of the chassis in ``ovn_dir`` (its own namespaces' prefix)."""
    return namespaces(ovn_dir)[0].removesuffix("-node") + "-vm"


def remove_vm_namespaces(ovn_dir: Path) -> None:
    """Every VM netns of the chassis in ``ovn_dir`` (with them the VMs' NICs and the pods' links)."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    for name in (line.split()[0] for line in listed.splitlines() if line.strip()):
        if name.startswith(vm_prefix(ovn_dir)):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def neutron_vms(openstack: LocalOpenStack, count: int, netns: Callable[[int], str]) -> tuple[list[Vm], int, int]:
    """The VMs' network and subnet, and per VM a port bound to the chassis with a trunk on it (``netns``: the
    name of VM ``index``'s netns, "" where it has none): the VMs, the subnet's prefix length, the network's MTU."""
    assert openstack.ovn is not None, "VMs need the data path"
    conn = openstack.connection()
    try:
        network = conn.network.create_network(name=VM_NETWORK)
        subnet = conn.network.create_subnet(
            network_id=network.id, name=VM_NETWORK, ip_version=4, cidr=VM_CIDR, enable_dhcp=False
        )
        vms = []
        for index in range(count):
            port = conn.network.create_port(
                network_id=network.id, name=f"vm-{index}", binding_host_id=openstack.ovn.hostname,
                device_owner="compute:nova", device_id=f"vm-{index}",
            )  # fmt: skip
            trunk = conn.network.create_trunk(port_id=port.id, name=f"vm-{index}")
            vms.append(Vm(f"{NESTED_PREFIX}{index}", netns(index), port.id, port.mac_address,
                          port.fixed_ips[0]["ip_address"], trunk.id))  # fmt: skip
        return vms, ipaddress.ip_network(subnet.cidr).prefixlen, int(network.mtu)
    finally:
        conn.close()


def wait_active(openstack: LocalOpenStack, vms: list[Vm]) -> None:
    """Until each VM's port is ACTIVE: OVN bound it to the chassis (its NIC is on br-int with its iface-id). An
    ovn-controller that died meanwhile is started again, as the supervisor does once the environment is up."""
    assert openstack.ovn is not None
    ovn, conn = openstack.ovn, openstack.connection()

    def active(vm: Vm) -> bool:
        for name, status, tail in ovn.restart_dead():
            print(f"{ovn.hostname}'s {name} died (exit status {status}), started again:\n{tail}", flush=True)
        return bool(conn.network.get_port(vm.port).status == "ACTIVE")

    try:
        for vm in vms:
            wait_for(lambda vm=vm: active(vm), ACTIVE_WITHIN, f"{vm.node}'s port", interval=0.5)
    finally:
        conn.close()


class NestedVms:
    """``count`` VMs on ``openstack``'s chassis; start() makes them, stop() removes their namespaces."""

    processes: list[Process] = []  # no process of its own: its VMs are namespaces

    def __init__(self, openstack: LocalOpenStack, count: int) -> None:
        assert openstack.ovn is not None, "VMs need the data path"
        self.openstack, self.ovn, self.count = openstack, openstack.ovn, count
        self.vms: list[Vm] = []

    def start(self) -> list[Vm]:
        """The VMs' ports and trunks, then each VM plugged and its port ACTIVE (a trunk's subports follow their
        parent)."""
        self.vms, prefix, mtu = neutron_vms(
            self.openstack, self.count, lambda index: f"{vm_prefix(self.ovn.dir)}{index}"
        )
        for index, vm in enumerate(self.vms):
            self._plug(vm, index, prefix, mtu)
        wait_active(self.openstack, self.vms)
        return self.vms

    def _plug(self, vm: Vm, index: int, prefix: int, mtu: int) -> None:
        """The VM's netns with eth0 (its port's MAC, address, MTU), the veth's other end on br-int as os-vif
        plugs an instance: iface-id = the port, attached-mac = its MAC."""
        host = f"vmnic{index}"
        run = self.ovn.ctl
        run("ip", "netns", "add", vm.netns)
        run("ip", "-n", vm.netns, "link", "set", "lo", "up")
        run("ip", "-n", self.ovn.node_netns, "link", "add", host, "mtu", str(mtu), "type", "veth",
            "peer", "name", VM_NIC, "netns", vm.netns)  # fmt: skip
        run("ip", "-n", vm.netns, "link", "set", VM_NIC, "address", vm.mac, "mtu", str(mtu), "up")
        run("ip", "-n", vm.netns, "address", "add", f"{vm.ip}/{prefix}", "dev", VM_NIC)
        run("ip", "-n", self.ovn.node_netns, "link", "set", host, "up")
        external = (f"external_ids:iface-id={vm.port}", f"external_ids:attached-mac={vm.mac}",
                    "external_ids:iface-status=active")  # fmt: skip
        run("ovs-vsctl", "--may-exist", "add-port", INTEGRATION_BRIDGE, host, "--", "set", "Interface", host, *external)

    def stop(self) -> None:
        remove_vm_namespaces(self.ovn.dir)
        self.vms.clear()

    def describe(self, cni_config: dict[str, Any], vm: Vm) -> dict[str, Any]:
        return {"node": vm.node, "netns": vm.netns, "address": vm.ip, "mac": vm.mac, "port": vm.port,
                "trunk": vm.trunk, "cni_config": cni_config}  # fmt: skip
