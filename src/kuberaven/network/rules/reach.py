"""can-reach (network/, pure): whether the security groups of two pods' ports let traffic from one to the other.

    ports (their address and groups) + groups (their policy, directions, rules)
        ──► can_reach(source, target, port, protocol) ──► Reach: allowed, and which rule decides
            (egress at the source's port, then ingress at the target's)
        ──► from_outside(address, target, …) ──► Answer: the target's ingress alone
    parse_question(source, target, port, protocol) ──► Question: which of the questions it is
    (to a Service, through its load balancer: reach_service.py)

Kubernetes' semantics over the model the translator made (policy.py): a
direction no policy selecting the pod restricts is allowed by default (the
namespace's default group, or the cluster's allow-all group); otherwise the
first rule of the selecting policies' groups that matches the remote
address, protocol and port allows it, and none matching denies it. No I/O:
reach_store.py loads the data, the CLI and the REST API print the answer.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from ..drivers.security_groups import SecurityGroupRule
from .policy import EGRESS, INGRESS, PROTOCOLS


class ReachError(ValueError):
    """A can-reach question that cannot be asked (a bad name, port or protocol)."""


class UnknownPod(ReachError):
    """No translated port for the pod named (or no load balancer for the Service named)."""


SERVICE_WORDS = frozenset({"svc", "service", "services"})  # NAMESPACE/svc/NAME names a Service
# What each hop of an answer is (Hop.hop).
EGRESS_HOP, INGRESS_HOP = EGRESS, INGRESS
FLOATING_IP_HOP, LISTENER_HOP, ALLOWED_CIDRS_HOP = "floating_ip", "listener", "allowed_cidrs"
SOURCE_FILTER_HOP = "source_filter"  # the pods' networks refusing a pod at a Service's ingress address
# Which way a pod reaches a Service: its ClusterIP (the VIP), or its ingress address (the floating IP).
VIA_CLUSTER_IP, VIA_INGRESS = "cluster-ip", "ingress"
VIAS = (VIA_CLUSTER_IP, VIA_INGRESS)


@dataclass(frozen=True)
class Endpoint:
    """A pod's port as can-reach sees it."""

    name: str  # namespace/pod
    address: str
    groups: tuple[str, ...]


@dataclass(frozen=True)
class Group:
    id: str
    policy: str | None  # namespace/name of the NetworkPolicy it translates; None: not a policy's group
    directions: frozenset[str]  # what that policy restricts
    rules: tuple[SecurityGroupRule, ...] = ()


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str
    policy: str | None = None
    rule: str | None = None


@dataclass(frozen=True)
class Hop:
    """One place on the way that lets the traffic on or stops it, and why."""

    hop: str  # egress | floating_ip | listener | allowed_cidrs | ingress
    at: str  # the pod, the Service, the listener, or the member (namespace/pod:port)
    allowed: bool
    reason: str
    policy: str | None = None
    rule: str | None = None

    @classmethod
    def of(cls, hop: str, at: str, decision: Decision) -> Hop:
        return cls(hop, at, decision.allowed, decision.reason, decision.policy, decision.rule)


@dataclass(frozen=True)
class Answer:
    """Any can-reach answer: the verdict, the reason that decides it, and every hop on the way."""

    allowed: bool
    reason: str
    hops: tuple[Hop, ...]

    def as_dict(self) -> dict[str, object]:
        return {"allowed": self.allowed, "reason": self.reason, "hops": [asdict(hop) for hop in self.hops]}


@dataclass(frozen=True)
class Question:
    """A can-reach question, checked: from a pod or an outside address, to a pod or a Service."""

    source: str  # NAMESPACE/POD, or an IP address
    target: str  # NAMESPACE/POD, or NAMESPACE/svc/NAME
    port: int | None
    protocol: str  # tcp | udp | sctp
    source_is_address: bool = False
    target_is_service: bool = False
    via: str = VIA_CLUSTER_IP  # a pod to a Service: through its ClusterIP or its ingress address

    @property
    def target_name(self) -> tuple[str, str]:
        """(namespace, pod or Service name) of the target."""
        parts = self.target.split("/")
        return parts[0], parts[-1]


@dataclass(frozen=True)
class Reach:
    allowed: bool
    egress: Decision  # at the source's port
    ingress: Decision  # at the target's port
    source: str = ""
    target: str = ""

    @property
    def reason(self) -> str:
        """The decision that denies, or both that allow."""
        if not self.egress.allowed:
            return self.egress.reason
        if not self.ingress.allowed:
            return self.ingress.reason
        return f"{self.egress.reason}; {self.ingress.reason}"

    @property
    def hops(self) -> tuple[Hop, ...]:
        return (Hop.of(EGRESS_HOP, self.source, self.egress), Hop.of(INGRESS_HOP, self.target, self.ingress))

    def as_dict(self) -> dict[str, object]:
        return {
            "allowed": self.allowed,
            "reason": self.reason,
            "hops": [asdict(hop) for hop in self.hops],
            "egress": asdict(self.egress),
            "ingress": asdict(self.ingress),
        }


def pod_name(text: str) -> str:
    """NAMESPACE/POD, checked."""
    namespace, _, pod = text.partition("/")
    if not namespace or not pod or "/" in pod:
        raise ReachError(f"{text!r} is not NAMESPACE/POD")
    return text


def parse_question(
    source: str, target: str, port: int | None = None, protocol: str = "TCP", via: str = VIA_CLUSTER_IP
) -> Question:
    """SOURCE (NAMESPACE/POD or an IP address) to TARGET (NAMESPACE/POD or NAMESPACE/svc/NAME), checked; ``via``
    (a Service's ClusterIP or its ingress address) only for a Service: an outside address comes through its
    ingress address whatever it says."""
    address = _address(source)
    if address is None:
        pod_name(source)
    parts = target.split("/")
    is_service = len(parts) == 3 and parts[1] in SERVICE_WORDS and all(parts)
    if not is_service and (len(parts) != 2 or not all(parts)):
        raise ReachError(f"{target!r} is not NAMESPACE/POD or NAMESPACE/svc/SERVICE")
    if via not in VIAS:
        raise ReachError(f"via {via!r} is not one of {', '.join(VIAS)}")
    if via != VIA_CLUSTER_IP and not is_service:
        raise ReachError(f"via {via}: {target!r} is a pod, reached at its own address (via is for a Service)")
    return Question(
        address or source, target, check_port(port), protocol_name(protocol), address is not None, is_service, via
    )


def _address(text: str) -> str | None:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def protocol_name(text: str) -> str:
    found = PROTOCOLS.get(text.upper())
    if found is None:
        raise ReachError(f"protocol {text!r} is not one of {', '.join(PROTOCOLS)}")
    return found


def check_port(port: int | None) -> int | None:
    if port is not None and not 1 <= port <= 65535:
        raise ReachError(f"port {port} is not between 1 and 65535")
    return port


def can_reach(
    source: Endpoint, target: Endpoint, groups: Mapping[str, Group], port: int | None = None, protocol: str = "tcp"
) -> Reach:
    """Whether ``source`` may send ``protocol`` traffic (to ``port``; None: to some port) to ``target``."""
    egress = decide(source, EGRESS, target.address, groups, port, protocol)
    ingress = decide(target, INGRESS, source.address, groups, port, protocol)
    return Reach(egress.allowed and ingress.allowed, egress, ingress, source.name, target.name)


def from_outside(
    address: str, target: Endpoint, groups: Mapping[str, Group], port: int | None = None, protocol: str = "tcp"
) -> Answer:
    """Whether traffic from ``address`` (outside the cluster's pods) may enter ``target``: its ingress decides."""
    ingress = decide(target, INGRESS, address, groups, port, protocol)
    return Answer(ingress.allowed, ingress.reason, (Hop.of(INGRESS_HOP, target.name, ingress),))


def decide(
    endpoint: Endpoint, direction: str, remote: str, groups: Mapping[str, Group], port: int | None, protocol: str
) -> Decision:
    """What the groups of ``endpoint``'s port decide for ``direction`` traffic with ``remote`` (its peer)."""
    restricting = sorted(
        (groups[g] for g in endpoint.groups if g in groups and groups[g].policy and direction in groups[g].directions),
        key=lambda g: g.policy or "",
    )
    if not restricting:
        return Decision(True, f"no policy selects {endpoint.name} for {direction}: allowed by default")
    for group in restricting:
        for rule in group.rules:
            if rule.direction == direction and _matches(rule, remote, port, protocol):
                why = f"{direction} of {endpoint.name} allowed by policy {group.policy} {rule.description}"
                return Decision(True, why, group.policy, rule.description)
    names = ", ".join(g.policy or "" for g in restricting)
    return Decision(False, f"{endpoint.name} is selected by policies {names} for {direction}, no rule allows it")


def _matches(rule: SecurityGroupRule, remote: str, port: int | None, protocol: str) -> bool:
    if ipaddress.ip_address(remote) not in ipaddress.ip_network(rule.remote_cidr):
        return False
    if rule.protocol is None:
        return True
    if rule.protocol != protocol:
        return False
    if port is None or rule.port_min is None or rule.port_max is None:
        return True
    return rule.port_min <= port <= rule.port_max
