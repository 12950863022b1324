"""Kernel networking of a nested pod (cni/, the I/O edge): an 802.1Q link on the VM's NIC, moved into the pod.

    ADD ──► wire():   the VM's links (Node.netns: the VM's) ──► vlan_plan.plan() ──►
                      `ip link add link <NIC> name krv… address <subport MAC> mtu … type vlan id <vlan_id>`
                      ──► moved into the pod's netns, renamed CNI_IFNAME ──► links.configure_pod_end()
    DEL ──► links.unwire_host() (a krv… link an ADD left in the VM before moving it, as for every binding), then
            unwire_pod_end(): the pod's 802.1Q CNI_IFNAME (no veth: nothing went with a host end)
    CHECK ──► check(): links.check_pod_end() and vlan_plan.as_wired() on the pod's link

Nothing of the pod stays in the VM's netns once it is wired, so GC
(links.host_ends, spec.stale) finds only a krv… link an ADD left before its
move; the pod's link goes with its netns when the runtime removes that.
The kernel keeps one link per VLAN id on a NIC, wherever the link is: an id
still held by a sandbox whose DEL never came is an error that says so.
"""

from __future__ import annotations

import json
import os

from ..network.vif import Vif
from . import links
from .links import Node, ip
from .spec import CniError, ErrorCode, Invocation
from .vlan_plan import VLAN_KIND, as_wired, kind, plan

# What `ip link add … type vlan` says when the NIC has a link of that id already: Linux's 8021q module says the
# first (`Error: 8021q: VLAN device already exists.`, its netlink extended ack); the second is the bare EEXIST.
ID_TAKEN = ("VLAN device already exists", "File exists")
NO_8021Q = "Unknown device type"  # … and what it says on a kernel without 802.1Q links (no 8021q module)


def wire(vif: Vif, call: Invocation, node: Node) -> tuple[str, str]:
    """Make the pod's 802.1Q interface as the VIF says; returns the VM's NIC (the trunk's parent) and its MAC.
    Repeatable: what an earlier ADD of the same attachment made is removed first."""
    assert call.netns is not None
    found = json.loads(ip("-j", "-d", "link", "show", netns=node.netns))
    wiring = plan(vif, call, found)
    if links.link(wiring.name, node.netns) is not None:
        links.delete(wiring.name, node.netns)
    if links.link(call.ifname, call.netns) is not None:
        links.delete(call.ifname, call.netns)
    vlan = ("type", "vlan", "id", str(wiring.vlan_id))
    try:
        ip("link", "add", "link", wiring.parent, "name", wiring.name, "address", wiring.mac,
           "mtu", str(wiring.mtu), *vlan, netns=node.netns)  # fmt: skip
    except CniError as error:
        raise add_failure(error, vif.trunk, wiring.vlan_id, wiring.parent) from None
    try:
        ip("link", "set", "dev", wiring.name, "netns", call.netns, netns=node.netns)
        ip("link", "set", "dev", wiring.name, "name", call.ifname, netns=call.netns)
    except CniError:
        links.delete(wiring.name, node.netns)  # not moved: the VM keeps nothing of a failed ADD
        raise
    links.configure_pod_end(vif, call)
    return wiring.parent, str(next(x for x in found if x["ifname"] == wiring.parent)["address"])


def add_failure(error: CniError, trunk: str | None, vlan_id: int, parent: str) -> CniError:
    """The error a user gets for a failed `ip link add … type vlan`: the kernel's words made into what to do
    where they are known (no 802.1Q; the id held by another link), else ``error`` as it is."""
    if NO_8021Q in error.msg:
        return CniError(
            ErrorCode.IO_FAILURE,
            f"trunk {trunk}: the VM's kernel makes no 802.1Q links ({error.msg})",
            "a nested pod is an 802.1Q link on the VM's NIC: the VM needs CONFIG_VLAN_8021Q (module 8021q)",
        )
    if any(words in error.msg for words in ID_TAKEN):
        return CniError(
            ErrorCode.IO_FAILURE,
            f"trunk {trunk}: VLAN id {vlan_id} on {parent} is held by another link",
            "a sandbox whose DEL has not come (its netns still there) holds the subport's id; DEL or GC frees it",
        )
    return error


def unwire_pod_end(call: Invocation) -> None:
    """DEL, after links.unwire_host: the pod's interface if it is an 802.1Q link (a nested pod's: freeing its VLAN id
    on the NIC for the subport's next pod; a veth's pod end went with its host end), if its netns is still
    there. Gone already is fine."""
    if call.netns is None or not os.path.exists(call.netns):
        return
    pod_end = links.link(call.ifname, call.netns, details=True)
    if pod_end is not None and kind(pod_end) == VLAN_KIND:
        links.delete(call.ifname, call.netns)


def check(vif: Vif, call: Invocation, node: Node) -> None:
    """CHECK of a nested pod: its interface is an 802.1Q link of the VIF's id with the VIF's MAC, address and
    route."""
    links.check_pod_end(vif, call)
    pod_end = links.link(call.ifname, call.netns, details=True)
    assert pod_end is not None, "check_pod_end found it"
    wrong = as_wired(vif, pod_end)
    if wrong is not None:
        raise CniError(ErrorCode.NOT_AS_WIRED, f"{call.netns}: {wrong}")
