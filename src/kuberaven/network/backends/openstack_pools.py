"""Pooled ports on Neutron (network/backends/): the PortPoolDriver, made in bulk and listed back at start.

    network/pools.py ──► create_pool_ports(): ONE POST /v2.0/ports with ``count`` ports, each bound to its node
                         (binding:host_id, so the node's OVN chassis claims it the moment it is plugged), with
                         its groups, named kuberaven-pool-<cluster> (the tags' words in its description)
                     ──► pool_ports(): the cluster's pooled ports, in one listing by that name (subports with
                         their trunk and VLAN: openstack_trunks.py's subports_of())

A pooled port has no device_id and no tags: which pod holds it is the
database's fact (its "Port" translation row), so handing it to a pod costs
no Neutron call, and its name finds it. Neutron's port creation is the step
that bounds how fast pods get ports (ML2/OVN: one OVN transaction a port),
and ML2/OVN takes no tags in a POST: a tags call a port would add to it.
"""

from __future__ import annotations

import contextlib

from ..backend import POOL, SUBPORT, BackendError, pool_port_name, tags
from ..drivers.port_pools import PooledPort
from ..drivers.ports import Port
from .openstack_context import OpenStackContext, describe
from .openstack_ports import DEVICE_OWNER, create_in_bulk
from .openstack_trunks import NeutronTrunks


class NeutronPortPools:
    """PortPoolDriver on Neutron; its listing asks ``trunks`` which subports are attached where."""

    def __init__(self, context: OpenStackContext, trunks: NeutronTrunks) -> None:
        self.context = context
        self.net = context.net
        self.trunks = trunks

    def create_pool_ports(
        self, network: str, subnet: str, node: str, security_groups: list[str], count: int, cluster: str
    ) -> list[Port]:
        body = {
            "name": pool_port_name(cluster),
            "network_id": network,
            "fixed_ips": [{"subnet_id": subnet}],
            "device_owner": DEVICE_OWNER,
            "binding_host_id": node,
            "security_group_ids": security_groups,
            "description": describe(tags(cluster, POOL)),
            "project_id": self.context.project,
        }
        what = f"{count} pool ports on network {network} for node {node}"
        made = create_in_bulk(self.context, [dict(body) for _ in range(count)], what)
        addressless = [port.id for port in made if not port.fixed_ips]
        if addressless:  # the subnet went during the request (its namespace is being deleted)
            for port in made:  # not left to block the network's deletion
                with contextlib.suppress(self.context.errors.SDKException):
                    self.net.delete_port(port, ignore_missing=True)
            raise BackendError(f"{what}: {len(addressless)} came without an address (subnet {subnet} gone?)")
        return [self.context.port(port, network, port.fixed_ips[0]["ip_address"]) for port in made]

    def pool_ports(self, cluster: str) -> list[PooledPort]:
        found = self.context.call("pool ports", lambda: list(self.net.ports(name=pool_port_name(cluster))))
        subport = describe(tags(cluster, SUBPORT))
        attached = self.trunks.subports_of(port.id for port in found if port.description == subport)
        return [
            PooledPort(
                port.id,
                port.network_id,
                port.binding_host_id or "",
                tuple(sorted(port.security_group_ids or [])),
                port.fixed_ips[0]["ip_address"] if port.fixed_ips else "",
                port.mac_address,
                self.context.port(port, port.network_id, "").mtu,
                trunk=attached[port.id][0] if port.id in attached else None,
                vlan_id=attached[port.id][1] if port.id in attached else None,
                subport=port.description == subport,
            )
            for port in found
        ]
