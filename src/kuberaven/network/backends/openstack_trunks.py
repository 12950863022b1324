"""Trunks and their subports on Neutron (network/backends/, mixed into OpenStackBackend): nested nodes' pools.

    network/trunks.py ──► node_trunks(): the trunk named by a node's annotation (one GET), or the trunks whose
                          parent port holds one of its InternalIPs (a port listing by fixed IP, one trunk listing)
    network/pools.py  ──► trunk_vlans(): the segmentation ids a trunk's subports use (one GET)
                      ──► create_subports(): ONE POST /v2.0/ports with the ports (no binding:host_id: the trunk's
                          parent decides where they live), then ONE add_subports call with their VLAN ids; all or
                          none: a failed attach deletes the ports it made
                      ──► delete_subports(): detached in one call, then deleted (Neutron refuses to delete a port
                          that is a trunk's subport)

Subports are named like the other pooled ports (kuberaven-pool-<cluster>), so
one listing by name finds both at start and in activation's full listing;
the word ``subport`` in their description tells them apart, and the trunks'
``sub_ports`` say which trunk and VLAN each has (openstack_pools.py's
pool_ports()).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

from ..backend import SUBPORT, AddressesExhausted, BackendError, Port, Trunk, pool_port_name, tags
from .octavia import describe
from .openstack_pools import NO_ADDRESS

log = logging.getLogger(__name__)

SUBPORT_OWNER = "trunk:subport"  # the device_owner Neutron's trunk plugin gives an attached subport
VLAN = "vlan"  # the segmentation type of a nested pod's subport
TRUNK_EXTENSION = "trunk"  # Neutron's extension alias of the trunk service plugin


class NeutronTrunks:
    """The trunk half of OpenStackBackend (which provides net, project, errors, _port and _call)."""

    net: Any
    project: str
    errors: Any
    _port: Callable[[Any, str, str], Port]
    _call: Callable[[str, Callable[[], Any]], Any]
    _trunk_extension: bool | None

    def node_trunks(self, trunk: str | None, addresses: Iterable[str]) -> list[Trunk]:
        """The trunk ``trunk`` (none if Neutron lacks it), or, without one, every trunk whose parent port holds
        one of ``addresses`` as a fixed IP."""
        if not self._trunks_served():
            return []
        if trunk is not None:
            found = self._call(f"trunk {trunk}", lambda: self.net.find_trunk(trunk, ignore_missing=True))
            return [self._trunk(found)] if found is not None else []
        parents = {port.id: port for address in addresses for port in self._ports_of(address)}
        if not parents:
            return []
        trunks = self._call("trunks of ports", lambda: list(self.net.trunks(port_id=sorted(parents))))
        return [self._trunk(t, parents[t.port_id]) for t in trunks if t.port_id in parents]

    def _trunks_served(self) -> bool:
        """Whether this Neutron has the trunk extension (asked once): without it every node is bare."""
        if self._trunk_extension is None:
            found = self._call("the trunk extension", lambda: self.net.find_extension(TRUNK_EXTENSION))
            self._trunk_extension = found is not None
            if found is None:
                log.info("Neutron has no trunk extension: every node is bare")
        return self._trunk_extension

    def _ports_of(self, address: str) -> list[Any]:
        return list(
            self._call(f"ports of {address}", lambda: list(self.net.ports(fixed_ips=[f"ip_address={address}"])))
        )

    def _trunk(self, trunk: Any, parent: Any = None) -> Trunk:
        if parent is None:
            parent = self._call(f"port {trunk.port_id}", lambda: self.net.get_port(trunk.port_id))
        return Trunk(trunk.id, trunk.port_id, parent.mac_address, parent.status or "")

    def trunk_vlans(self, trunk: str) -> set[int]:
        found = self._call(f"trunk {trunk}", lambda: self.net.get_trunk(trunk))
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
            "project_id": self.project,
        }
        what = f"{len(vlans)} subports of trunk {trunk} on network {network}"
        try:
            made = list(self.net.create_ports([dict(body) for _ in vlans]))
        except self.errors.ConflictException as error:
            if NO_ADDRESS in str(error):
                raise AddressesExhausted(f"{what}: {error}") from error
            raise BackendError(f"{what}: {error}") from error
        except self.errors.SDKException as error:
            raise BackendError(f"{what}: {error}") from error
        subports = [
            {"port_id": port.id, "segmentation_type": VLAN, "segmentation_id": vlan}
            for port, vlan in zip(made, vlans, strict=True)
        ]
        try:
            if any(not port.fixed_ips for port in made):
                raise BackendError(f"{what}: some came without an address (subnet {subnet} gone?)")
            self.net.add_trunk_subports(trunk, subports)
        except (self.errors.SDKException, BackendError) as error:
            for port in made:  # all or none
                with contextlib.suppress(self.errors.SDKException):
                    self.net.delete_port(port, ignore_missing=True)
            raise BackendError(f"{what}: attaching them: {error}") from error
        return [self._port(port, network, port.fixed_ips[0]["ip_address"]) for port in made]

    def delete_subports(self, trunk: str, ports: list[str]) -> None:
        """Detach ``ports`` from ``trunk`` (one call; any that is not attached, one by one) and delete them."""
        if not ports:
            return
        try:
            self.net.delete_trunk_subports(trunk, [{"port_id": port} for port in ports])
        except self.errors.NotFoundException:  # the trunk, or one of them, is not attached: each on its own
            for port in ports:
                with contextlib.suppress(self.errors.NotFoundException):
                    self.net.delete_trunk_subports(trunk, [{"port_id": port}])
        except self.errors.SDKException as error:
            raise BackendError(f"detaching {len(ports)} subports from trunk {trunk}: {error}") from error
        for port in ports:
            try:
                self.net.delete_port(port, ignore_missing=True)
            except self.errors.SDKException as error:
                raise BackendError(f"deleting port {port}: {error}") from error

    def subports_of(self, ports: Iterable[str]) -> dict[str, tuple[str, int]]:
        """Which trunk, and which VLAN there, each of ``ports`` is attached to (one listing of the trunks)."""
        wanted = set(ports)
        if not wanted:
            return {}
        trunks = self._call("trunks", lambda: list(self.net.trunks()))
        return {
            sub["port_id"]: (trunk.id, int(sub["segmentation_id"]))
            for trunk in trunks
            for sub in trunk.sub_ports or []
            if sub["port_id"] in wanted
        }

    def _detach_all(self, ports: list[Any]) -> None:
        """Detach the subports among ``ports`` from their trunks, one call per trunk (before they are deleted)."""
        attached = self.subports_of(port.id for port in ports if port.device_owner == SUBPORT_OWNER)
        by_trunk: dict[str, list[str]] = {}
        for port, (trunk, _) in attached.items():
            by_trunk.setdefault(trunk, []).append(port)
        for trunk, members in sorted(by_trunk.items()):
            log.info("detaching %d subports of trunk %s", len(members), trunk)
            try:
                self.net.delete_trunk_subports(trunk, [{"port_id": port} for port in members])
            except self.errors.NotFoundException:  # detached meanwhile (or its trunk went)
                continue
            except self.errors.SDKException as error:
                raise BackendError(f"detaching {len(members)} subports from trunk {trunk}: {error}") from error
