"""A nested pod's wiring planned from plain data (cni/vlan_plan.py): the VM's NIC found by the trunk parent's
MAC, the 802.1Q link's name, id, MAC and MTU, and CHECK's verdict on the pod's link."""

from __future__ import annotations

from typing import Any

import pytest

from kuberaven.cni.spec import CniError, ErrorCode, host_ifname, invocation
from kuberaven.cni.vlan_plan import VlanPlan, as_wired, plan
from kuberaven.network.vif import Binding, Vif

PARENT_MAC = "fa:16:3e:aa:00:01"
VIF = Vif(port="sub-1", network="n", subnet="s", cidr="10.64.0.0/24", gateway="10.64.0.1", mac="fa:16:3e:00:00:07",
          ip="10.64.0.5", node="vm-0", binding=Binding.VLAN, mtu=1450, vlan_id=101, trunk="trunk-0",
          parent_mac=PARENT_MAC)  # fmt: skip
ADD = invocation(
    {"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "ctr-1", "CNI_NETNS": "/run/netns/p", "CNI_IFNAME": "eth0",
     "CNI_ARGS": "K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web"},
    {"cniVersion": "1.1.0", "name": "kuberaven"},
)  # fmt: skip


def link(name: str, mac: str, kind: str | None = None, mtu: int = 1500, **data: Any) -> dict[str, Any]:
    """One entry of `ip -j -d link show`."""
    info = {"linkinfo": {"info_kind": kind, "info_data": data}} if kind else {}
    return {"ifname": name, "address": mac, "mtu": mtu, **info}


def test_the_vlan_link_goes_on_the_nic_whose_mac_is_the_trunk_parents() -> None:
    links = [
        link("lo", "00:00:00:00:00:00", mtu=65536),
        link("ens3", "fa:16:3e:bb:00:02"),
        link("ens4", PARENT_MAC.upper()),  # MACs compared whatever their case
        # A link an earlier ADD left in the VM carries a subport's MAC, never the parent's; even one that did
        # is no parent.
        link(host_ifname("old", "eth0"), PARENT_MAC, kind="vlan", id=100),
    ]
    assert plan(VIF, ADD, links) == VlanPlan(
        parent="ens4", name=host_ifname("ctr-1", "eth0"), vlan_id=101, mac=VIF.mac, mtu=1450, ifname="eth0"
    )


@pytest.mark.parametrize(
    ("links", "problem"),
    [
        ([link("ens3", "fa:16:3e:bb:00:02")], "the VM has 0 links with the parent port's MAC fa:16:3e:aa:00:01"),
        ([link("a", PARENT_MAC), link("b", PARENT_MAC, kind="bond")], "the VM has 2 links .* \\(a, b\\)"),
        ([link("ens4", PARENT_MAC, mtu=1400)], "the pod's MTU 1450 is above its parent ens4's 1400"),
    ],
)
def test_a_vm_without_one_fitting_parent_is_an_error_naming_the_trunk(
    links: list[dict[str, Any]], problem: str
) -> None:
    with pytest.raises(CniError, match=f"^trunk trunk-0: {problem}") as caught:
        plan(VIF, ADD, links)
    assert caught.value.code == ErrorCode.IO_FAILURE


def test_check_wants_an_802_1q_link_of_the_vifs_id() -> None:
    assert as_wired(VIF, link("eth0", VIF.mac, kind="vlan", protocol="802.1Q", id=101)) is None
    assert as_wired(VIF, link("eth0", VIF.mac, kind="vlan", protocol="802.1Q", id=102)) == (
        "eth0 has VLAN id 102, not the VIF's 101"
    )
    assert as_wired(VIF, link("eth0", VIF.mac, kind="vlan", protocol="802.1ad", id=101)) is not None
    assert as_wired(VIF, link("eth0", VIF.mac, kind="veth")) == "eth0 is a veth link, not 802.1Q"
