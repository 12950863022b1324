"""Pooled ports on Neutron (network/backends/, mixed into OpenStackBackend): made in bulk, listed back at start.

    network/pools.py ──► create_pool_ports(): ONE POST /v2.0/ports with ``count`` ports, each bound to its node
                         (binding:host_id, so the node's OVN chassis claims it the moment it is plugged), with
                         its groups, and tagged in the same request (the ML2 extension driver
                         tag_ports_during_bulk_creation); without that extension, tagged one by one after
                     ──► pool_ports(): the cluster's ports tagged kuberaven-uid=pool, in one listing

A pooled port has no device_id: which pod holds it is the database's fact
(its "Port" translation row), so handing it to a pod costs no Neutron call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..backend import CLUSTER_TAG, POOL, UID_TAG, AddressesExhausted, BackendError, PooledPort, Port
from .octavia import describe

log = logging.getLogger(__name__)

POOL_PORT_NAME = "kuberaven-pool"
TAGS_IN_CREATE = "tag-ports-during-bulk-creation"  # the Neutron API extension that takes tags in a port's POST
NO_ADDRESS = "IpAddressGenerationFailure"  # Neutron's error type when a subnet has no free address left


class NeutronPortPools:
    """The pool half of OpenStackBackend (which provides conn, net, project, errors, _port and _call)."""

    net: Any
    project: str
    errors: Any
    _port: Callable[[Any, str, str], Port]
    _call: Callable[[str, Callable[[], Any]], Any]
    _tags_in_create: bool | None = None

    def _takes_tags_in_create(self) -> bool:
        if self._tags_in_create is None:
            found = self._call("Neutron's extensions", lambda: self.net.find_extension(TAGS_IN_CREATE))
            self._tags_in_create = found is not None
            if not self._tags_in_create:
                log.warning(
                    "Neutron lacks the %s extension (ML2 extension driver tag_ports_during_bulk_creation): "
                    "each pooled port is tagged in a call of its own",
                    TAGS_IN_CREATE,
                )
        return self._tags_in_create

    def create_pool_ports(
        self, network: str, subnet: str, node: str, security_groups: list[str], count: int, tags: list[str]
    ) -> list[Port]:
        with_tags = self._takes_tags_in_create()
        body = {
            "name": POOL_PORT_NAME,
            "network_id": network,
            "fixed_ips": [{"subnet_id": subnet}],
            "device_owner": "compute:kuberaven",
            "binding_host_id": node,
            "security_group_ids": security_groups,
            "description": describe(tags),
            "project_id": self.project,
            **({"tags": tags} if with_tags else {}),
        }
        what = f"{count} pool ports on network {network} for node {node}"
        try:
            made = list(self.net.create_ports([dict(body) for _ in range(count)]))
        except self.errors.ConflictException as error:
            if NO_ADDRESS in str(error):
                raise AddressesExhausted(f"{what}: {error}") from error
            raise BackendError(f"{what}: {error}") from error
        except self.errors.SDKException as error:
            raise BackendError(f"{what}: {error}") from error
        for port in made if not with_tags else []:
            self._tag(port, tags)
        return [self._port(port, network, port.fixed_ips[0]["ip_address"]) for port in made]

    def _tag(self, port: Any, tags: list[str]) -> None:
        self._call(f"tagging port {port.id}", lambda: self.net.set_tags(port, tags))

    def pool_ports(self, cluster: str) -> list[PooledPort]:
        query = {"tags": f"{CLUSTER_TAG}{cluster},{UID_TAG}{POOL}"}
        found = self._call("pool ports", lambda: list(self.net.ports(**query)))
        return [
            PooledPort(
                port.id,
                port.network_id,
                port.binding_host_id or "",
                tuple(sorted(port.security_group_ids or [])),
                port.fixed_ips[0]["ip_address"] if port.fixed_ips else "",
                port.mac_address,
                self._port(port, port.network_id, "").mtu,
            )
            for port in found
        ]
