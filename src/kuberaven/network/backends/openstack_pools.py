"""Pooled ports on Neutron (network/backends/, mixed into OpenStackBackend): made in bulk, listed back at start.

    network/pools.py ──► create_pool_ports(): ONE POST /v2.0/ports with ``count`` ports, each bound to its node
                         (binding:host_id, so the node's OVN chassis claims it the moment it is plugged), with
                         its groups, named kuberaven-pool-<cluster> (the tags' words in its description)
                     ──► pool_ports(): the cluster's pooled ports, in one listing by that name

A pooled port has no device_id and no tags: which pod holds it is the
database's fact (its "Port" translation row), so handing it to a pod costs
no Neutron call, and its name finds it. Neutron's port creation is the step
that bounds how fast pods get ports (ML2/OVN: one OVN transaction a port),
and ML2/OVN takes no tags in a POST: a tags call a port would add to it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any

from ..backend import POOL, SUBPORT, AddressesExhausted, BackendError, PooledPort, Port, pool_port_name, tags
from .octavia import describe

NO_ADDRESS = "IpAddressGenerationFailure"  # Neutron's error type when a subnet has no free address left


class NeutronPortPools:
    """The pool half of OpenStackBackend (which provides net, project, errors, _port and _call)."""

    net: Any
    project: str
    errors: Any
    _port: Callable[[Any, str, str], Port]
    _call: Callable[[str, Callable[[], Any]], Any]
    subports_of: Callable[[Iterable[str]], dict[str, tuple[str, int]]]

    def create_pool_ports(
        self, network: str, subnet: str, node: str, security_groups: list[str], count: int, cluster: str
    ) -> list[Port]:
        body = {
            "name": pool_port_name(cluster),
            "network_id": network,
            "fixed_ips": [{"subnet_id": subnet}],
            "device_owner": "compute:kuberaven",
            "binding_host_id": node,
            "security_group_ids": security_groups,
            "description": describe(tags(cluster, POOL)),
            "project_id": self.project,
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
        addressless = [port.id for port in made if not port.fixed_ips]
        if addressless:  # the subnet went during the request (its namespace is being deleted)
            for port in made:  # not left to block the network's deletion
                with contextlib.suppress(self.errors.SDKException):
                    self.net.delete_port(port, ignore_missing=True)
            raise BackendError(f"{what}: {len(addressless)} came without an address (subnet {subnet} gone?)")
        return [self._port(port, network, port.fixed_ips[0]["ip_address"]) for port in made]

    def pool_ports(self, cluster: str) -> list[PooledPort]:
        """The cluster's pooled ports; a subport (a nested node's) with its trunk and VLAN, or neither when it is
        attached to none (made just before a crash, or its attach failed)."""
        found = self._call("pool ports", lambda: list(self.net.ports(name=pool_port_name(cluster))))
        subport = describe(tags(cluster, SUBPORT))
        attached = self.subports_of(port.id for port in found if port.description == subport)
        return [
            PooledPort(
                port.id,
                port.network_id,
                port.binding_host_id or "",
                tuple(sorted(port.security_group_ids or [])),
                port.fixed_ips[0]["ip_address"] if port.fixed_ips else "",
                port.mac_address,
                self._port(port, port.network_id, "").mtu,
                trunk=attached[port.id][0] if port.id in attached else None,
                vlan_id=attached[port.id][1] if port.id in attached else None,
                subport=port.description == subport,
            )
            for port in found
        ]
