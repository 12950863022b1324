"""The VIF annotation (network/, pure): what the translator tells the CNI plugin about a pod's port.

    translator (network/reconcilers/pods.py, its one writer) ──► Vif ──► pod annotation kuberaven.io/vif
                                         (from the pod's record, pod_network.py)  │  (JSON, versioned)
    kuberaven node (node/, on the pod's node) ◄── Vif ◄───────────────────────────┘
        kuberaven-cni ADD: veth into the pod's netns with this MAC, IP and routes

One definition for the writer and the reader, so that the two cannot drift.
It plays the part of Kuryr's ``openstack.org/kuryr-vif`` (docs/network.md maps
the fields), flattened: one port per pod, and plain JSON instead of
oslo.versionedobjects. ``version`` changes when a field changes meaning; a
reader refuses a version it does not know rather than guess.

``status`` is the port's as the backend reports it (Kuryr's ``active``):
``ACTIVE`` from the start on the embedded backend; on Neutron the port is
``DOWN`` until the node's OVN (or OVS agent) binds it, which it does once
the node agent has plugged the pod into br-int; network/activation.py
reports ``ACTIVE`` then, and the pods reconciler writes it here. The agent waits for it only on a node without
OVN (readiness port-active): with OVN it waits for the node's own
``ovn-installed``. A VIF written without it (an older kuberaven) counts as
ACTIVE.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import MISSING, asdict, dataclass, field, fields

VIF_ANNOTATION = "kuberaven.io/vif"
# Why a pod on our CNI has no port, when it is something a user acts on (a quota, a subnet out of addresses): the
# node agent fails the pod's ADD with it at once, rather than wait for a VIF that will not come. Removed with the VIF.
PORT_FAILED_ANNOTATION = "kuberaven.io/port-failed"
VIF_VERSION = 1
DEFAULT_MTU = 1500
PORT_ACTIVE, PORT_DOWN = "ACTIVE", "DOWN"  # Neutron's port statuses (also BUILD, ERROR)


class Binding:
    """How the node attaches the pod's host-side interface (the CNI plugin follows it)."""

    BRIDGE = "bridge"  # the embedded backend: a Linux bridge per network on each node
    OVS = "ovs"  # Neutron's OVS agent: a port on br-int whose iface-id is the port id
    VLAN = "vlan"  # a nested pod (the node is a VM): a trunk subport, a VLAN interface on the VM's NIC


VLAN_IDS = range(1, 4095)  # 802.1Q's usable ids, Neutron's segmentation ids for a trunk's VLAN subports


class VifError(ValueError):
    """The annotation is not a VIF this code understands; the message says why."""


@dataclass(frozen=True)
class Vif:
    port: str  # the backend's port id
    network: str
    subnet: str
    cidr: str  # the subnet's
    gateway: str
    mac: str
    ip: str
    node: str  # the node the port is bound to (binding:host_id on Neutron)
    binding: str = Binding.BRIDGE
    mtu: int = DEFAULT_MTU
    security_groups: list[str] = field(default_factory=list)
    status: str = PORT_ACTIVE
    vlan_id: int | None = None  # binding vlan: the subport's segmentation id on its trunk (Kuryr's vlan_id)
    trunk: str | None = None  # binding vlan: the trunk's id
    parent_mac: str | None = None  # binding vlan: the MAC of the trunk's parent port, the VM's NIC
    version: int = VIF_VERSION

    @property
    def active(self) -> bool:
        return self.status == PORT_ACTIVE

    @property
    def prefix_length(self) -> int:
        return ipaddress.ip_network(self.cidr).prefixlen

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Vif:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise VifError(f"{VIF_ANNOTATION} is not JSON: {error}") from None
        if not isinstance(data, dict):
            raise VifError(f"{VIF_ANNOTATION} is not a JSON object")
        if data.get("version") != VIF_VERSION:
            raise VifError(f"{VIF_ANNOTATION} version {data.get('version')!r} is not {VIF_VERSION}")
        known = {f.name for f in fields(cls)}
        required = (f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING)
        missing = [name for name in required if name not in data]
        if missing:
            raise VifError(f"{VIF_ANNOTATION} lacks {', '.join(missing)}")
        vif = cls(**{k: v for k, v in data.items() if k in known})
        try:
            address, network = ipaddress.ip_address(vif.ip), ipaddress.ip_network(vif.cidr)
        except ValueError as error:
            raise VifError(f"{VIF_ANNOTATION}: {error}") from None
        if address not in network:
            raise VifError(f"{VIF_ANNOTATION}: ip {vif.ip} is not in {vif.cidr}")
        if vif.binding == Binding.VLAN and (vif.vlan_id not in VLAN_IDS or not vif.parent_mac or not vif.trunk):
            raise VifError(f"{VIF_ANNOTATION}: binding vlan needs vlan_id (1-4094), trunk and parent_mac")
        return vif
