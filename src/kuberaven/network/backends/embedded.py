"""The embedded network backend (network/backends/): Neutron's and Octavia's model in kuberaven's tables.

    translator ──► EmbeddedBackend ──► network_resource (every kind, parent links, cascades)
                                   └─► network_address (the IPAM: unique (subnet, address))
                   (rows and addresses: embedded_store.py; security groups: embedded_groups.py;
                    many ports at once: embedded_ports.py; load balancers: embedded_lbs.py;
                    what can-reach reads: embedded_views.py)

The default when no OpenStack is configured, so that the translation, and
external IPs for LoadBalancer Services, work on any cluster. Addresses are
real allocations: a fixed address is taken only if free, a free one is the
lowest unused host of the subnet (the gateway, its first host, is never
handed out), and the unique key makes two translations, even in two
processes, unable to take the same address. A full subnet or subnet pool is
reported as AddressesExhausted naming it.

Load balancers are ACTIVE as soon as they are stored: there is nothing to
wait for.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ...model.network import NetworkResource
from ..backend import (
    DELETE_ORDER,
    INFRASTRUCTURE,
    OWNED_PAGE,
    AddressesExhausted,
    BackendError,
    NetworkOptions,
    Owned,
    tagged_cluster,
    tagged_uid,
    tags,
)
from ..drivers.floating_ips import FloatingIP
from ..drivers.load_balancers import Listener
from ..drivers.networks import Infrastructure, Subnet
from ..drivers.ports import Port, PortRequest, ensure_ports_one_by_one
from ..drivers.security_groups import SecurityGroupRule
from ..drivers.source_filters import SourceFilter
from . import embedded_groups, embedded_ports
from .embedded_lbs import EmbeddedLoadBalancers
from .embedded_ports import port_of

NO_FILTERS = "pods are not filtered at the ingress address: the embedded backend has no data path of its own"


class EmbeddedBackend(EmbeddedLoadBalancers):
    """NetworkBackend on kuberaven's tables: every driver it always has is this one object's."""

    name = "embedded"
    # The drivers it has not (NetworkBackend's optional ones): a port is made per pod when it is scheduled, no
    # node is a VM with a trunk, and no data path reports a port's status.
    pools = None
    trunks = None
    port_status = None

    # -- NetworkBackend ----------------------------------------------------

    def ensure_infrastructure(self, cluster: str, options: NetworkOptions) -> Infrastructure:
        infra = tags(cluster, INFRASTRUCTURE)
        service_network = self.ensure_network("kuberaven-services", infra)
        service_subnet = self.ensure_subnet(service_network, "kuberaven-services", infra, cidr=options.service_cidr)
        if options.external_network:
            external_network, external_subnet = self._existing_external(options.external_network)
        else:
            external_network = str(self._ensure("network", "kuberaven-external", infra, external=True).id)
            external_subnet = self.ensure_subnet(
                external_network, "kuberaven-external", infra, cidr=options.external_cidr
            ).id
        router = self._ensure(
            "router", "kuberaven", infra, external_network=external_network, interfaces=[service_subnet.id]
        )
        pool = None
        if options.subnet_mode == "namespace":
            pool = str(
                self._ensure(
                    "subnet_pool",
                    "kuberaven-namespaces",
                    infra,
                    cidr=options.namespace_pool,
                    prefix=options.namespace_prefix,
                ).id
            )
        return Infrastructure(
            service_network=service_network,
            service_subnet=service_subnet.id,
            external_network=external_network,
            external_subnet=external_subnet,
            router=str(router.id),
            subnet_pool=pool,
        )

    def _existing_external(self, name_or_id: str) -> tuple[str, str]:
        """(network, subnet) of an external network made by someone else, by name or id."""
        with self.database.session() as session:
            networks = session.scalars(sa.select(NetworkResource).where(NetworkResource.kind == "network"))
            found = next((n for n in networks if name_or_id in (n.name, str(n.id)) and n.attrs.get("external")), None)
            if found is None:
                raise BackendError(f"external network {name_or_id!r} does not exist (or is not external)")
            subnets = sa.select(NetworkResource.id).where(NetworkResource.kind == "subnet")
            subnet = session.scalars(subnets.where(NetworkResource.parent_id == found.id)).first()
            if subnet is None:
                raise BackendError(f"external network {name_or_id!r} has no subnet to take floating IPs from")
            return str(found.id), str(subnet)

    def ensure_network(self, name: str, tags: list[str]) -> str:
        return str(self._ensure("network", name, tags).id)

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
        with self.database.session() as session:
            found = self._find(session, "subnet", name, tags)
            if found is None:
                self._get(session, "network", network)
                found = self._add(session, "subnet", name, tags, network, {})
                if cidr is None:
                    assert pool is not None
                    cidr = self._allocate_subnet(session, self._get(session, "subnet_pool", pool), found, prefix)
                net = ipaddress.ip_network(cidr)
                found.attrs = {"cidr": str(net), "gateway": str(next(net.hosts())), "pool": pool}
            return Subnet(str(found.id), found.attrs["cidr"], found.attrs.get("gateway"))

    def _allocate_subnet(
        self, session: Session, pool: NetworkResource, subnet: NetworkResource, prefix: int | None
    ) -> str:
        # A subnet pool is a "subnet" whose addresses are the network addresses of its subnets.
        pool_network = ipaddress.ip_network(pool.attrs["cidr"])
        length = prefix or pool.attrs["prefix"]
        starts = (str(net.network_address) for net in pool_network.subnets(new_prefix=length))
        start = self._take_first_free(session, pool, subnet, starts)
        if start is None:
            raise AddressesExhausted(f"subnet pool {pool.name} ({pool_network}) has no free /{prefix} subnet")
        return f"{start}/{length}"

    def ensure_security_group(self, name: str, tags: list[str]) -> str:
        return str(self._ensure("security_group", name, tags).id)

    def ensure_ingress_rule(self, group: str, remote_cidr: str) -> None:
        self._add_to_list("security_group", group, "rules", {"direction": "ingress", "remote_cidr": remote_cidr})

    def security_group_rules(self, group: str) -> list[SecurityGroupRule]:
        with self.database.session() as session:
            return [embedded_groups.rule_of(r) for r in embedded_groups.rule_rows(session, [int(group)])]

    def set_security_group_rules(self, group: str, rules: list[SecurityGroupRule]) -> None:
        with self.database.session() as session:
            embedded_groups.set_rules(session, group, rules)

    def set_port_security_groups(self, port: str, groups: list[str]) -> None:
        with self.database.session() as session:
            embedded_groups.set_port_groups(session, port, groups)

    def ensure_router_interface(self, router: str, subnet: str) -> None:
        self._add_to_list("router", router, "interfaces", subnet)

    def _add_to_list(self, kind: str, resource: str, field: str, item: Any) -> None:
        """``item`` in the list ``field`` of a resource's attributes, once."""
        with self.database.session() as session:
            # Locked (PostgreSQL; SQLite serializes writers): namespaces add to one router concurrently.
            row = session.get(NetworkResource, int(resource), with_for_update=True)
            if row is None or row.kind != kind:
                raise BackendError(f"{kind} {resource} does not exist")
            if item not in row.attrs.get(field, []):
                row.attrs = {**row.attrs, field: [*row.attrs.get(field, []), item]}

    def ensure_port(self, request: PortRequest) -> Port:
        with self.database.session() as session:
            found = self._find(session, "port", request.name, request.tags)
            if found is not None and request.address in (None, found.attrs["address"]):
                return port_of(found.id, found.attrs["address"])
            if found is not None:  # the pod's IP changed: a new port
                session.delete(found)
                session.flush()
            subnet_row = self._get(session, "subnet", request.subnet)
            port = self._add(
                session,
                "port",
                request.name,
                request.tags,
                request.network,
                {
                    "subnet": request.subnet,
                    "device_id": request.device_id,
                    "security_groups": request.security_groups,
                    "host": request.host,
                },
            )
            allocated = self._allocate(session, subnet_row, port, request.address)
            port.attrs = {**port.attrs, "address": allocated}
            return port_of(port.id, allocated)

    def ensure_ports(self, requests: list[PortRequest]) -> list[Port | BackendError]:
        return embedded_ports.ensure_ports(self.database, requests, lambda rest: ensure_ports_one_by_one(self, rest))

    def delete_listener(self, load_balancer: str, listener: Listener) -> None:
        self.delete("listener", listener.id)

    def delete_member(self, load_balancer: str, pool: str, member: str) -> None:
        self.delete("member", member)

    def ensure_floating_ip(
        self, external_network: str, port: str, address: str | None, tags: list[str], subnet: str | None = None
    ) -> FloatingIP:
        with self.database.session() as session:
            name = f"fip:{port}"
            found = self._find(session, "floating_ip", name, tags)
            if found is not None and address in (None, found.attrs["address"]):
                return FloatingIP(str(found.id), found.attrs["address"])
            if found is not None:
                session.delete(found)
                session.flush()
            kept = self._kept_floating_ip(session, address) if address else None
            if kept is not None:  # released with keep-floatingip: its address asked for again
                kept.name, kept.tags, kept.cluster = name, list(tags), tagged_cluster(tags)
                kept.attrs = {**kept.attrs, "port": port}
                return FloatingIP(str(kept.id), kept.attrs["address"])
            subnets = sa.select(NetworkResource).where(
                NetworkResource.kind == "subnet", NetworkResource.parent_id == int(external_network)
            )
            if subnet is not None:
                subnets = subnets.where(NetworkResource.id == int(subnet))
            external_subnet = session.scalars(subnets).first()
            if external_subnet is None:
                raise BackendError(f"external network {external_network} has no subnet {subnet or ''}".rstrip())
            fip = self._add(session, "floating_ip", name, tags, None, {"port": port})
            allocated = self._allocate(session, external_subnet, fip, address)
            fip.attrs = {**fip.attrs, "address": allocated}
            return FloatingIP(str(fip.id), allocated)

    @staticmethod
    def _kept_floating_ip(session: Session, address: str) -> NetworkResource | None:
        """The floating IP of ``address`` that release_floating_ip() left attached to nothing, if any."""
        rows = session.scalars(
            sa.select(NetworkResource).where(NetworkResource.kind == "floating_ip", NetworkResource.name.like("kept:%"))
        )
        return next((row for row in rows if row.attrs.get("address") == address and not row.attrs.get("port")), None)

    def release_floating_ip(self, floating_ip: str) -> None:
        with self.database.session() as session:
            row = self._get(session, "floating_ip", floating_ip)
            row.attrs = {**row.attrs, "port": None}
            row.tags, row.cluster, row.name = [], None, f"kept:{row.id}"

    def set_source_filters(
        self, cluster: str, owner: str, networks: Sequence[str], filters: Sequence[SourceFilter]
    ) -> str | None:
        return NO_FILTERS if filters else None

    def copy_source_filters(self, cluster: str, network: str) -> None:
        """Nothing to copy: the embedded backend filters no pod's traffic."""

    def owned(self, cluster: str) -> Iterator[Owned]:
        # Keyset pages (kind by kind in DELETE_ORDER, by id), each read in a session of its own and the four
        # columns compared, not ORM rows: a garbage collection comes at the end of the cold start, when
        # the stores are fullest, and a list of every port of the cluster made its peak.
        for kind in DELETE_ORDER:
            after = 0  # ids start at 1
            while True:
                with self.database.session() as session:
                    rows = session.execute(
                        sa.select(NetworkResource.id, NetworkResource.name, NetworkResource.tags)
                        .where(
                            NetworkResource.cluster == cluster, NetworkResource.kind == kind, NetworkResource.id > after
                        )
                        .order_by(NetworkResource.id)
                        .limit(OWNED_PAGE)
                    ).all()
                yield from (Owned(kind, str(id_), name, tagged_uid(tags)) for id_, name, tags in rows)
                if len(rows) < OWNED_PAGE:
                    break
                after = rows[-1][0]

    def delete(self, kind: str, resource: str) -> None:
        # ON DELETE CASCADE takes a network's subnets and ports, a load balancer's
        # listeners, pools, members and VIP port, and every address they held.
        with self.database.session() as session:
            if kind == "network":
                self._detach_from_routers(session, resource)
            session.execute(
                sa.delete(NetworkResource).where(NetworkResource.id == int(resource), NetworkResource.kind == kind)
            )

    @staticmethod
    def _detach_from_routers(session: Session, network: str) -> None:
        children = sa.select(NetworkResource.id).where(NetworkResource.parent_id == int(network))
        subnets = {str(i) for i in session.scalars(children.where(NetworkResource.kind == "subnet"))}
        for router in session.scalars(sa.select(NetworkResource).where(NetworkResource.kind == "router")):
            kept = [s for s in router.attrs.get("interfaces", []) if s not in subnets]
            if len(kept) != len(router.attrs.get("interfaces", [])):
                router.attrs = {**router.attrs, "interfaces": kept}

    def close(self) -> None:
        """Nothing to close: the database belongs to the caller."""
