"""Source filters (network/, pure): what the pods' own logical switches in OVN refuse of a Service, as ACLs
that answer at once (a TCP reset, an ICMP port unreachable), as kube-proxy's REJECT rules do.

    loadbalancers.py: a Service
        ──► ingress_filters(floating address, ranges, listeners' (transport, port)): a LoadBalancer Service with
            loadBalancerSourceRanges: from a pod outside the ranges, to the floating address and port ──► reject
        ──► no_endpoint_filters((VIP, floating address), listeners without a member): from any pod ──► reject
        ──► the backend (ovn_northbound.py): an ACL of each filter on each of the cluster's pod networks

Why at the source: a pod reaches the floating IP with its own address (there is no SNAT inside the cloud), and
OVN translates the floating IP to a member on the pod's own switch (the provider's load balancer is on it), so
once there the packet looks like one sent to the ClusterIP, which the ranges must leave open (Kubernetes
filters only what comes through the load balancer's address). A logical switch judges its from-lport ACLs
before its load balancers: there the destination is still the floating IP. Neutron's own ACLs (its security
groups, priorities 1001 and 1002) can only allow: the filter's priority is above them.

A listener without a member: Octavia's ovn provider takes its address out of its OVN load balancer, so a
connection to it would get no answer until the client's timeout, where Kubernetes expects a refusal.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

from ..drivers.source_filters import SourceFilter
from .reach_service import TRANSPORT
from .services import LoadBalancerSpec

Filters = tuple[SourceFilter, ...]


def ingress_filters(address: str, ranges: Sequence[str], ports: Iterable[tuple[str, int]]) -> Filters:
    """The filters that keep pods outside ``ranges`` from ``address`` (a Service's ingress address) on each of
    ``ports`` (transport, port). Ranges of the other IP family admit no one of this one: a pod of an IPv4
    address is outside every IPv6 range."""
    ip = ipaddress.ip_address(address)
    family = "ip4" if ip.version == 4 else "ip6"
    admitted = sorted(
        {str(net) for net in (ipaddress.ip_network(r, strict=False) for r in ranges) if net.version == ip.version}
    )
    outside = f" && {family}.src != {{{', '.join(admitted)}}}" if admitted else ""
    return tuple(SourceFilter(f"{_to(address, transport, port)}{outside}") for transport, port in sorted(set(ports)))


def no_endpoint_filters(addresses: Iterable[str | None], empty: Iterable[tuple[str, int]]) -> Filters:
    """The filters that refuse every pod at each of ``addresses`` (a Service's VIP and floating address; None:
    none) on each of ``empty`` (transport, port): the listeners without a member."""
    ports = sorted(set(empty))
    return tuple(
        SourceFilter(_to(a, transport, port)) for a in sorted(filter(None, addresses)) for transport, port in ports
    )


def _to(address: str, transport: str, port: int) -> str:
    """OVN's match of traffic to ``address`` on ``transport`` ``port``."""
    ip = ipaddress.ip_address(address)
    return f"{'ip4' if ip.version == 4 else 'ip6'}.dst == {ip} && {transport}.dst == {port}"


def service_filters(spec: LoadBalancerSpec, address: str | None) -> tuple[Filters, Filters]:
    """What the pods' networks refuse of a Service (source_filters.py): pods outside its source ranges at its
    ingress ``address``, and every pod at its addresses on the listeners without a member."""
    ports = [(TRANSPORT.get(each.protocol.upper(), "tcp"), each.port) for each in spec.listeners]
    empty = [port for port, each in zip(ports, spec.listeners, strict=True) if not each.members]
    ranged = ingress_filters(address, spec.source_ranges, ports) if address and spec.source_ranges else ()
    return ranged, no_endpoint_filters((spec.vip_address, address), empty)
