"""can-reach (network/, pure): whether the security groups of two pods' ports let traffic from one to the other.

    ports (their address and groups) + groups (their policy, directions, rules)
        ──► can_reach(source, target, port, protocol) ──► Reach: allowed, and which rule decides
            (egress at the source's port, then ingress at the target's)

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

from ..backend import SecurityGroupRule
from .policy import EGRESS, INGRESS, PROTOCOLS


class ReachError(ValueError):
    """A can-reach question that cannot be asked (a bad name, port or protocol)."""


class UnknownPod(ReachError):
    """No translated port for the pod named."""


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
class Reach:
    allowed: bool
    egress: Decision  # at the source's port
    ingress: Decision  # at the target's port

    @property
    def reason(self) -> str:
        """The decision that denies, or both that allow."""
        if not self.egress.allowed:
            return self.egress.reason
        if not self.ingress.allowed:
            return self.ingress.reason
        return f"{self.egress.reason}; {self.ingress.reason}"

    def as_dict(self) -> dict[str, object]:
        return {
            "allowed": self.allowed,
            "reason": self.reason,
            "egress": asdict(self.egress),
            "ingress": asdict(self.ingress),
        }


def pod_name(text: str) -> str:
    """NAMESPACE/POD, checked."""
    namespace, _, pod = text.partition("/")
    if not namespace or not pod or "/" in pod:
        raise ReachError(f"{text!r} is not NAMESPACE/POD")
    return text


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
    egress = _decide(source, EGRESS, target.address, groups, port, protocol)
    ingress = _decide(target, INGRESS, source.address, groups, port, protocol)
    return Reach(egress.allowed and ingress.allowed, egress, ingress)


def _decide(
    endpoint: Endpoint, direction: str, remote: str, groups: Mapping[str, Group], port: int | None, protocol: str
) -> Decision:
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
