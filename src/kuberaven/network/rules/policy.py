"""NetworkPolicy ──► security groups and rules (network/, pure functions; Kuryr's network policy design).

    NetworkPolicy + the pods (PodInfo) and namespace labels the translator knows
        ──► PolicyGroup: one security group per policy, its rules, the pods its podSelector selects
    a pod + the policies of its namespace ──► port_groups(): the groups its port carries

A peer given by pod or namespace selectors becomes one rule per matched pod
IP (``remote_cidr`` = the pod's /32), so the rules are computed again as pods,
their labels and namespaces' labels change. An ipBlock becomes the CIDRs
left of it once its ``except`` blocks are cut out. Named ports are resolved
against the containers' ports of the pods the traffic goes to: the selected
pods for ingress, the peer pods for egress.

Security groups add up (a port's traffic is allowed if any of its groups
allows it), so a pod selected only by policies of one direction also gets
the cluster's allow-all group of the other direction, and a pod selected by
no policy keeps its namespace's default group, as Kubernetes allows all
traffic to and from pods no policy selects. No I/O here: reconcilers/network_policies.py feeds
these the objects it watches; unit tests feed them plain dicts.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ..drivers.security_groups import ANY_IPV4, SecurityGroupRule

INGRESS, EGRESS = "ingress", "egress"
DIRECTIONS = {"Ingress": INGRESS, "Egress": EGRESS}
PEERS = {INGRESS: "from", EGRESS: "to"}
PROTOCOLS = {"TCP": "tcp", "UDP": "udp", "SCTP": "sctp"}
SERVICE_RULE = "load balancers (the Services' CIDR)"
GROUP_PREFIX = "policy:"
# What the pods informer decodes for policies: labels, and only the fields of containers' ports.
POD_POLICY_FIELDS = (
    "metadata.labels",
    "spec.containers[].ports[].name",
    "spec.containers[].ports[].containerPort",
    "spec.containers[].ports[].protocol",
)


class MissingGroup(Exception):
    """A policy selecting the pod has no security group yet (translated later: retried)."""


@dataclass(frozen=True)
class NamedPort:
    name: str
    protocol: str  # tcp | udp | sctp
    port: int


@dataclass(frozen=True)
class PodInfo:
    """What policies read of a pod; the translator keeps one per pod that has (or will have) a port."""

    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str]
    ip: str | None
    named_ports: tuple[NamedPort, ...] = ()
    version: int = 0  # resourceVersion: a newer event replaces an older one, never the other way


def pod_info(pod: dict[str, Any], ip: str | None) -> PodInfo:
    meta = pod["metadata"]
    named = tuple(
        NamedPort(port["name"], _protocol(port.get("protocol")), int(port["containerPort"]))
        for container in (pod.get("spec") or {}).get("containers") or []
        for port in container.get("ports") or []
        if port.get("name") and port.get("containerPort") is not None
    )
    version = str(meta.get("resourceVersion") or "")
    return PodInfo(
        meta["uid"],
        meta["namespace"],
        meta["name"],
        dict(meta.get("labels") or {}),
        ip,
        named,
        int(version) if version.isdigit() else 0,
    )


def _protocol(value: str | None) -> str:
    return PROTOCOLS.get((value or "TCP").upper(), (value or "").lower())


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels and matchExpressions) against labels; {} selects everything."""
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        present = key in labels
        matched = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(operator, False)
        if not matched:
            return False
    return True


def policy_directions(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """policyTypes, or Kubernetes' default: Ingress, and Egress when the policy has egress rules."""
    types = spec.get("policyTypes")
    if types:
        return tuple(DIRECTIONS[t] for t in types if t in DIRECTIONS)
    return (INGRESS, EGRESS) if spec.get("egress") else (INGRESS,)


def remaining_cidrs(cidr: str, excepts: Iterable[str]) -> list[str]:
    """``cidr`` without the ``excepts`` blocks, as the fewest CIDRs."""
    remaining = [ipaddress.ip_network(cidr, strict=False)]
    for text in excepts:
        cut = ipaddress.ip_network(text, strict=False)
        kept = []
        for network in remaining:
            if cut.version != network.version or not network.overlaps(cut):
                kept.append(network)
            elif cut.subnet_of(network):  # type: ignore[arg-type]  # same version: checked above
                kept.extend(network.address_exclude(cut))  # type: ignore[arg-type]
            # else: network lies inside the cut, nothing of it is left
        remaining = kept
    return [str(n) for n in ipaddress.collapse_addresses(sorted(remaining))]  # type: ignore[type-var]


def host_cidr(ip: str) -> str:
    return f"{ip}/{ipaddress.ip_address(ip).max_prefixlen}"


@dataclass(frozen=True)
class Remote:
    """One peer as rules see it: a CIDR, and the known pods behind it (for named ports)."""

    cidr: str
    pods: tuple[PodInfo, ...]


def _peer_remotes(
    peer: Mapping[str, Any], namespace: str, pods: list[PodInfo], namespaces: Mapping[str, Mapping[str, str]]
) -> list[Remote]:
    block = peer.get("ipBlock")
    if block is not None:
        cidrs = remaining_cidrs(block["cidr"], block.get("except") or [])
        return [Remote(c, tuple(p for p in pods if _inside(p.ip, c))) for c in cidrs]
    pod_selector, namespace_selector = peer.get("podSelector"), peer.get("namespaceSelector")
    matched = [
        p
        for p in pods
        if (
            p.namespace == namespace
            if namespace_selector is None
            else selects(namespace_selector, namespaces.get(p.namespace, {}))
        )
        and (pod_selector is None or selects(pod_selector, p.labels))
    ]
    return [Remote(host_cidr(p.ip), (p,)) for p in matched if p.ip]


def _inside(ip: str | None, cidr: str) -> bool:
    return ip is not None and ipaddress.ip_address(ip) in ipaddress.ip_network(cidr)


PortRange = tuple[str | None, int | None, int | None]  # protocol (None: any), first and last port (None: all)


def _port_ranges(entries: list[Mapping[str, Any]], destinations: Iterable[PodInfo]) -> list[PortRange]:
    """A rule's ports; a named port becomes the numbers the destination pods give that name."""
    if not entries:
        return [(None, None, None)]
    ranges: list[PortRange] = []
    for entry in entries:
        protocol, port = _protocol(entry.get("protocol")), entry.get("port")
        if port is None:
            ranges.append((protocol, None, None))
        elif isinstance(port, int) or str(port).isdigit():
            end = entry.get("endPort")
            ranges.append((protocol, int(port), int(end) if end is not None else int(port)))
        else:
            wanted = (port, protocol)
            numbers = {n.port for pod in destinations for n in pod.named_ports if (n.name, n.protocol) == wanted}
            ranges.extend((protocol, number, number) for number in sorted(numbers))
    return ranges


def _direction_rules(
    direction: str,
    entries: list[Mapping[str, Any]],
    namespace: str,
    selected: tuple[PodInfo, ...],
    pods: list[PodInfo],
    namespaces: Mapping[str, Mapping[str, str]],
) -> list[SecurityGroupRule]:
    rules = []
    for index, entry in enumerate(entries):
        peers = entry.get(PEERS[direction]) or []
        remotes = [r for peer in peers for r in _peer_remotes(peer, namespace, pods, namespaces)]
        if not peers:  # no peers: from (or to) anywhere
            remotes = [Remote(ANY_IPV4, tuple(p for p in pods if p.ip))]
        for remote in remotes:
            destinations = selected if direction == INGRESS else remote.pods
            for protocol, first, last in _port_ranges(entry.get("ports") or [], destinations):
                origin = f"{direction} rule {index}"
                rules.append(SecurityGroupRule(direction, remote.cidr, protocol, first, last, origin))
    return rules


@dataclass(frozen=True)
class PolicyGroup:
    """The security group of one NetworkPolicy."""

    name: str  # policy:<namespace>/<name>
    policy: str  # <namespace>/<name>
    directions: tuple[str, ...]  # the directions the policy restricts
    rules: tuple[SecurityGroupRule, ...]
    selected: frozenset[str]  # uids of the pods its podSelector selects

    def digest(self) -> str:
        """A short fingerprint of the rules: equal ones need no backend call."""
        data = json.dumps([self.directions, [asdict(r) for r in self.rules]], sort_keys=True)
        return hashlib.sha256(data.encode()).hexdigest()[:16]


def policy_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def policy_group(
    policy: Mapping[str, Any], pods: Iterable[PodInfo], namespaces: Mapping[str, Mapping[str, str]], service_cidr: str
) -> PolicyGroup:
    """The group of ``policy``, given every known pod and namespace's labels.

    A policy restricting ingress also lets in the Services' CIDR: load balancers (their VIPs, Octavia's
    amphorae) keep reaching their members, which Kubernetes' Services do whatever the policies.
    """
    meta, spec = policy["metadata"], policy.get("spec") or {}
    namespace, known = meta["namespace"], list(pods)
    selector = spec.get("podSelector") or {}
    selected = tuple(p for p in known if p.namespace == namespace and selects(selector, p.labels))
    directions = policy_directions(spec)
    rules: list[SecurityGroupRule] = []
    if INGRESS in directions:
        rules += _direction_rules(INGRESS, spec.get("ingress") or [], namespace, selected, known, namespaces)
        rules.append(SecurityGroupRule(INGRESS, service_cidr, description=SERVICE_RULE))
    if EGRESS in directions:
        rules += _direction_rules(EGRESS, spec.get("egress") or [], namespace, selected, known, namespaces)
    key = policy_key(namespace, meta["name"])
    return PolicyGroup(f"{GROUP_PREFIX}{key}", key, directions, _unique(rules), frozenset(p.uid for p in selected))


def _unique(rules: list[SecurityGroupRule]) -> tuple[SecurityGroupRule, ...]:
    """One rule per traffic (Neutron refuses duplicates whatever their description): the first one says why."""
    kept: dict[tuple[Any, ...], SecurityGroupRule] = {}
    for rule in rules:
        kept.setdefault(rule.same_traffic(), rule)
    return tuple(kept.values())


@dataclass(frozen=True)
class AllowGroups:
    """The cluster's allow-all groups: for the direction no policy selecting a pod restricts."""

    ingress: str
    egress: str


def port_groups(
    pod: PodInfo,
    policies: Iterable[Mapping[str, Any]],
    group_ids: Mapping[str, str],
    namespace_group: str,
    allow: AllowGroups,
) -> list[str]:
    """The security groups of a pod's port, given the policies of its namespace (MissingGroup: not made yet)."""
    return policy_groups(pod, policies, group_ids, allow) or [namespace_group]


def policy_groups(
    pod: PodInfo, policies: Iterable[Mapping[str, Any]], group_ids: Mapping[str, str], allow: AllowGroups
) -> list[str]:
    """The groups of the policies that select the pod, with the allow-all group of each direction none of
    them restricts; [] when no policy selects it (MissingGroup: a selecting policy's group is not made yet)."""
    selecting = [p for p in policies if selects((p.get("spec") or {}).get("podSelector") or {}, pod.labels)]
    if not selecting:
        return []
    groups: set[str] = set()
    covered: set[str] = set()
    for policy in selecting:
        key = policy_key(policy["metadata"]["namespace"], policy["metadata"]["name"])
        if key not in group_ids:
            raise MissingGroup(f"policy {key} has no security group yet")
        groups.add(group_ids[key])
        covered.update(policy_directions(policy.get("spec") or {}))
    extra = [allow.ingress] if INGRESS not in covered else []
    extra += [allow.egress] if EGRESS not in covered else []
    return sorted(groups) + extra


def allow_all_rules() -> dict[str, list[SecurityGroupRule]]:
    """The rules of the allow-all groups, by direction."""
    return {d: [SecurityGroupRule(d, ANY_IPV4, description=f"no policy restricts {d}")] for d in (INGRESS, EGRESS)}
