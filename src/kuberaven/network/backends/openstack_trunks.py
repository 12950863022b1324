"""Trunks and their subports on Neutron (network/backends/): nested nodes' pools, the TrunkDriver.

    network/trunks.py ──► node_trunks(): the trunk named by a node's annotation (one GET), or the trunks whose
                          parent port holds one of its InternalIPs (a port listing by fixed IP, one trunk listing)
    network/pools.py  ──► trunk_vlans(): the segmentation ids a trunk's subports use (one GET)
                      ──► create_subports(): ONE POST /v2.0/ports with the ports (no binding:host_id: the trunk's
                          parent decides where they live), then ONE add_subports call with their VLAN ids; all or
                          none: a failed attach deletes the ports it made
                      ──► delete_subports(): detached in one call, then deleted (Neutron refuses to delete a port
                          that is a trunk's subport)
    openstack_pools.py (pool_ports), openstack_networks.py (a network deleted) ──► subports_of(), detach_all()

Subports are named like the other pooled ports (kuberaven-pool-<cluster>), so
one listing by name finds both at start and in activation's full listing;
the word ``subport`` in their description tells them apart, and the trunks'
``sub_ports`` say which trunk and VLAN each has (openstack_pools.py's
pool_ports()).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable
from typing import Any

from ..backend import SUBPORT, BackendError, pool_port_name, tags
from ..drivers.port_pools import Trunk
from ..drivers.ports import Port
from .openstack_context import OpenStackContext, describe
from .openstack_ports import SUBPORT_OWNER, create_in_bulk

log = logging.getLogger(__name__)

VLAN = "vlan"  # the segmentation type of a nested pod's subport
TRUNK_EXTENSION = "trunk"  # Neutron's extension alias of the trunk service plugin


class NeutronTrunks:
    """TrunkDriver on Neutron; without the trunk extension every node is bare."""

    def __init__(self, context: OpenStackContext) -> None:
        self.context = context
        self.net = context.net
        self._served: bool | None = None  # whether Neutron serves trunks (asked once, at the first lookup)
        self._served_lock = threading.Lock()

    def node_trunks(self, trunk: str | None, addresses: Iterable[str]) -> list[Trunk]:
        """The trunk ``trunk`` (none if Neutron lacks it), or, without one, every trunk whose parent port holds
        one of ``addresses`` as a fixed IP."""
        if not self._trunks_served():
            return []
        if trunk is not None:
            found = self.context.call(f"trunk {trunk}", lambda: self.net.find_trunk(trunk, ignore_missing=True))
            return [self._trunk(found)] if found is not None else []
        parents = {port.id: port for address in addresses for port in self._ports_of(address)}
        if not parents:
            return []
        trunks = self.context.call("trunks of ports", lambda: list(self.net.trunks(port_id=sorted(parents))))
        return [self._trunk(t, parents[t.port_id]) for t in trunks if t.port_id in parents]

    def _trunks_served(self) -> bool:
        """Whether this Neutron has the trunk extension (asked once): without it every node is bare."""
        with self._served_lock:
            if self._served is None:
                found = self.context.call("the trunk extension", lambda: self.net.find_extension(TRUNK_EXTENSION))
                self._served = found is not None
                if found is None:
                    log.info("Neutron has no trunk extension: every node is bare")
            return self._served

    def _ports_of(self, address: str) -> list[Any]:
        return list(
            self.context.call(f"ports of {address}", lambda: list(self.net.ports(fixed_ips=[f"ip_address={address}"])))
        )

    def _trunk(self, trunk: Any, parent: Any = None) -> Trunk:
        if parent is None:
            parent = self.context.call(f"port {trunk.port_id}", lambda: self.net.get_port(trunk.port_id))
        return Trunk(trunk.id, trunk.port_id, parent.mac_address, parent.status or "")

    def trunk_vlans(self, trunk: str) -> set[int]:
        found = self.context.call(f"trunk {trunk}", lambda: self.net.get_trunk(trunk))
        return {int(sub["segmentation_id"]) for sub in found.sub_ports or []}

    def create_subports(
        self, trunk: str, network: str, subnet: str, security_groups: list[str], vlans: list[int], cluster: str
    ) -> list[Port]:
        """``len(vlans)`` ports made in one request and attached to ``trunk`` in one call, the i-th with VLAN
        ``vlans[i]``; a failure leaves none behind."""
        body = {
            "name": pool_port_name(cluster),
            "network_id": network,
            "fixed_ips": [{"subnet_id": subnet}],
            "security_group_ids": security_groups,
            "description": describe(tags(cluster, SUBPORT)),
            "project_id": self.context.project,
        }
        what = f"{len(vlans)} subports of trunk {trunk} on network {network}"
        made = create_in_bulk(self.context, [dict(body) for _ in vlans], what)
        subports = [
            {"port_id": port.id, "segmentation_type": VLAN, "segmentation_id": vlan}
            for port, vlan in zip(made, vlans, strict=True)
        ]
        errors = self.context.errors
        try:
            if any(not port.fixed_ips for port in made):
                raise BackendError(f"{what}: some came without an address (subnet {subnet} gone?)")
            self.net.add_trunk_subports(trunk, subports)
        except (errors.SDKException, BackendError) as error:
            for port in made:  # all or none
                with contextlib.suppress(errors.SDKException):
                    self.net.delete_port(port, ignore_missing=True)
            raise BackendError(f"{what}: attaching them: {error}") from error
        return [self.context.port(port, network, port.fixed_ips[0]["ip_address"]) for port in made]

    def delete_subports(self, trunk: str, ports: list[str]) -> None:
        """Detach ``ports`` from ``trunk`` (one call; any that is not attached, one by one) and delete them."""
        if not ports:
            return
        errors = self.context.errors
        try:
            self.net.delete_trunk_subports(trunk, [{"port_id": port} for port in ports])
        except errors.NotFoundException:  # the trunk, or one of them, is not attached: each on its own
            for port in ports:
                with contextlib.suppress(errors.NotFoundException):
                    self.net.delete_trunk_subports(trunk, [{"port_id": port}])
        except errors.SDKException as error:
            raise BackendError(f"detaching {len(ports)} subports from trunk {trunk}: {error}") from error
        for port in ports:
            try:
                self.net.delete_port(port, ignore_missing=True)
            except errors.SDKException as error:
                raise BackendError(f"deleting port {port}: {error}") from error

    def subports_of(self, ports: Iterable[str]) -> dict[str, tuple[str, int]]:
        """Which trunk, and which VLAN there, each of ``ports`` is attached to (one listing of the trunks)."""
        wanted = set(ports)
        if not wanted:
            return {}
        trunks = self.context.call("trunks", lambda: list(self.net.trunks()))
        return {
            sub["port_id"]: (trunk.id, int(sub["segmentation_id"]))
            for trunk in trunks
            for sub in trunk.sub_ports or []
            if sub["port_id"] in wanted
        }

    def detach_all(self, ports: list[Any]) -> None:
        """Detach the subports among ``ports`` from their trunks, one call per trunk (before they are deleted)."""
        attached = self.subports_of(port.id for port in ports if port.device_owner == SUBPORT_OWNER)
        by_trunk: dict[str, list[str]] = {}
        for port, (trunk, _) in attached.items():
            by_trunk.setdefault(trunk, []).append(port)
        errors = self.context.errors
        for trunk, members in sorted(by_trunk.items()):
            log.info("detaching %d subports of trunk %s", len(members), trunk)
            try:
                self.net.delete_trunk_subports(trunk, [{"port_id": port} for port in members])
            except errors.NotFoundException:  # detached meanwhile (or its trunk went)
                continue
            except errors.SDKException as error:
                raise BackendError(f"detaching {len(members)} subports from trunk {trunk}: {error}") from error
