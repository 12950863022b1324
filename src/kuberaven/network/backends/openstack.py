"""The OpenStack network backend (network/backends/): Neutron and Octavia through openstacksdk, as drivers.

    translator ──► OpenStackBackend ──► OpenStackContext (openstack_context.py: the connection, call, ensure)
        networks, subnets, router, floating IPs ──► NeutronNetworks, NeutronFloatingIPs (openstack_networks.py)
        pods' ports, their status               ──► NeutronPorts, NeutronPortStatus (openstack_ports.py)
        security groups and rules               ──► NeutronSecurityGroups (openstack_groups.py)
        port pools                              ──► NeutronPortPools (openstack_pools.py)
        nested nodes' trunks and subports       ──► NeutronTrunks (openstack_trunks.py)
        load balancers                          ──► OctaviaLoadBalancers (octavia.py)
        what can-reach reads                    ──► OpenStackViews (openstack_views.py)
        source filters                          ──► OVN's northbound database (ovn_northbound.py), when given

Each driver is built here, once, over the one context (and the drivers it
needs, passed in: a load balancer's VIP port is the ports driver's, a pooled
port's trunk the trunks driver's); the backend's operations are theirs. What
kuryr-kubernetes did, with its faults fixed: every resource it makes for an
object is tagged, so that a restart finds what it made (openstack_context.py
says how a create carries them); Octavia is waited on until ACTIVE around
each change, and a load balancer in ERROR is deleted with cascade and made
again; when Octavia's network driver made no VIP port in Neutron (the noop
driver of the local test stack), a port holding the VIP address is made, so
that the floating IP has something to point at. The ovn provider never gives
OVN a pool's session persistence: with OVN's northbound database at hand
(network_ovn_nb_connection) a ClientIP Service's affinity is set on the
provider's OVN rows, and so are the ACLs that hold a Service's source ranges
for pods coming through its floating IP (set_source_filters).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ..backend import CLUSTER_TAG, DELETE_ORDER, SOURCE_FILTERS_KIND, Owned, tagged_uid
from ..drivers.source_filters import SourceFilter
from .octavia import OctaviaLoadBalancers
from .octavia_fields import OVN_NB_SETTING
from .openstack_context import DEFAULT_PROJECT, DEFAULT_TIMEOUT, OpenStackContext, own_project
from .openstack_groups import NeutronSecurityGroups
from .openstack_networks import NeutronFloatingIPs, NeutronNetworks
from .openstack_pools import NeutronPortPools
from .openstack_ports import NeutronPorts, NeutronPortStatus
from .openstack_trunks import NeutronTrunks
from .openstack_views import OpenStackViews
from .ovn_northbound import OvnNorthbound

NO_FILTERS = f"pods are not filtered at the ingress address: that takes OVN's northbound database ({OVN_NB_SETTING})"


class OpenStackBackend:
    """NetworkBackend on Neutron and Octavia: its drivers over one OpenStackContext, with pools, trunks and
    port status (whether Neutron serves trunks is asked at the first lookup: without them every node is bare)."""

    name = "openstack"

    def __init__(
        self,
        connection: Any,
        project: str = DEFAULT_PROJECT,
        timeout: float = DEFAULT_TIMEOUT,
        provider: str | None = None,
        ovn_nb: OvnNorthbound | None = None,
    ) -> None:
        """``connection``: openstacksdk's; ``project``: where resources are made; ``timeout``: how long a load
        balancer may take to be ACTIVE; ``provider``: Octavia's for new load balancers (None: the cloud's);
        ``ovn_nb``: OVN's northbound database (ClientIP affinity, source filters; None: neither)."""
        self.context = context = OpenStackContext(connection, project, timeout)
        self.ovn_nb = ovn_nb
        self.trunks = NeutronTrunks(context)
        self.pools = NeutronPortPools(context, self.trunks)
        self.port_status = NeutronPortStatus(context)
        self._networks = NeutronNetworks(context, self.trunks)
        self._floating_ips = NeutronFloatingIPs(context)
        self._ports = NeutronPorts(context)
        self._groups = NeutronSecurityGroups(context)
        self._load_balancers = OctaviaLoadBalancers(context, self._ports, provider, ovn_nb)
        self._views = OpenStackViews(context)
        # The backend's operations, each its driver's (NetworkBackend: drivers/__init__.py).
        self.ensure_infrastructure = self._networks.ensure_infrastructure
        self.ensure_network = self._networks.ensure_network
        self.ensure_subnet = self._networks.ensure_subnet
        self.ensure_router_interface = self._networks.ensure_router_interface
        self.ensure_floating_ip = self._floating_ips.ensure_floating_ip
        self.release_floating_ip = self._floating_ips.release_floating_ip
        self.ensure_port = self._ports.ensure_port
        self.ensure_ports = self._ports.ensure_ports
        self.ensure_security_group = self._groups.ensure_security_group
        self.ensure_ingress_rule = self._groups.ensure_ingress_rule
        self.security_group_rules = self._groups.security_group_rules
        self.set_security_group_rules = self._groups.set_security_group_rules
        self.set_port_security_groups = self._groups.set_port_security_groups
        self.ensure_load_balancer = self._load_balancers.ensure_load_balancer
        self.listeners = self._load_balancers.listeners
        self.create_listener = self._load_balancers.create_listener
        self.delete_listener = self._load_balancers.delete_listener
        self.members = self._load_balancers.members
        self.create_member = self._load_balancers.create_member
        self.delete_member = self._load_balancers.delete_member
        self.set_members = self._load_balancers.set_members
        self.ensure_listener_options = self._load_balancers.ensure_listener_options
        self.read_ports = self._views.read_ports
        self.read_rules = self._views.read_rules
        self.read_load_balancer = self._views.read_load_balancer

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
        return cls(connection, project or own_project(connection), provider=provider, ovn_nb=ovn_nb)

    def close(self) -> None:
        self.context.close()
        if self.ovn_nb is not None:
            self.ovn_nb.close()

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

    # -- what the cluster owns, and deleting it -------------------------------------

    def owned(self, cluster: str) -> Iterator[Owned]:
        # One listing per kind, without limit=: Neutron pages by marker (the last resource of a page), and a
        # marker deleted meanwhile (by the collection, a reconciler or a load balancer's cascade) answers the
        # next page with 404. Unpaged, Neutron answers each kind in one response. The embedded backend's
        # keyset pages have no marker and stream instead.
        tag, net = f"{CLUSTER_TAG}{cluster}", self.context.net
        listings: dict[str, Callable[[], Iterable[Any]]] = {
            "floating_ip": lambda: net.ips(tags=tag),
            "load_balancer": lambda: self.context.lbaas.load_balancers(tags=tag),
            "port": lambda: net.ports(tags=tag),
            "security_group": lambda: net.security_groups(tags=tag),
            "network": lambda: net.networks(tags=tag),
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
        deletions: dict[str, Callable[[str], None]] = {
            "load_balancer": self._load_balancers.delete_load_balancer,
            "security_group": self._groups.delete_group,
            "network": self._networks.delete_network,
        }
        if kind in deletions:
            deletions[kind](resource)
            return
        net, lbaas = self.context.net, self.context.lbaas
        delete = {"floating_ip": net.delete_ip, "port": net.delete_port, "listener": lbaas.delete_listener}[kind]
        self.context.call(f"deleting {kind} {resource}", lambda: delete(resource, ignore_missing=True))
