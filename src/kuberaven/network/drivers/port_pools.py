"""The port pool drivers (network/drivers/): ports made ahead in bulk, on a bare node or as a nested node's subports.

    pools.py ──► port_supply.py's PortSupply ──► PortPoolDriver.create_pool_ports   (a bare node: bound to it)
                                          └─► TrunkDriver.trunk_vlans + create_subports (a nested node: its trunk)
             pool_recovery.py (at start) ──► PortPoolDriver.pool_ports (both kinds, by name)
    trunks.py (which trunk a node's VM port is the parent of) ──► TrunkDriver.node_trunks

A backend has these or not, chosen when it is built (NetworkBackend.pools and
.trunks, drivers/__init__.py): the openstack backend has both, the embedded
one neither (its ports are made one per pod).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from ..vif import DEFAULT_MTU
from .ports import Port


@dataclass(frozen=True)
class PooledPort:
    """A port made for a pool, as the backend lists it (network/pools.py rebuilds its pools from these)."""

    id: str
    network: str
    node: str  # binding:host_id
    security_groups: tuple[str, ...]
    address: str
    mac: str
    mtu: int = DEFAULT_MTU
    trunk: str | None = None  # a subport (a nested node's pool): its trunk
    vlan_id: int | None = None  # and its segmentation id there
    subport: bool = False  # made as a subport (attached to a trunk, or to none when trunk is None)


@dataclass(frozen=True)
class Trunk:
    """A Neutron trunk whose parent port is a nested node's VM NIC (network/rules/trunks.py finds it)."""

    id: str
    parent_port: str
    parent_mac: str
    parent_status: str  # the parent port's status: in ML2/OVN its subports' follows it


class PortPoolDriver(Protocol):
    def create_pool_ports(
        self, network: str, subnet: str, node: str, security_groups: list[str], count: int, cluster: str
    ) -> list[Port]:
        """``count`` ports in one request, bound to ``node``, named as the cluster's pooled ports."""

    def pool_ports(self, cluster: str) -> list[PooledPort]:
        """The cluster's pooled ports; a subport (a nested node's) with its trunk and VLAN, or neither when it is
        attached to none (made just before a crash, or its attach failed)."""


class TrunkDriver(Protocol):
    def node_trunks(self, trunk: str | None, addresses: Iterable[str]) -> list[Trunk]:
        """The trunk ``trunk`` (none if the backend lacks it), or, without one, every trunk whose parent port
        holds one of ``addresses`` as a fixed IP."""

    def trunk_vlans(self, trunk: str) -> set[int]:
        """The segmentation ids the trunk's subports use, ours or not."""

    def create_subports(
        self, trunk: str, network: str, subnet: str, security_groups: list[str], vlans: list[int], cluster: str
    ) -> list[Port]:
        """``len(vlans)`` ports attached to ``trunk``, the i-th with VLAN ``vlans[i]``; a failure leaves none."""

    def delete_subports(self, trunk: str, ports: list[str]) -> None:
        """Detach ``ports`` from ``trunk`` and delete them."""
