"""can-reach to a Service (network/, pure): from an outside address or a pod, through the Service's load balancer.

    outside address ──► floating IP ──► listener (protocol, port) ──► allowed_cidrs ──► each member's ingress
    pod ──► its egress (to the VIP) ──► listener ──► allowed_cidrs ──► each member's ingress
    pod, via its ingress address ──► its egress (to the floating IP) ──► the pods' networks' source filters
        (source_filters.py: the Service's source ranges) ──► listener ──► allowed_cidrs ──► each member's ingress
    (allowed_cidrs hold the Service's source ranges and the cluster's own addresses; with the ovn provider
    the ranges are in the members' groups instead: source_ranges.py)
        ──► ServiceAnswer: allowed, the hop that decides, every hop (each member's: its policy and rule)

The load balancer is what the backend holds (views.py: its floating IPs,
listeners with their source ranges and members); the members' ports and the
groups are those of reach.py. Who a member sees as the source depends on
the load balancer: Octavia's ``ovn`` provider and the embedded model keep the
client's address (a pod reaching its own Service gets the VIP: OVN's
hairpin); a proxying provider (``amphora``) connects from its own address in
the VIP's subnet, for which the VIP stands here. Traffic is allowed when every
member lets it in: a connection may land on any of them. No I/O:
reach_store.py reads the data.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..views import ListenerView, LoadBalancerView, MemberView
from .policy import EGRESS, INGRESS
from .reach import (
    ALLOWED_CIDRS_HOP,
    EGRESS_HOP,
    FLOATING_IP_HOP,
    INGRESS_HOP,
    LISTENER_HOP,
    SOURCE_FILTER_HOP,
    Answer,
    Endpoint,
    Group,
    Hop,
    ReachError,
    decide,
)

# Octavia providers whose load balancers proxy: members see the load balancer's address, not the client's.
PROXYING_PROVIDERS = frozenset({"amphora", "amphorav2", "octavia"})
# The transport of each listener protocol (what a security group rule names).
TRANSPORT = {"TCP": "tcp", "HTTP": "tcp", "HTTPS": "tcp", "TERMINATED_HTTPS": "tcp", "UDP": "udp", "SCTP": "sctp"}
SOURCE_RANGES_OPTION = "allowed CIDRs of "  # how an option the provider refused names the source ranges


@dataclass(frozen=True)
class SourceFilters:
    """How a pod goes to a Service: through its ingress address (``via_ingress``) or its ClusterIP; ``ranges``:
    the Service's source ranges when the pods' networks refuse the pods outside them there (None: no one)."""

    via_ingress: bool = False
    ranges: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ServiceAnswer(Answer):
    members: int = 0  # the listener's
    members_allowing: int = 0

    def as_dict(self) -> dict[str, object]:
        return {**super().as_dict(), "members": {"total": self.members, "allowing": self.members_allowing}}


def reach_service(
    source: Endpoint | str,
    service: LoadBalancerView,
    members: Mapping[str, Endpoint],
    groups: Mapping[str, Group],
    port: int | None = None,
    protocol: str = "tcp",
    refused: Sequence[str] = (),
    on_members: Sequence[str] = (),
    ingress: SourceFilters = SourceFilters(),
) -> ServiceAnswer:
    """Whether ``source`` (a pod's endpoint, or an outside address) reaches ``service`` on ``port``.

    ``members``: the members' pods' endpoints by address; ``refused``: the options the provider left out
    (the translation's ``option_errors``), which an answer names when they would have decided it;
    ``on_members``: the Service's source ranges when its members' groups hold them (the ovn provider);
    ``ingress``: a pod's way, and the source filters on it.
    """
    listener = pick_listener(service, port, protocol)
    hops: list[Hop] = []
    outside = isinstance(source, str)
    to_port = listener.port if listener else port
    if isinstance(source, Endpoint) and ingress.via_ingress:
        hops += _to_ingress_address(source, service, groups, to_port, protocol, ingress.ranges)
    elif isinstance(source, Endpoint):
        egress = decide(source, EGRESS, service.vip_address, groups, to_port, protocol)
        hops.append(Hop.of(EGRESS_HOP, source.name, egress))
    elif service.floating_addresses:
        addresses = ", ".join(service.floating_addresses)
        hops.append(Hop(FLOATING_IP_HOP, service.name, True, f"{service.name} is reached at floating IP {addresses}"))
    else:
        why = f"{service.name} has no floating IP: from outside, a Service is reached at one (type LoadBalancer)"
        hops.append(Hop(FLOATING_IP_HOP, service.name, False, why))
    if listener is None:
        shown = ", ".join(f"{each.protocol}:{each.port}" for each in service.listeners) or "none"
        asked = f"{protocol.upper()} port {port}" if port else protocol.upper()
        why = f"{service.name} has no listener for {asked} (it has {shown})"
        hops.append(Hop(LISTENER_HOP, service.name, False, why))
        return _verdict(hops, 0, 0)
    hops.append(Hop(LISTENER_HOP, listener.name, True, f"listener {listener.name} takes it"))
    client = source if isinstance(source, str) else source.address
    hops.append(_source_ranges(listener, client, refused, on_members))
    if not all(hop.allowed for hop in hops):
        return _verdict(hops, len(listener.members), 0)
    for member in listener.members:
        seen = _seen_source(service, client, member, outside)
        hops.append(_member_hop(member, members.get(member.address), seen, groups, protocol))
    allowing = sum(1 for hop in hops if hop.hop == INGRESS_HOP and hop.allowed)
    return _verdict(hops, len(listener.members), allowing)


def pick_listener(service: LoadBalancerView, port: int | None, protocol: str) -> ListenerView | None:
    """The listener for ``protocol`` on ``port`` (None: the only one of that protocol); None when there is none."""
    found = [each for each in service.listeners if TRANSPORT.get(each.protocol.upper()) == protocol.lower()]
    if port is not None:
        return next((each for each in found if each.port == port), None)
    if len(found) > 1:
        ports = ", ".join(str(each.port) for each in found)
        raise ReachError(f"{service.name} listens on {protocol.upper()} ports {ports}: name one with --port")
    return found[0] if found else None


def _to_ingress_address(
    source: Endpoint,
    service: LoadBalancerView,
    groups: Mapping[str, Group],
    port: int | None,
    protocol: str,
    ranges: Sequence[str] | None,
) -> list[Hop]:
    """A pod's way to the Service's floating IP: its egress there, and the pods' networks' source filters."""
    if not service.floating_addresses:
        why = f"{service.name} has no floating IP: an ingress address is one (type LoadBalancer)"
        return [Hop(FLOATING_IP_HOP, service.name, False, why)]
    address = service.floating_addresses[0]
    egress = decide(source, EGRESS, address, groups, port, protocol)
    hops = [Hop.of(EGRESS_HOP, source.name, egress)]
    hops.append(Hop(FLOATING_IP_HOP, service.name, True, f"{service.name} is reached at floating IP {address}"))
    if ranges is None:
        return hops
    shown = f"the source ranges of {service.name} ({', '.join(ranges)})"
    client = ipaddress.ip_address(source.address)
    if any(client in ipaddress.ip_network(each, strict=False) for each in ranges):
        return [*hops, Hop(SOURCE_FILTER_HOP, service.name, True, f"{source.address} is in {shown}")]
    why = f"the pods' networks refuse {source.name} ({source.address}) at {address}: it is outside {shown}"
    return [*hops, Hop(SOURCE_FILTER_HOP, service.name, False, why)]


def _source_ranges(listener: ListenerView, client: str, refused: Sequence[str], on_members: Sequence[str]) -> Hop:
    if not listener.allowed_cidrs and on_members:
        why = f"listener {listener.name} has no allowed_cidrs: its source ranges ({', '.join(on_members)}) are on "
        return Hop(ALLOWED_CIDRS_HOP, listener.name, True, why + "the members' security groups")
    if not listener.allowed_cidrs:
        left_out = [r for r in refused if r.startswith(f"{SOURCE_RANGES_OPTION}{listener.name}")]
        note = f" (the Service's source ranges were left out: {'; '.join(left_out)})" if left_out else ""
        return Hop(ALLOWED_CIDRS_HOP, listener.name, True, f"listener {listener.name} has no allowed_cidrs{note}")
    address = ipaddress.ip_address(client)
    inside = next((c for c in listener.allowed_cidrs if address in ipaddress.ip_network(c, strict=False)), None)
    if inside is not None:
        return Hop(ALLOWED_CIDRS_HOP, listener.name, True, f"allowed_cidrs of {listener.name} include {client}")
    ranges = ", ".join(listener.allowed_cidrs)
    return Hop(
        ALLOWED_CIDRS_HOP, listener.name, False, f"allowed_cidrs of {listener.name} ({ranges}) leave out {client}"
    )


def _seen_source(service: LoadBalancerView, client: str, member: MemberView, outside: bool) -> str:
    """The source address a member sees: the client's, or the VIP (a proxying provider; OVN's hairpin)."""
    if (service.provider or "").lower() in PROXYING_PROVIDERS:
        return service.vip_address
    if not outside and member.address == client:
        return service.vip_address
    return client


def _member_hop(
    member: MemberView, endpoint: Endpoint | None, seen: str, groups: Mapping[str, Group], protocol: str
) -> Hop:
    if endpoint is None:
        why = f"member {member.name} ({member.address}) has no port of the cluster's: no group of kuberaven's on it"
        return Hop(INGRESS_HOP, member.name, True, why)
    decision = decide(endpoint, INGRESS, seen, groups, member.port, protocol)
    return Hop.of(INGRESS_HOP, member.name, decision)


def _verdict(hops: list[Hop], total: int, allowing: int) -> ServiceAnswer:
    stopped = next((hop for hop in hops if not hop.allowed and hop.hop != INGRESS_HOP), None)
    if stopped is not None:
        return ServiceAnswer(False, stopped.reason, tuple(hops), total, allowing)
    if total == 0:
        listener = next(hop.at for hop in hops if hop.hop == LISTENER_HOP)
        return ServiceAnswer(False, f"listener {listener} has no members (no ready endpoints)", tuple(hops), 0, 0)
    denying = "; ".join(hop.reason for hop in hops if not hop.allowed)
    if allowing == total:
        return ServiceAnswer(True, "; ".join(hop.reason for hop in hops), tuple(hops), total, allowing)
    if allowing == 0:
        return ServiceAnswer(False, f"no member lets it in: {denying}", tuple(hops), total, 0)
    why = f"only {allowing} of {total} members let it in (a connection may land on any): {denying}"
    return ServiceAnswer(False, why, tuple(hops), total, allowing)
