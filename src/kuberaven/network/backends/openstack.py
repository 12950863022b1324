"""The OpenStack network backend (network/backends/): Neutron and Octavia through openstacksdk.

    translator ──► OpenStackBackend ──► Neutron: networks, subnets, subnet pools, ports,
                                        security groups, routers, floating IPs
                                    └─► Octavia: load balancers, listeners, pools, members

What kuryr-kubernetes did, with its faults fixed:

* Every resource is tagged (``kuberaven-cluster=…``, ``kuberaven-uid=…``) so
  that a restart finds what it made. Neutron (Zed) takes no tags in a POST,
  so the same words go in the description, which a create does carry: a
  retry after a crash between create and tagging still finds the resource.
* Octavia is waited on (provisioning_status ACTIVE, polled 50 ms ×1.6 up to
  5 s, for at most ``timeout``) before and after each change of a load
  balancer: it refuses changes (409 "immutable") while one is pending.
  A load balancer in ERROR is deleted with cascade and made again.
* A 409 on create means it exists (a retry, or another kuberaven): it is
  found and adopted; a fixed IP held by another port is AddressInUse.
* When Octavia's network driver made no VIP port in Neutron (the noop
  driver of the local test stack), a port holding the VIP address is made,
  so that the floating IP has something to point at.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..backend import (
    CLUSTER_TAG,
    DELETE_ORDER,
    INFRASTRUCTURE,
    AddressesExhausted,
    AddressInUse,
    BackendError,
    FloatingIP,
    Infrastructure,
    Listener,
    LoadBalancer,
    Member,
    NetworkOptions,
    Owned,
    Port,
    PortRequest,
    Subnet,
    ensure_ports_one_by_one,
    tagged_uid,
    tags,
)
from ..vif import DEFAULT_MTU

log = logging.getLogger(__name__)

DEVICE_OWNER = "compute:kuberaven"


def _describe(resource_tags: list[str]) -> str:
    return " ".join(resource_tags)


class OpenStackBackend:
    name = "openstack"

    def __init__(self, connection: Any, project: str = "kuberaven", timeout: float = 300.0) -> None:
        from openstack import exceptions

        self.conn = connection
        self.net = connection.network
        self.lbaas = connection.load_balancer
        self.project = project
        self.timeout = timeout
        self.errors = exceptions
        self._mtus: dict[str, int] = {}

    @classmethod
    def connect(cls, cloud: str | None = None) -> OpenStackBackend:
        """From a clouds.yaml entry (``cloud``) or the OS_* environment, as the openstack CLI does."""
        import openstack

        return cls(openstack.connect(cloud=cloud) if cloud else openstack.connect())

    def close(self) -> None:
        self.conn.close()

    # -- helpers -------------------------------------------------------------

    def _call(self, what: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except self.errors.SDKException as error:
            raise BackendError(f"{what}: {error}") from error

    def _ensure(
        self,
        what: str,
        find: Callable[[], Iterable[Any]],
        create: Callable[..., Any],
        resource_tags: list[str],
        **attrs: Any,
    ) -> Any:
        """A Neutron resource: found by name and description (our tags), else created, then tagged.

        A 409 on create is looked for again: made meanwhile by a retry or another kuberaven.
        """
        description = _describe(resource_tags)

        def ours() -> Any:
            return next((r for r in find() if r.description == description), None)

        found = ours()
        if found is None:
            try:
                found = create(description=description, project_id=self.project, **attrs)
            except self.errors.ConflictException:
                found = ours()
                if found is None:
                    raise
        if sorted(found.tags or []) != sorted(resource_tags):
            self._call(f"tagging {what}", lambda: self.net.set_tags(found, resource_tags))
        return found

    # -- Neutron ---------------------------------------------------------------

    def ensure_infrastructure(self, cluster: str, options: NetworkOptions) -> Infrastructure:
        infra = tags(cluster, INFRASTRUCTURE)
        name = f"kuberaven-{cluster}"
        service_network = self.ensure_network(f"{name}-services", infra)
        service_subnet = self.ensure_subnet(service_network, f"{name}-services", infra, cidr=options.service_cidr)
        if options.external_network:
            external_id, external_subnet = self._existing_external(options.external_network)
        else:
            external = self._ensure(
                "external network", lambda: self.net.networks(name=f"{name}-external"), self.net.create_network,
                infra, name=f"{name}-external", is_router_external=True,
            )  # fmt: skip
            external_id = external.id
            external_subnet = self.ensure_subnet(external.id, f"{name}-external", infra, cidr=options.external_cidr).id
        router = self._ensure(
            "router", lambda: self.net.routers(name=name), self.net.create_router, infra,
            name=name, external_gateway_info={"network_id": external_id},
        )  # fmt: skip
        self.ensure_router_interface(router.id, service_subnet.id)
        pool = None
        if options.subnet_mode == "namespace":
            pool = self._ensure(
                "subnet pool", lambda: self.net.subnet_pools(name=f"{name}-namespaces"), self.net.create_subnet_pool,
                infra, name=f"{name}-namespaces", prefixes=[options.namespace_pool],
                default_prefixlen=options.namespace_prefix,
            ).id  # fmt: skip
        return Infrastructure(service_network, service_subnet.id, external_id, external_subnet, router.id, pool)

    def _existing_external(self, name_or_id: str) -> tuple[str, str]:
        """(network, subnet) of the cloud's external network, by name or id."""
        found = self._call(f"external network {name_or_id}", lambda: self.net.find_network(name_or_id))
        if found is None or not found.is_router_external:
            raise BackendError(f"external network {name_or_id!r} does not exist (or is not external)")
        if not found.subnet_ids:
            raise BackendError(f"external network {name_or_id!r} has no subnet to take floating IPs from")
        return str(found.id), str(found.subnet_ids[0])

    def ensure_network(self, name: str, tags: list[str]) -> str:
        return str(
            self._ensure(
                f"network {name}", lambda: self.net.networks(name=name), self.net.create_network, tags, name=name
            ).id
        )

    def ensure_subnet(
        self, network: str, name: str, tags: list[str], *, cidr: str | None = None, pool: str | None = None,
        prefix: int | None = None,
    ) -> Subnet:  # fmt: skip
        attrs: dict[str, Any] = {"name": name, "network_id": network, "ip_version": 4}
        attrs.update({"cidr": cidr} if cidr else {"subnetpool_id": pool, "prefixlen": prefix})
        try:
            subnet = self._ensure(
                f"subnet {name}", lambda: self.net.subnets(network_id=network, name=name), self.net.create_subnet,
                tags, **attrs,
            )  # fmt: skip
        except self.errors.ConflictException as error:
            raise AddressesExhausted(f"subnet {name}: {error}") from error
        except self.errors.SDKException as error:
            raise BackendError(f"subnet {name}: {error}") from error
        return Subnet(subnet.id, subnet.cidr, subnet.gateway_ip)

    def ensure_ingress_rule(self, group: str, remote_cidr: str) -> None:
        def existing() -> list[Any]:
            rules = self.net.security_group_rules(security_group_id=group, direction="ingress")
            return [r for r in rules if r.remote_ip_prefix == remote_cidr and r.protocol is None]

        if not self._call(f"rules of security group {group}", existing):
            self._call(
                f"ingress rule from {remote_cidr}",
                lambda: self.net.create_security_group_rule(
                    security_group_id=group, direction="ingress", ethertype="IPv4", remote_ip_prefix=remote_cidr
                ),
            )

    def ensure_router_interface(self, router: str, subnet: str) -> None:
        ports = self._call(f"router {router} ports", lambda: list(self.net.ports(device_id=router)))
        if not any(any(ip["subnet_id"] == subnet for ip in port.fixed_ips) for port in ports):
            self._call(f"router interface to {subnet}", lambda: self.net.add_interface_to_router(router, subnet=subnet))

    def ensure_security_group(self, name: str, tags: list[str]) -> str:
        def existing() -> Iterable[Any]:
            return self.net.security_groups(name=name, project_id=self.project)

        return str(self._ensure(f"security group {name}", existing, self.net.create_security_group, tags, name=name).id)

    def ensure_port(
        self, network: str, subnet: str, name: str, device_id: str, address: str | None,
        security_groups: list[str], tags: list[str], host: str | None = None,
    ) -> Port:  # fmt: skip
        description = _describe(tags)
        for port in self.net.ports(network_id=network, name=name):
            if port.description != description:
                continue
            current = port.fixed_ips[0]["ip_address"] if port.fixed_ips else None
            if address in (None, current):
                return self._port(port, network, current or "")
            self.net.delete_port(port, ignore_missing=True)  # the pod's IP changed
        fixed_ip = {"subnet_id": subnet, **({"ip_address": address} if address else {})}
        try:
            port = self._ensure(
                f"port {name}", lambda: (), self.net.create_port, tags, name=name, network_id=network,
                fixed_ips=[fixed_ip], device_id=device_id, device_owner=DEVICE_OWNER,
                security_group_ids=security_groups, **({"binding_host_id": host} if host else {}),
            )  # fmt: skip
        except self.errors.ConflictException as error:
            if address is None:
                raise AddressesExhausted(f"port {name}: {error}") from error
            holder = next(iter(self.net.ports(network_id=network, fixed_ips=[f"ip_address={address}"])), None)
            if holder is None:
                raise BackendError(f"port {name}: {error}") from error
            raise AddressInUse(address, holder.id, holder.device_id or None) from error
        except self.errors.SDKException as error:
            raise BackendError(f"port {name}: {error}") from error
        return self._port(port, network, port.fixed_ips[0]["ip_address"])

    def _port(self, port: Any, network: str, address: str) -> Port:
        """The port with its MAC and its network's MTU (asked once per network: it does not change)."""
        if network not in self._mtus:
            self._mtus[network] = self._call(f"network {network}", lambda: self.net.get_network(network)).mtu
        return Port(port.id, address, port.mac_address, self._mtus[network] or DEFAULT_MTU)

    def ensure_ports(self, requests: list[PortRequest]) -> list[Port | BackendError]:
        return ensure_ports_one_by_one(self, requests)

    def ensure_floating_ip(self, external_network: str, port: str, address: str | None, tags: list[str]) -> FloatingIP:
        description = _describe(tags)
        for fip in self.net.ips(port_id=port):
            if fip.description == description and address in (None, fip.floating_ip_address):
                return FloatingIP(fip.id, fip.floating_ip_address)
            if fip.description == description:
                self.net.delete_ip(fip, ignore_missing=True)  # a different loadBalancerIP is asked for now
        attrs: dict[str, Any] = {"floating_network_id": external_network, "port_id": port}
        if address:
            attrs["floating_ip_address"] = address
        try:
            fip = self._ensure(f"floating IP for port {port}", lambda: (), self.net.create_ip, tags, **attrs)
        except self.errors.ConflictException as error:
            raise AddressInUse(address or "?", "floating IP", None) from error
        except self.errors.SDKException as error:
            raise BackendError(f"floating IP for port {port}: {error}") from error
        return FloatingIP(fip.id, fip.floating_ip_address)

    # -- Octavia ---------------------------------------------------------------

    def _wait_active(self, load_balancer: str) -> Any:
        """Until the load balancer is ACTIVE; ERROR and the timeout raise."""
        delay, deadline = 0.05, time.monotonic() + self.timeout
        while True:
            lb = self._call(f"load balancer {load_balancer}", lambda: self.lbaas.get_load_balancer(load_balancer))
            if lb.provisioning_status == "ACTIVE":
                return lb
            if lb.provisioning_status == "ERROR":
                raise BackendError(f"load balancer {lb.name} ({lb.id}) is in ERROR")
            if time.monotonic() > deadline:
                raise BackendError(f"load balancer {lb.name} still {lb.provisioning_status} after {self.timeout:.0f}s")
            time.sleep(delay)
            delay = min(delay * 1.6, 5.0)

    def ensure_load_balancer(self, name: str, subnet: str, vip_address: str, tags: list[str]) -> LoadBalancer:
        description = _describe(tags)
        lb = None
        for found in self.lbaas.load_balancers(name=name):
            if found.description != description:
                continue
            if found.provisioning_status == "ERROR" or found.vip_address != vip_address:
                log.info("load balancer %s is %s; making it again", name, found.provisioning_status)
                self._delete_load_balancer(found.id)
                continue
            lb = found
        if lb is None:
            lb = self._call(
                f"load balancer {name}",
                lambda: self.lbaas.create_load_balancer(
                    name=name, description=description, vip_subnet_id=subnet, vip_address=vip_address,
                    project_id=self.project, tags=tags,
                ),
            )  # fmt: skip
        lb = self._wait_active(lb.id)
        return LoadBalancer(lb.id, lb.vip_address, self._vip_port(lb, subnet, tags))

    def _vip_port(self, lb: Any, subnet: str, tags: list[str]) -> str:
        if lb.vip_port_id and self.net.find_port(lb.vip_port_id, ignore_missing=True) is not None:
            return str(lb.vip_port_id)
        network = self.net.get_subnet(subnet).network_id
        return self.ensure_port(network, subnet, f"{lb.name}:vip", lb.id, lb.vip_address, [], tags).id

    def listeners(self, load_balancer: str) -> list[Listener]:
        # Read through the load balancer: a listener list filter Octavia does not know would
        # be dropped silently and return every load balancer's listeners.
        lb = self._call(f"load balancer {load_balancer}", lambda: self.lbaas.get_load_balancer(load_balancer))
        found = []
        for ref in lb.listeners or []:
            listener = self._call(f"listener {ref['id']}", functools.partial(self.lbaas.get_listener, ref["id"]))
            found.append(
                Listener(
                    listener.id, listener.name, listener.protocol, listener.protocol_port, listener.default_pool_id
                )
            )
        return found

    def create_listener(self, load_balancer: str, name: str, protocol: str, port: int, tags: list[str]) -> Listener:
        self._wait_active(load_balancer)
        listener = self._call(
            f"listener {name}",
            lambda: self.lbaas.create_listener(
                loadbalancer_id=load_balancer, name=name, protocol=protocol, protocol_port=port, tags=tags
            ),
        )
        self._wait_active(load_balancer)
        pool = self._call(
            f"pool {name}",
            lambda: self.lbaas.create_pool(
                listener_id=listener.id, name=name, protocol=protocol, lb_algorithm="ROUND_ROBIN", tags=tags
            ),
        )
        self._wait_active(load_balancer)
        return Listener(listener.id, name, protocol, port, pool.id)

    def delete_listener(self, load_balancer: str, listener: Listener) -> None:
        self._wait_active(load_balancer)
        if listener.pool:
            self._call(f"pool of {listener.name}", lambda: self.lbaas.delete_pool(listener.pool, ignore_missing=True))
            self._wait_active(load_balancer)
        self._call(f"listener {listener.name}", lambda: self.lbaas.delete_listener(listener.id, ignore_missing=True))
        self._wait_active(load_balancer)

    def members(self, pool: str) -> list[Member]:
        return [Member(m.id, m.name, m.address, m.protocol_port) for m in self.lbaas.members(pool)]

    def create_member(
        self, load_balancer: str, pool: str, name: str, address: str, port: int, subnet: str, tags: list[str]
    ) -> Member:
        self._wait_active(load_balancer)
        member = self._call(
            f"member {name}",
            lambda: self.lbaas.create_member(
                pool, name=name, address=address, protocol_port=port, subnet_id=subnet, tags=tags
            ),
        )
        self._wait_active(load_balancer)
        return Member(member.id, name, address, port)

    def delete_member(self, load_balancer: str, pool: str, member: str) -> None:
        self._wait_active(load_balancer)
        self._call(f"member {member}", lambda: self.lbaas.delete_member(member, pool, ignore_missing=True))
        self._wait_active(load_balancer)

    def _delete_load_balancer(self, load_balancer: str) -> None:
        lb = self.lbaas.find_load_balancer(load_balancer, ignore_missing=True)
        if lb is None:
            return
        self._call(f"load balancer {lb.name}", lambda: self.lbaas.delete_load_balancer(lb.id, cascade=True))
        self._call(f"load balancer {lb.name}", lambda: self.lbaas.wait_for_delete(lb, interval=0.1, wait=self.timeout))
        # The VIP port made for it, when Octavia made none.
        for port in self.net.ports(name=f"{lb.name}:vip", device_id=lb.id):
            self.net.delete_port(port, ignore_missing=True)

    # -- garbage collection and deletes ----------------------------------------

    def owned(self, cluster: str) -> list[Owned]:
        tag = f"{CLUSTER_TAG}{cluster}"
        listings: dict[str, Iterable[Any]] = {
            "floating_ip": self.net.ips(tags=tag),
            "load_balancer": self.lbaas.load_balancers(tags=tag),
            "port": self.net.ports(tags=tag),
            "security_group": self.net.security_groups(tags=tag),
            "network": self.net.networks(tags=tag),
        }
        found = []
        for kind in DELETE_ORDER:
            for r in listings[kind]:
                name = r.floating_ip_address if kind == "floating_ip" else r.name
                found.append(Owned(kind, r.id, name or "", tagged_uid(r.tags or []), list(r.tags or [])))
        return found

    def delete(self, kind: str, resource: str) -> None:
        if kind == "load_balancer":
            self._delete_load_balancer(resource)
            return
        if kind == "network":
            # Neutron refuses to delete a network with ports on it (its subnets go with it).
            for port in self.net.ports(network_id=resource):
                if port.device_owner == "network:router_interface":
                    self.net.remove_interface_from_router(port.device_id, port_id=port.id)
                else:
                    self.net.delete_port(port, ignore_missing=True)
        delete = {
            "floating_ip": self.net.delete_ip,
            "port": self.net.delete_port,
            "security_group": self.net.delete_security_group,
            "network": self.net.delete_network,
            "listener": self.lbaas.delete_listener,
        }[kind]
        self._call(f"deleting {kind} {resource}", lambda: delete(resource, ignore_missing=True))
