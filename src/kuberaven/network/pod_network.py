"""A pod's network as one record (network/, pure): its port with its addresses, binding, trunk and VLAN, groups and
status, and the one serialisation every reader shares.

    reconcilers/pods.py: a port made for the pod ──────────────► PodNetwork ──► to_state() ──► its "Pod" row (state.py)
    pooled_port(): a pooled port the pod took (its "Port" row) ──►    ▲                         read by `net get`
                                                                      │                         (rules/listing.py)
    the row read back ──► from_state() ───────────────────────────────┘ ──► vif() ──► its VIF annotation (vif.py)

    pod_groups(): the groups its port should carry, from what NetworkPolicies give (rules/policy.py) and what
                  Services with source ranges give (rules/source_ranges.py)

reconcilers/pods.py is the one writer of the row, the VIF annotation and the
port's groups in the backend; the rest of the translation computes inputs
to it (a policy's groups, a Service's ranges, the status the cloud reports)
and queues the pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .rules.source_ranges import port_groups_with_ranges
from .rules.translate import pod_vif
from .vif import Vif


@dataclass(frozen=True, slots=True)
class PodNetwork:
    """One pod's port as the translation made it (the "Pod" row's state, whole)."""

    port: str  # the backend's port id
    address: str  # the port's IP (the pod's, with our CNI)
    mac: str
    mtu: int
    network: str
    subnet: str
    cidr: str  # the subnet's
    gateway: str | None
    security_groups: tuple[str, ...]  # in the order the port carries them
    pod_ip: str | None = None  # the pod's IP when the port was recorded (another CNI's; None: ours gives it)
    node: str | None = None  # the node the port is bound to
    status: str | None = None  # as the backend last reported it (None: not yet; vif.py's default for the binding)
    pooled: bool = False  # taken from a port pool (network/pools.py): goes back to it when the pod is gone
    trunk: str | None = None  # a nested node's pod: the trunk its subport is on
    vlan_id: int | None = None  # … the subport's segmentation id
    parent_mac: str | None = None  # … the MAC of the trunk's parent port (the VM's NIC)

    def to_state(self) -> dict[str, Any]:
        """The row's state: the same keys in the same order whichever way the port came; a subport's trunk,
        VLAN id and parent MAC first, ``pooled`` and ``status`` only when set."""
        nested = {"trunk": self.trunk, "vlan_id": self.vlan_id, "parent_mac": self.parent_mac} if self.trunk else {}
        return {
            **nested,
            "port": self.port,
            "address": self.address,
            "pod_ip": self.pod_ip,
            "mac": self.mac,
            "mtu": self.mtu,
            "node": self.node,
            "network": self.network,
            "subnet": self.subnet,
            "cidr": self.cidr,
            "gateway": self.gateway,
            "security_groups": list(self.security_groups),
            **({"pooled": True} if self.pooled else {}),
            **({"status": self.status} if self.status is not None else {}),
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> PodNetwork:
        """The record a row's state holds (one with a MAC: translate.py's port_ask() asks again for one without)."""
        nested = bool(state.get("trunk"))
        return cls(
            port=str(state["port"]),
            address=state["address"],
            mac=state["mac"],
            mtu=state["mtu"],
            network=state["network"],
            subnet=state["subnet"],
            cidr=state["cidr"],
            gateway=state.get("gateway"),
            security_groups=tuple(state.get("security_groups") or ()),
            pod_ip=state.get("pod_ip"),
            node=state.get("node"),
            status=state.get("status"),
            pooled=bool(state.get("pooled")),
            trunk=state["trunk"] if nested else None,
            vlan_id=state.get("vlan_id") if nested else None,
            parent_mac=state.get("parent_mac") if nested else None,
        )

    @classmethod
    def pooled_port(cls, port: Mapping[str, Any], pod_ip: str | None, parent_mac: str | None = None) -> PodNetwork:
        """The record of a pod holding a pooled port (``port``: its "Port" row's state, which always names its
        pool's groups): the row read as the pod's, pooled, with the pod's IP; a subport's parent MAC is
        ``parent_mac`` (its VIF's binding vlan) or the row's. No status: the backend reports it."""
        known = {"security_groups": port["security_groups"], "pod_ip": pod_ip, "status": None, "pooled": True}
        return cls.from_state({**port, **known, "parent_mac": parent_mac or port.get("parent_mac")})

    def vif(self, binding: str) -> Vif:
        """Its VIF annotation; ``binding``: the backend's for a bare node's pod (a subport's is vlan)."""
        return pod_vif(self.to_state(), binding)


def pod_groups(namespace_group: str, policy: Sequence[str], ranged: Sequence[str] | None) -> tuple[str, ...]:
    """The groups a pod's port carries: those of the NetworkPolicies selecting it (rules/policy.py's
    policy_groups()); else, when Services with source ranges expose it, their groups in place of its namespace's
    (rules/source_ranges.py's member_groups(): a policy's groups are left to the policy); else its namespace's."""
    if policy:
        return tuple(policy)
    return tuple(port_groups_with_ranges([namespace_group], namespace_group, tuple(ranged) if ranged else None))
