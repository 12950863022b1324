"""The OpenStack network backend (network/backends/): Neutron and Octavia through openstacksdk.

    translator ──► OpenStackBackend ──► Neutron: networks, subnets, subnet pools, ports,
                                        security groups, routers, floating IPs
                                    └─► Octavia: load balancers, listeners, pools, members

What kuryr-kubernetes did, with its faults fixed:

* Every resource is tagged (``kuberaven-cluster=…``, ``kuberaven-uid=…``) so
  that a restart finds what it made. Neutron (Zed) takes no tags in a POST,
  so the same words go in the description, which a create does carry: a
  retry after a crash between create and tagging still finds the resource.
* Octavia is driven by octavia.py (OctaviaLoadBalancers, mixed in here):
  waited on until ACTIVE around each change; a load balancer in ERROR is
  deleted with cascade and made again.
* The ovn provider never gives OVN a pool's session persistence: with OVN's northbound database at hand
  (network_ovn_nb_connection) a ClientIP Service's affinity is set on the provider's OVN rows
  (ovn_northbound.py's OvnNorthbound, called from octavia.py); so are the
  ACLs that hold a Service's source ranges for pods coming through its floating IP (set_source_filters).
* A 409 on create means it exists (a retry, or another kuberaven): it is
  found and adopted; a fixed IP held by another port is AddressInUse.
* When Octavia's network driver made no VIP port in Neutron (the noop
  driver of the local test stack), a port holding the VIP address is made,
  so that the floating IP has something to point at.
* Ports' security groups change, and groups are deleted, one at a time: ML2/OVN
  loses a port's new groups in OVN when a group it leaves is deleted meanwhile.
* port_statuses() tells network/activation.py which pods' ports OVN has bound.
* Security groups' rules and ports' groups are openstack_groups.py's (NeutronSecurityGroups, mixed in here).
* Pooled ports, made in bulk for network/pools.py, are openstack_pools.py's (NeutronPortPools, mixed in here):
  named, not tagged, and found by their name; nested nodes' trunks and subports are openstack_trunks.py's
  (NeutronTrunks).
* What can-reach reads (ports, rules, load balancers) is openstack_views.py's.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from ... import metrics
from ..backend import (
    CLUSTER_TAG,
    DELETE_ORDER,
    INFRASTRUCTURE,
    SOURCE_FILTERS_KIND,
    AddressesExhausted,
    AddressInUse,
    BackendError,
    FloatingIP,
    Infrastructure,
    NetworkOptions,
    Owned,
    Port,
    PortRequest,
    PortStatus,
    SourceFilter,
    Subnet,
    ensure_ports_one_by_one,
    pool_port_name,
    tagged_uid,
    tags,
)
from ..vif import DEFAULT_MTU, PORT_DOWN
from .octavia import OctaviaLoadBalancers, describe
from .octavia_fields import OVN_NB_SETTING
from .openstack_groups import NeutronSecurityGroups
from .openstack_pools import NeutronPortPools
from .openstack_trunks import SUBPORT_OWNER, NeutronTrunks
from .openstack_views import OpenStackViews
from .ovn_northbound import OvnNorthbound

log = logging.getLogger(__name__)

DEVICE_OWNER = "compute:kuberaven"
INACTIVE_STATUSES = (PORT_DOWN, "BUILD", "ERROR")  # Neutron's port statuses other than ACTIVE
STATUS_FIELDS = ("id", "device_id", "status", "binding:vif_type", "binding:host_id")  # what port_statuses reads
# A path segment that is an id: a UUID (with or without dashes) or a number.
ID_IN_PATH = re.compile(r"/(?:[0-9a-fA-F]{8}(?:-?[0-9a-fA-F]{4}){3}-?[0-9a-fA-F]{12}|[0-9]+)(?=/|$)")
# The project of resources when the credentials have none (a Neutron without Keystone).
DEFAULT_PROJECT = "kuberaven"
NO_FILTERS = f"pods are not filtered at the ingress address: that takes OVN's northbound database ({OVN_NB_SETTING})"


def _own_project(connection: Any) -> str:
    try:
        return str(connection.current_project_id or DEFAULT_PROJECT)
    except Exception:  # no Keystone (auth_type none): openstacksdk may raise on any lookup
        return DEFAULT_PROJECT


class OpenStackBackend(OctaviaLoadBalancers, NeutronSecurityGroups, NeutronPortPools, NeutronTrunks, OpenStackViews):
    name = "openstack"

    def __init__(
        self,
        connection: Any,
        project: str = DEFAULT_PROJECT,
        timeout: float = 300.0,
        provider: str | None = None,
        ovn_nb: OvnNorthbound | None = None,
    ) -> None:
        from openstack import exceptions

        self.conn = connection
        hooks = connection.session.session.hooks["response"]  # the requests session under openstacksdk's
        if _observed not in hooks:
            hooks.append(_observed)
        self.net = connection.network
        self.lbaas = connection.load_balancer
        self.project = project
        self.timeout = timeout
        self.provider = provider
        self.ovn_nb = ovn_nb
        self.errors = exceptions
        self._mtus: dict[str, int] = {}
        self._trunk_extension: bool | None = None  # whether Neutron serves trunks (openstack_trunks.py asks once)
        # ML2/OVN commits a port's new groups to its database, then moves the port between OVN's port groups:
        # a group deleted in between (its last port just left it) fails the move, and OVN keeps the port out
        # of its new groups until Neutron's maintenance repairs it minutes later. Group changes of ports and
        # deletions of groups therefore do not overlap.
        self._group_changes = threading.Lock()

    @classmethod
    def connect(
        cls,
        cloud: str | None = None,
        project: str | None = None,
        provider: str | None = None,
        ovn_nb_connection: str | None = None,
    ) -> OpenStackBackend:
        """From a clouds.yaml entry (``cloud``) or the OS_* environment, as the openstack CLI does.

        Resources are made in ``project`` (a project id; the credentials must be allowed to act in
        it), else in the credentials' own project. ``ovn_nb_connection``: OVN's northbound database (as
        Neutron's ``[ovn] ovn_nb_connection``), connected at its first use: the ovn provider's load balancers
        get ClientIP affinity there (ovn_affinity.py).
        """
        import openstack

        connection = openstack.connect(cloud=cloud) if cloud else openstack.connect()
        ovn_nb = OvnNorthbound(ovn_nb_connection) if ovn_nb_connection else None
        return cls(connection, project or _own_project(connection), provider=provider, ovn_nb=ovn_nb)

    def close(self) -> None:
        self.conn.close()
        if self.ovn_nb is not None:
            self.ovn_nb.close()

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
        description = describe(resource_tags)

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
                "external network",
                lambda: self.net.networks(name=f"{name}-external"),
                self.net.create_network,
                infra,
                name=f"{name}-external",
                is_router_external=True,
            )
            external_id = external.id
            external_subnet = self.ensure_subnet(external.id, f"{name}-external", infra, cidr=options.external_cidr).id
        router = self._ensure(
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
            pool = self._ensure(
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
        try:
            subnet = self._ensure(
                f"subnet {name}",
                lambda: self.net.subnets(network_id=network, name=name),
                self.net.create_subnet,
                tags,
                **attrs,
            )
        except self.errors.ConflictException as error:
            raise AddressesExhausted(f"subnet {name}: {error}") from error
        except self.errors.SDKException as error:
            raise BackendError(f"subnet {name}: {error}") from error
        return Subnet(subnet.id, subnet.cidr, subnet.gateway_ip)

    def ensure_router_interface(self, router: str, subnet: str) -> None:
        ports = self._call(f"router {router} ports", lambda: list(self.net.ports(device_id=router)))
        if not any(any(ip["subnet_id"] == subnet for ip in port.fixed_ips) for port in ports):
            self._call(f"router interface to {subnet}", lambda: self.net.add_interface_to_router(router, subnet=subnet))

    def ensure_security_group(self, name: str, tags: list[str]) -> str:
        def existing() -> Iterable[Any]:
            return self.net.security_groups(name=name, project_id=self.project)

        return str(self._ensure(f"security group {name}", existing, self.net.create_security_group, tags, name=name).id)

    def ensure_port(
        self,
        network: str,
        subnet: str,
        name: str,
        device_id: str,
        address: str | None,
        security_groups: list[str],
        tags: list[str],
        host: str | None = None,
    ) -> Port:
        description = describe(tags)
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
                f"port {name}",
                lambda: (),
                self.net.create_port,
                tags,
                name=name,
                network_id=network,
                fixed_ips=[fixed_ip],
                device_id=device_id,
                device_owner=DEVICE_OWNER,
                security_group_ids=security_groups,
                **({"binding_host_id": host} if host else {}),
            )
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
            found = self.net.ips(floating_ip_address=address, floating_network_id=external_network)
            for fip in (fip for fip in found if not fip.port_id):
                taken = functools.partial(self.net.update_ip, fip.id, port_id=port, description=description)
                self._call(f"floating IP {address}", taken)
                self._call(f"tags of floating IP {address}", functools.partial(self.net.set_tags, fip, tags))
                return FloatingIP(fip.id, address)
        attrs: dict[str, Any] = {"floating_network_id": external_network, "port_id": port}
        if address:
            attrs["floating_ip_address"] = address
        elif subnet:
            attrs["subnet_id"] = subnet
        try:
            fip = self._ensure(f"floating IP for port {port}", lambda: (), self.net.create_ip, tags, **attrs)
        except self.errors.ConflictException as error:
            raise AddressInUse(address or "?", "floating IP", None) from error
        except self.errors.SDKException as error:
            raise BackendError(f"floating IP for port {port}: {error}") from error
        return FloatingIP(fip.id, fip.floating_ip_address)

    def release_floating_ip(self, floating_ip: str) -> None:
        self._call(f"floating IP {floating_ip}", lambda: self.net.update_ip(floating_ip, port_id=None, description=""))
        self._call(f"tags of floating IP {floating_ip}", lambda: self.net.set_tags(self.net.get_ip(floating_ip), []))

    # -- source filters: OVN ACLs on the pods' switches (ovn_northbound.py) ------------

    def set_source_filters(
        self, cluster: str, owner: str, networks: Sequence[str], filters: Sequence[SourceFilter]
    ) -> str | None:
        if self.ovn_nb is None:
            return NO_FILTERS if filters else None
        self.ovn_nb.set_filters(cluster, owner, networks, filters)
        return None

    def copy_source_filters(self, cluster: str, network: str) -> None:
        if self.ovn_nb is not None:
            self.ovn_nb.copy_filters(cluster, network)

    # -- ports' status (network/activation.py) -------------------------------------

    def port_statuses(
        self, cluster: str, ports: list[str] | None = None, inactive: bool = False
    ) -> dict[str, PortStatus]:
        """The status of the cluster's pods' ports, by id: ``ports`` (one listing by id); else every port
        made for one pod (tagged) and, unless ``inactive``, every pooled one (by name); ``inactive``: only those
        not ACTIVE. Pooled ports are left out of ``inactive``: free ones are DOWN by nature, and Neutron lists
        about 300 ports a second, so network/activation.py asks for the held ones by id. A binding Neutron
        could not make is in ``vif_type`` (``binding_failed``)."""
        # An attached subport (a nested pod's pooled port) is the trunk plugin's device_owner.
        query: dict[str, Any] = {"device_owner": [DEVICE_OWNER, SUBPORT_OWNER], "fields": list(STATUS_FIELDS)}
        listings: list[dict[str, Any]]
        if ports is not None:
            if not ports:
                return {}
            listings = [{"id": ports}]
        elif inactive:
            listings = [{"tags": f"{CLUSTER_TAG}{cluster}", "status": list(INACTIVE_STATUSES)}]
        else:
            listings = [{"tags": f"{CLUSTER_TAG}{cluster}"}, {"name": pool_port_name(cluster)}]
        found = self._call(
            "ports' status", lambda: [port for listing in listings for port in self.net.ports(**query, **listing)]
        )
        return {
            p.id: PortStatus(p.id, p.device_id or "", p.status or "", p.binding_vif_type or "", p.binding_host_id or "")
            for p in found
        }

    def owned(self, cluster: str) -> Iterator[Owned]:
        # One listing per kind, without limit=: Neutron pages by marker (the last resource of a page), and a
        # marker deleted meanwhile (by the collection, a reconciler or a load balancer's cascade) answers the
        # next page with 404. Unpaged, Neutron answers each kind in one response. The embedded backend's
        # keyset pages have no marker and stream instead.
        tag = f"{CLUSTER_TAG}{cluster}"
        listings: dict[str, Callable[[], Iterable[Any]]] = {
            "floating_ip": lambda: self.net.ips(tags=tag),
            "load_balancer": lambda: self.lbaas.load_balancers(tags=tag),
            "port": lambda: self.net.ports(tags=tag),
            "security_group": lambda: self.net.security_groups(tags=tag),
            "network": lambda: self.net.networks(tags=tag),
        }
        for kind in DELETE_ORDER:
            for r in listings[kind]():
                name = r.floating_ip_address if kind == "floating_ip" else r.name
                yield Owned(kind, r.id, name or "", tagged_uid(r.tags or []))
        if self.ovn_nb is not None:  # the Services' ACLs on the pods' switches, one entry per Service
            yield from (Owned(SOURCE_FILTERS_KIND, uid, "", uid) for uid in self.ovn_nb.filter_owners(cluster))

    def delete(self, kind: str, resource: str) -> None:
        if kind == SOURCE_FILTERS_KIND:
            if self.ovn_nb is not None:
                self.ovn_nb.set_filters("", resource, [], ())
            return
        if kind == "load_balancer":
            self._delete_load_balancer(resource)
            return
        if kind == "network":
            # Neutron refuses to delete a network with ports on it (its subnets go with it), and a port that is
            # a trunk's subport (a nested pod's): those are detached first.
            ports = list(self.net.ports(network_id=resource))
            self._detach_all(ports)
            for port in ports:
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
        with self._group_changes if kind == "security_group" else contextlib.nullcontext():
            self._call(f"deleting {kind} {resource}", lambda: delete(resource, ignore_missing=True))


def request_route(url: str) -> str:
    """A request's path with its ids as ``{id}`` (a metric's label: one per API route, not per resource)."""
    return ID_IN_PATH.sub("/{id}", urlsplit(url).path)


def _observed(response: Any, *_args: Any, **_kwargs: Any) -> None:
    """The requests session's response hook: each Neutron, Octavia and Keystone request's latency."""
    request = response.request
    metrics.OPENSTACK_REQUEST_SECONDS.labels(request.method, request_route(request.url)).observe(
        response.elapsed.total_seconds()
    )
