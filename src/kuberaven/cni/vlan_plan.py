"""A nested pod's wiring, planned (cni/, pure: no I/O): what cni/vlan_links.py makes for a VIF with binding vlan.

    VIF (binding vlan: vlan_id, trunk, parent_mac) + the VM's links (`ip -j -d link show` in the VM's netns)
        ──► plan() ──► VlanPlan: the VM's NIC (the link whose MAC is parent_mac), the 802.1Q link's temporary
                       name in the VM (the attachment's host name, so GC finds one that was never moved), its
                       id, MAC and MTU   (or CniError naming the trunk, the MAC and what is wrong)
    the pod end's `ip -j -d link show` ──► as_wired(): what CHECK finds wrong with it, or None

A nested node is a VM whose NIC is the parent port of a Neutron trunk; each
pod's port is a subport of that trunk, told apart on the wire by its VLAN id
(Kuryr's nested-vlan driver). The VM needs no Open vSwitch: the kernel's
802.1Q link on the NIC, moved into the pod's netns, is the pod's interface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..network.vif import Vif
from .spec import CniError, ErrorCode, Invocation, host_ifname

VLAN_KIND = "vlan"  # linkinfo.info_kind of an 802.1Q link
VLAN_PROTOCOL = "802.1Q"


@dataclass(frozen=True)
class VlanPlan:
    parent: str  # the VM's NIC: the trunk's parent port
    name: str  # the 802.1Q link's name in the VM's netns until it is moved (the attachment's host name)
    vlan_id: int
    mac: str  # the subport's
    mtu: int
    ifname: str  # its name in the pod's netns (CNI_IFNAME)


def kind(link: dict[str, Any]) -> str | None:
    """A link's kind (vlan, veth, bridge …) from `ip -d`'s linkinfo; None for a physical NIC."""
    info = link.get("linkinfo") or {}
    return info.get("info_kind")


def parent_link(links: list[dict[str, Any]], vif: Vif) -> dict[str, Any]:
    """The VM's NIC that is the VIF's trunk parent: the one link, not itself an 802.1Q link, whose MAC is
    ``parent_mac``."""
    wanted = (vif.parent_mac or "").lower()
    found = [link for link in links if str(link.get("address", "")).lower() == wanted and kind(link) != VLAN_KIND]
    if len(found) != 1:
        names = ", ".join(str(link.get("ifname")) for link in found) or "none"
        raise CniError(
            ErrorCode.IO_FAILURE,
            f"trunk {vif.trunk}: the VM has {len(found)} links with the parent port's MAC {wanted} ({names}), not 1",
            "the node agent runs where the VM's NIC is: the trunk's parent port, found by its MAC",
        )
    return found[0]


def plan(vif: Vif, call: Invocation, links: list[dict[str, Any]]) -> VlanPlan:
    """What to make for the pod: an 802.1Q link of the VIF's id on the trunk's parent, with the subport's MAC."""
    assert vif.vlan_id is not None, "Vif.from_json refuses binding vlan without vlan_id"
    parent = parent_link(links, vif)
    parent_mtu = int(parent.get("mtu", vif.mtu))
    if vif.mtu > parent_mtu:
        raise CniError(
            ErrorCode.IO_FAILURE,
            f"trunk {vif.trunk}: the pod's MTU {vif.mtu} is above its parent {parent['ifname']}'s {parent_mtu}",
            "an 802.1Q link carries at most its parent's MTU",
        )
    return VlanPlan(
        parent=str(parent["ifname"]),
        name=host_ifname(call.container_id, call.ifname),
        vlan_id=vif.vlan_id,
        mac=vif.mac,
        mtu=vif.mtu,
        ifname=call.ifname,
    )


def as_wired(vif: Vif, pod_end: dict[str, Any]) -> str | None:
    """CHECK's verdict on the pod's interface (`ip -j -d link show` of it): None when it is the VIF's 802.1Q link,
    else what differs."""
    info = pod_end.get("linkinfo") or {}
    data = info.get("info_data") or {}
    if info.get("info_kind") != VLAN_KIND:
        return f"{pod_end.get('ifname')} is a {info.get('info_kind') or 'physical'} link, not 802.1Q"
    if data.get("id") != vif.vlan_id or data.get("protocol", VLAN_PROTOCOL) != VLAN_PROTOCOL:
        return f"{pod_end.get('ifname')} has VLAN id {data.get('id')}, not the VIF's {vif.vlan_id}"
    return None
