"""Nested nodes (network/rules/, pure): which nodes are VMs on a trunk, and the VLAN ids of the trunk's subports.

    a Node (its kuberaven.io/trunk annotation, its InternalIPs) ──► trunk_ask() ──► TrunkAsk
    a TrunkAsk + the trunks Neutron found for it ──► nested_trunk() ──► the node's Trunk, or None (a bare node)
    the segmentation ids a trunk uses ──► allocate_vlans() ──► the lowest free ids for new subports

A node is nested when its VM's port is the parent of a Neutron trunk, as
Kuryr's nested-vlan driver had it: the trunk is named by the node's
annotation, or found as the trunk whose parent port holds one of the node's
InternalIPs (as Kuryr found it from a pod's hostIP). Its pods' ports are
subports of that trunk, each with a VLAN id unique on the trunk. network/trunks.py
does the Neutron lookups and caches the answer per node; network/pools.py
allocates the ids when it makes subports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..backend import BackendError
from ..drivers.port_pools import Trunk
from ..vif import VLAN_IDS

NODE_TRUNK_ANNOTATION = "kuberaven.io/trunk"  # on a Node: the id of the trunk whose parent is its VM's port
NODE_TRUNK_FIELDS = ("status.addresses",)  # what trunk_ask() reads of a Node besides the annotation
INTERNAL_IP = "InternalIP"


class NodeTrunkError(BackendError):
    """A node's trunk cannot be told (a named trunk Neutron lacks, or several trunks on its addresses)."""


class VlansExhausted(BackendError):
    """A trunk has no free segmentation id left."""


@dataclass(frozen=True)
class TrunkAsk:
    """What tells a node's trunk: the annotation's trunk id, else its InternalIPs."""

    node: str
    trunk: str | None
    addresses: tuple[str, ...]


def trunk_ask(node: Mapping[str, Any]) -> TrunkAsk:
    meta = node["metadata"]
    named = (meta.get("annotations") or {}).get(NODE_TRUNK_ANNOTATION) or None
    addresses = sorted(
        {
            str(a["address"])
            for a in (node.get("status") or {}).get("addresses") or []
            if a.get("type") == INTERNAL_IP and a.get("address")
        }
    )
    return TrunkAsk(meta["name"], named.strip() if named else None, tuple(addresses))


def nested_trunk(ask: TrunkAsk, found: Sequence[Trunk]) -> Trunk | None:
    """The node's trunk among those Neutron ``found`` for ``ask`` (by the annotation's id, else the trunks whose
    parent port holds one of the node's InternalIPs); None: a bare node. A named trunk that is not there, or
    several trunks on its addresses, is an error: its pods would be wired the wrong way."""
    if ask.trunk is not None:
        named = [trunk for trunk in found if trunk.id == ask.trunk]
        if not named:
            raise NodeTrunkError(f"node {ask.node}: trunk {ask.trunk} of its {NODE_TRUNK_ANNOTATION} does not exist")
        return named[0]
    if len(found) > 1:
        ids = ", ".join(sorted(trunk.id for trunk in found))
        raise NodeTrunkError(
            f"node {ask.node}: its addresses {', '.join(ask.addresses)} are the parents of several trunks ({ids}); "
            f"name one with the annotation {NODE_TRUNK_ANNOTATION}"
        )
    return found[0] if found else None


def allocate_vlans(used: Iterable[int], count: int, trunk: str) -> list[int]:
    """The ``count`` lowest segmentation ids that ``used`` (the trunk's subports', and any being made) lacks."""
    taken = set(used)
    free: list[int] = []
    for vlan in VLAN_IDS:
        if len(free) == count:
            break
        if vlan not in taken:
            free.append(vlan)
    if len(free) < count:
        raise VlansExhausted(f"trunk {trunk}: {count} subports asked, {len(free)} VLAN ids free")
    return free
