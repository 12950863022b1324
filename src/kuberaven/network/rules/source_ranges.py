"""Source ranges (network/, pure functions): where a LoadBalancer Service's loadBalancerSourceRanges hold.

Kubernetes restricts only the clients that come through the load balancer's
external address; pods and nodes of the cluster reaching the ClusterIP are
never filtered. How that is had depends on the load balancer's provider:

    a provider with allowed_cidrs (amphora; the embedded model)
        ──► listener_cidrs(): every listener's allowed_cidrs = the ranges + the cluster's own CIDRs
            (its pods' addresses, the Services' CIDR, its nodes' addresses: cluster_cidrs())
    Octavia's ovn provider (no allowed_cidrs; it keeps the client's address)
        ──► the members' ports: in place of their namespace's group (which lets in everything), the cluster's
            group (in_cluster_rules(): everything from the cluster's own CIDRs, every egress) and a group per
            Service with ranges (ranges_rules(): its ranges on its members' target ports): member_groups()
    ──► Enforcement: how they hold, and the members they do not hold on and why (the Service's condition)

Security groups add up, so a rule can only open traffic: a member that a
NetworkPolicy selects keeps the policy's groups untouched (the policy's own
rules decide who reaches it from outside), and a member that also serves a
LoadBalancer Service without ranges keeps its namespace's group (that Service
is open to every source). No I/O: loadbalancers.py and network_policies.py
feed these the rows and ids they hold.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..drivers.security_groups import ANY_IPV4, ANY_IPV6, SecurityGroupRule
from .policy import EGRESS, INGRESS, host_cidr

# Octavia providers without allowed_cidrs that keep the client's address: the members' groups judge it.
MEMBER_GROUP_PROVIDERS = frozenset({"ovn"})
# How the ranges hold (Enforcement.how, the condition's reason when every member is covered).
ALLOWED_CIDRS, MEMBER_GROUPS = "AllowedCIDRs", "MemberSecurityGroups"
PARTLY, NOT_ENFORCED = "PartlyEnforced", "NotEnforced"
ENFORCED = frozenset({ALLOWED_CIDRS, MEMBER_GROUPS})
CLUSTER_GROUP_LABEL = "the cluster's own addresses"  # what can-reach names the cluster's group as
# What the Service's translation state keeps of its ranges (read back by network_policies.py and can-reach).
RANGES_GROUP, CLUSTER_GROUP, EXPOSED_PODS = "ranges_group", "cluster_group", "exposed_pods"
PODS_FILTERED = "pods_filtered"  # the cluster's pods outside the ranges are refused at the ingress address
SOURCE_FILTERS = "source_filters"  # how many filters (source_filters.py) the pods' networks hold of the Service


def cluster_group_name(cluster: str) -> str:
    return f"kuberaven-{cluster}-in-cluster"


def ranges_group_name(service: str) -> str:
    return f"source-ranges:{service}"


def ranges_label(service: str) -> str:
    """What can-reach names a Service's ranges group as."""
    return f"source ranges of Service {service}"


def uses_member_groups(provider: str | None) -> bool:
    return (provider or "").lower() in MEMBER_GROUP_PROVIDERS


def cluster_cidrs(pod_ranges: Iterable[str], service_cidr: str, node_addresses: Iterable[str]) -> tuple[str, ...]:
    """The cluster's own CIDRs: where its pods, its Services' VIPs (and amphorae) and its nodes are."""
    found = {str(ipaddress.ip_network(c, strict=False)) for c in (*pod_ranges, service_cidr)}
    found.update(host_cidr(address) for address in node_addresses)
    return tuple(sorted(found))


def node_addresses(nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """The InternalIP addresses of Node objects."""
    return sorted(
        {
            str(a["address"])
            for node in nodes
            for a in (node.get("status") or {}).get("addresses") or []
            if a.get("type") == "InternalIP" and a.get("address")
        }
    )


def listener_cidrs(ranges: Sequence[str], cluster: Sequence[str]) -> tuple[str, ...]:
    """A listener's allowed_cidrs: none when the Service has no ranges, else its ranges and the cluster's own."""
    return tuple(sorted({*ranges, *cluster})) if ranges else ()


def in_cluster_rules(cluster: Sequence[str]) -> list[SecurityGroupRule]:
    """The cluster's group: every traffic from its own CIDRs in, every traffic out (as the namespace's group)."""
    rules = [SecurityGroupRule(INGRESS, cidr, description=f"from {cidr}") for cidr in cluster]
    rules += [SecurityGroupRule(EGRESS, any_, description="every egress") for any_ in (ANY_IPV4, ANY_IPV6)]
    return rules


def ranges_rules(ranges: Sequence[str], ports: Iterable[tuple[str, int]]) -> list[SecurityGroupRule]:
    """A Service's ranges group: each range in, on each (transport, port) its members serve it on (the
    descriptions say which: what can-reach names after the group)."""
    return [
        SecurityGroupRule(INGRESS, cidr, protocol, port, port, f"from {cidr} to {protocol} port {port}")
        for cidr in sorted(ranges)
        for protocol, port in sorted(set(ports))
    ]


def member_groups(pod: str, services: Iterable[Mapping[str, Any]]) -> tuple[str, ...] | None:
    """The groups a pod's port carries in place of its namespace's group, given the translation states of the
    Services of its namespace: the cluster's group and the ranges group of each Service with ranges that has
    it as a member; None (keep the namespace's group) when none has, or a Service open to every source does."""
    ranged, cluster = set(), None
    for state in services:
        if pod not in (state.get(EXPOSED_PODS) or []):
            continue
        if not state.get(RANGES_GROUP):
            return None  # a LoadBalancer Service without ranges exposes it: open to every source
        ranged.add(str(state[RANGES_GROUP]))
        cluster = state.get(CLUSTER_GROUP)
    if not ranged or not cluster:
        return None
    return (str(cluster), *sorted(ranged))


def port_groups_with_ranges(groups: list[str], namespace_group: str, ranged: tuple[str, ...] | None) -> list[str]:
    """A port's groups with the ranges applied: only a port on its namespace's group alone changes (a policy's
    groups are left to the policy: a rule added to them could only open what it closes)."""
    if ranged and groups == [namespace_group]:
        return list(ranged)
    return groups


def unselected(groups: Sequence[str], namespace_group: str, ours: set[str]) -> bool:
    """Whether a port's groups are its namespace's, or ours in its place: no NetworkPolicy selects its pod."""
    return list(groups) == [namespace_group] or (bool(groups) and set(groups) <= ours)


@dataclass(frozen=True)
class Enforcement:
    """How a Service's ranges hold: its condition's reason and message."""

    how: str  # ALLOWED_CIDRS | MEMBER_GROUPS | PARTLY | NOT_ENFORCED
    message: str

    @property
    def enforced(self) -> bool:
        return self.how in ENFORCED


def by_allowed_cidrs(ranges: Sequence[str], cluster: Sequence[str], refused: Sequence[str]) -> Enforcement:
    if refused:
        return Enforcement(NOT_ENFORCED, f"not enforced: the provider refused allowed_cidrs ({'; '.join(refused)})")
    shown = ", ".join(ranges)
    return Enforcement(
        ALLOWED_CIDRS,
        f"allowed_cidrs on the listeners: {shown}, and the cluster's own addresses ({', '.join(cluster)})",
    )


def with_pods(
    enforcement: Enforcement | None, address: str | None, filtered: bool, why: str | None
) -> Enforcement | None:
    """How the ranges hold, saying too whether the cluster's pods are held to them at the ingress ``address``
    (``filtered``), or why not."""
    if enforcement is None or (not filtered and not why):
        return enforcement
    note = f"pods of the cluster outside them are refused at {address}" if filtered else why
    return Enforcement(enforcement.how, f"{enforcement.message}; {note}")


def by_member_groups(ranges: Sequence[str], covered: int, left_out: Mapping[str, str]) -> Enforcement:
    """``covered``: members whose ports carry the ranges group; ``left_out``: member pod → why not."""
    shown = ", ".join(ranges)
    why = "; ".join(f"{pod}: {reason}" for pod, reason in sorted(left_out.items()))
    if not left_out:
        return Enforcement(MEMBER_GROUPS, f"security group rules on the members ({covered}): {shown}")
    if covered:
        return Enforcement(PARTLY, f"security group rules on {covered} members ({shown}); not on {why}")
    return Enforcement(NOT_ENFORCED, f"not enforced on the members: {why}")
