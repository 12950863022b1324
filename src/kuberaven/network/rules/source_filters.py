"""Source filters (network/, pure): a LoadBalancer Service's source ranges for the pods that reach it through
its ingress address, as ACLs on the pods' own logical switches in OVN.

    loadbalancers.py: a LoadBalancer Service with loadBalancerSourceRanges and a floating IP
        ──► ingress_filters(floating address, ranges, listeners' (transport, port))
        ──► one SourceFilter per listener: from a pod, to the floating address and port, from outside the ranges
            ──► reject (a TCP reset, an ICMP port unreachable)
        ──► the backend (ovn_northbound.py): an ACL of each filter on each of the cluster's pod networks

Why at the source: a pod reaches the floating IP with its own address (there is no SNAT inside the cloud), and
OVN translates the floating IP to a member on the pod's own switch (the provider's load balancer is on it), so
once there the packet looks like one sent to the ClusterIP, which the ranges must leave open (Kubernetes
filters only what comes through the load balancer's address). A logical switch judges its from-lport ACLs
before its load balancers: there the destination is still the floating IP. Neutron's own ACLs (its security
groups, priorities 1001 and 1002) can only allow: the filter's priority is above them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

from ..backend import SourceFilter


def ingress_filters(address: str, ranges: Sequence[str], ports: Iterable[tuple[str, int]]) -> tuple[SourceFilter, ...]:
    """The filters that keep pods outside ``ranges`` from ``address`` (a Service's ingress address) on each of
    ``ports`` (transport, port). Ranges of the other IP family admit no one of this one: a pod of an IPv4
    address is outside every IPv6 range."""
    ip = ipaddress.ip_address(address)
    family = "ip4" if ip.version == 4 else "ip6"
    admitted = sorted(
        {str(net) for net in (ipaddress.ip_network(r, strict=False) for r in ranges) if net.version == ip.version}
    )
    filters = []
    for transport, port in sorted(set(ports)):
        terms = [f"{family}.dst == {ip}", f"{transport}.dst == {port}"]
        if admitted:
            terms.append(f"{family}.src != {{{', '.join(admitted)}}}")
        filters.append(SourceFilter(" && ".join(terms)))
    return tuple(filters)
