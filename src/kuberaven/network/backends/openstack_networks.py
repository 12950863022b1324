"""Neutron's networks for the OpenStack backend (network/backends/): the infrastructure, networks, floating IPs.

OpenStackBackend (openstack.py) ──► NeutronNetworks: the cluster's service network, external network (its
    own, or the cloud's by name), router and subnet pool; a namespace's network and subnet, joined to the
    router; a network deleted with its ports (subports detached first) and router interfaces
──► NeutronFloatingIPs: a LoadBalancer Service's floating IP on its VIP port; released (keep-floatingip)
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from ..backend import INFRASTRUCTURE, AddressesExhausted, AddressInUse, BackendError, NetworkOptions, tags
from ..drivers.floating_ips import FloatingIP
from ..drivers.networks import Infrastructure, Subnet
from .openstack_context import OpenStackContext, describe
from .openstack_trunks import NeutronTrunks

ROUTER_INTERFACE = "network:router_interface"  # the device_owner of a router's port on a subnet


class NeutronNetworks:
    """NetworkDriver on Neutron; also deletes networks (a network's subports are detached through ``trunks``)."""

    def __init__(self, context: OpenStackContext, trunks: NeutronTrunks) -> None:
        self.context = context
        self.net = context.net
        self.trunks = trunks

    def ensure_infrastructure(self, cluster: str, options: NetworkOptions) -> Infrastructure:
        infra = tags(cluster, INFRASTRUCTURE)
        name = f"kuberaven-{cluster}"
        service_network = self.ensure_network(f"{name}-services", infra)
        service_subnet = self.ensure_subnet(service_network, f"{name}-services", infra, cidr=options.service_cidr)
        if options.external_network:
            external_id, external_subnet = self._existing_external(options.external_network)
        else:
            external = self.context.ensure(
                "external network",
                lambda: self.net.networks(name=f"{name}-external"),
                self.net.create_network,
                infra,
                name=f"{name}-external",
                is_router_external=True,
            )
            external_id = external.id
            external_subnet = self.ensure_subnet(external.id, f"{name}-external", infra, cidr=options.external_cidr).id
        router = self.context.ensure(
            "router",
            lambda: self.net.routers(name=name),
            self.net.create_router,
            infra,
            name=name,
            external_gateway_info={"network_id": external_id},
        )
        self.ensure_router_interface(router.id, service_subnet.id)
        pool = None
        if options.subnet_mode == "namespace":
            pool = self.context.ensure(
                "subnet pool",
                lambda: self.net.subnet_pools(name=f"{name}-namespaces"),
                self.net.create_subnet_pool,
                infra,
                name=f"{name}-namespaces",
                prefixes=[options.namespace_pool],
                default_prefixlen=options.namespace_prefix,
            ).id
        return Infrastructure(service_network, service_subnet.id, external_id, external_subnet, router.id, pool)

    def _existing_external(self, name_or_id: str) -> tuple[str, str]:
        """(network, subnet) of the cloud's external network, by name or id."""
        found = self.context.call(f"external network {name_or_id}", lambda: self.net.find_network(name_or_id))
        if found is None or not found.is_router_external:
            raise BackendError(f"external network {name_or_id!r} does not exist (or is not external)")
        if not found.subnet_ids:
            raise BackendError(f"external network {name_or_id!r} has no subnet to take floating IPs from")
        return str(found.id), str(found.subnet_ids[0])

    def ensure_network(self, name: str, tags: list[str]) -> str:
        found = self.context.ensure(
            f"network {name}", lambda: self.net.networks(name=name), self.net.create_network, tags, name=name
        )
        return str(found.id)

    def ensure_subnet(
        self,
        network: str,
        name: str,
        tags: list[str],
        *,
        cidr: str | None = None,
        pool: str | None = None,
        prefix: int | None = None,
    ) -> Subnet:
        attrs: dict[str, Any] = {"name": name, "network_id": network, "ip_version": 4}
        attrs.update({"cidr": cidr} if cidr else {"subnetpool_id": pool, "prefixlen": prefix})
        errors = self.context.errors
        try:
            subnet = self.context.ensure(
                f"subnet {name}",
                lambda: self.net.subnets(network_id=network, name=name),
                self.net.create_subnet,
                tags,
                **attrs,
            )
        except errors.ConflictException as error:
            raise AddressesExhausted(f"subnet {name}: {error}") from error
        except errors.SDKException as error:
            raise BackendError(f"subnet {name}: {error}") from error
        return Subnet(subnet.id, subnet.cidr, subnet.gateway_ip)

    def ensure_router_interface(self, router: str, subnet: str) -> None:
        ports = self.context.call(f"router {router} ports", lambda: list(self.net.ports(device_id=router)))
        if not any(any(ip["subnet_id"] == subnet for ip in port.fixed_ips) for port in ports):
            self.context.call(
                f"router interface to {subnet}", lambda: self.net.add_interface_to_router(router, subnet=subnet)
            )

    def delete_network(self, network: str) -> None:
        """The network with its subnets. Neutron refuses to delete a network with ports on it, and a port that is
        a trunk's subport (a nested pod's): those are detached first, router interfaces removed, ports deleted."""
        ports = list(self.net.ports(network_id=network))
        self.trunks.detach_all(ports)
        for port in ports:
            if port.device_owner == ROUTER_INTERFACE:
                self.net.remove_interface_from_router(port.device_id, port_id=port.id)
            else:
                self.net.delete_port(port, ignore_missing=True)
        self.context.call(f"deleting network {network}", lambda: self.net.delete_network(network, ignore_missing=True))


class NeutronFloatingIPs:
    """FloatingIPDriver on Neutron: a floating IP of the external network, found by the port it points at."""

    def __init__(self, context: OpenStackContext) -> None:
        self.context = context
        self.net = context.net

    def ensure_floating_ip(
        self, external_network: str, port: str, address: str | None, tags: list[str], subnet: str | None = None
    ) -> FloatingIP:
        description = describe(tags)
        for fip in self.net.ips(port_id=port):
            if fip.description == description and address in (None, fip.floating_ip_address):
                return FloatingIP(fip.id, fip.floating_ip_address)
            if fip.description == description:
                self.net.delete_ip(fip, ignore_missing=True)  # a different loadBalancerIP is asked for now
        if address:  # one not attached (kept by keep-floatingip, or made by hand) is taken; anything attached
            # is another's (AddressInUse below)
            kept = self._unattached(external_network, address)
            for fip in kept:
                taken = functools.partial(self.net.update_ip, fip.id, port_id=port, description=description)
                self.context.call(f"floating IP {address}", taken)
                self.context.call(f"tags of floating IP {address}", functools.partial(self.net.set_tags, fip, tags))
                return FloatingIP(fip.id, address)
        attrs: dict[str, Any] = {"floating_network_id": external_network, "port_id": port}
        if address:
            attrs["floating_ip_address"] = address
        elif subnet:
            attrs["subnet_id"] = subnet
        errors = self.context.errors
        try:
            fip = self.context.ensure(f"floating IP for port {port}", lambda: (), self.net.create_ip, tags, **attrs)
        except errors.ConflictException as error:
            raise AddressInUse(address or "?", "floating IP", None) from error
        except errors.SDKException as error:
            raise BackendError(f"floating IP for port {port}: {error}") from error
        return FloatingIP(fip.id, fip.floating_ip_address)

    def _unattached(self, external_network: str, address: str) -> Iterable[Any]:
        found = self.net.ips(floating_ip_address=address, floating_network_id=external_network)
        return (fip for fip in found if not fip.port_id)

    def release_floating_ip(self, floating_ip: str) -> None:
        self.context.call(
            f"floating IP {floating_ip}", lambda: self.net.update_ip(floating_ip, port_id=None, description="")
        )
        self.context.call(
            f"tags of floating IP {floating_ip}", lambda: self.net.set_tags(self.net.get_ip(floating_ip), [])
        )
