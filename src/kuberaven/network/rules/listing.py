"""What the translation made, as rows for people (network/, pure): the web UI's network view and ``kuberaven net get``.

    network_translation rows (any backend) ─┐
    the embedded backend's resources ───────┴──► networks / ports / load balancers / policies rows (plain dicts)

Pure functions of plain data: listing_store.py reads the tables. Every row
comes from a translation row (what the translator knows it made, whatever the
backend); the embedded backend's own tables add what only they hold here
(listeners' pools and members, security group rules). With the openstack
backend those live in Neutron and Octavia: the rows then say what the
translation recorded (each listener with the members it was set to, rule
counts; a Service translated before its state kept members: listener names).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..drivers.security_groups import SecurityGroupRule
from ..pod_network import PodNetwork
from .services import ListenerSpec

KINDS = ("networks", "ports", "loadbalancers", "policies")
EMBEDDED = "embedded"
ANY = "any"
# A Service's translation state: per listener name, what it was set to (recorded_pools()).
POOLS = "pools"
PORT_FIELDS = ("port", "address", "mac", "node", "network", "subnet")  # a pod's row: what `net get` shows of its port


@dataclass(frozen=True)
class Translated:
    """One translation row: a Namespace, Pod, Service or NetworkPolicy and the backend ids made for it."""

    cluster: str
    kind: str
    namespace: str | None
    name: str
    backend: str
    state: Mapping[str, Any]


@dataclass(frozen=True)
class Resource:
    """One embedded backend resource (a listener, pool or member) with its parent's id."""

    id: int
    kind: str
    name: str
    parent: int | None
    attrs: Mapping[str, Any]


GroupNames = Mapping[tuple[str, str], str]  # (cluster, security group id) → what made it


def group_names(namespaces: Iterable[Translated], policies: Iterable[Translated]) -> dict[tuple[str, str], str]:
    """Who made each security group: ``namespace NS`` (its default group) or ``policy NS/NAME``."""
    named = {(n.cluster, str(n.state.get("security_group"))): f"namespace {n.name}" for n in namespaces}
    named.update({(p.cluster, str(p.state.get("security_group"))): f"policy {p.namespace}/{p.name}" for p in policies})
    return named


def network_rows(namespaces: Iterable[Translated], ports: Mapping[tuple[str, str], int]) -> list[dict[str, Any]]:
    """A row per namespace: its network, subnet, CIDR, gateway, default security group and how many ports."""
    rows = []
    for n in namespaces:
        rows.append(
            {
                "cluster": n.cluster,
                "namespace": n.name,
                "backend": n.backend,
                "network": n.state.get("network"),
                "subnet": n.state.get("subnet"),
                "cidr": n.state.get("cidr"),
                "gateway": n.state.get("gateway"),
                "security_group": n.state.get("security_group"),
                "ports": ports.get((n.cluster, n.name), 0),
            }
        )
    return rows


def port_rows(pods: Iterable[Translated], groups: GroupNames) -> list[dict[str, Any]]:
    """A row per pod: its port, address, MAC, node, network and security groups (with who made each), read as
    the pod's record (pod_network.py)."""
    rows = []
    for pod in pods:
        network = _fields(pod.state)
        ids = [str(g) for g in network.get("security_groups") or []]
        rows.append(
            {
                "cluster": pod.cluster,
                "namespace": pod.namespace,
                "pod": pod.name,
                "backend": pod.backend,
                **{key: network.get(key) for key in PORT_FIELDS},
                "security_groups": [{"id": g, "from": groups.get((pod.cluster, g), "")} for g in ids],
            }
        )
    return rows


def _fields(state: Mapping[str, Any]) -> Mapping[str, Any]:
    """A "Pod" row's record as fields; a row that holds no whole record (one from before it kept the port's
    MAC, which the translator asks again for) is listed with what it has."""
    try:
        return dataclasses.asdict(PodNetwork.from_state(state))
    except (KeyError, TypeError):
        return state


def load_balancer_rows(services: Iterable[Translated], resources: Iterable[Resource]) -> list[dict[str, Any]]:
    """A row per Service: its load balancer, VIP, floating IP (or why none), and listeners → pools → members.

    ``resources``: the embedded backend's listeners, pools and members of these load balancers.
    """
    children: dict[tuple[str, int], list[Resource]] = {}
    for resource in sorted(resources, key=lambda r: r.id):
        if resource.parent is not None:
            children.setdefault((resource.kind, resource.parent), []).append(resource)
    rows = []
    for service in services:
        state = service.state
        if service.backend == EMBEDDED and str(state.get("load_balancer", "")).isdigit():
            listeners = [_listener(r, children) for r in children.get(("listener", int(state["load_balancer"])), [])]
        else:  # the backend's own API has the details; the translation keeps what it set
            pools = state.get(POOLS) or {}
            listeners = [_recorded_listener(name, pools) for name in state.get("listeners") or []]
        rows.append(
            {
                "cluster": service.cluster,
                "namespace": service.namespace,
                "service": service.name,
                "backend": service.backend,
                "load_balancer": state.get("load_balancer"),
                "vip_address": state.get("vip_address"),
                "floating_ip": state.get("floating_address"),
                "floating_error": state.get("floating_error"),
                "members": state.get("members", 0),
                "listeners": listeners,
            }
        )
    return rows


def _listener(row: Resource, children: Mapping[tuple[str, int], list[Resource]]) -> dict[str, Any]:
    pools = children.get(("pool", row.id), [])
    listener: dict[str, Any] = {
        "name": row.name,
        "protocol": row.attrs.get("protocol"),
        "port": row.attrs.get("port"),
        "allowed_cidrs": list(row.attrs.get("allowed_cidrs") or []),
    }
    if pools:
        pool = pools[0]  # one pool a listener (the translator makes them in pairs)
        members = [
            {"name": m.name, "address": m.attrs.get("address"), "port": m.attrs.get("port")}
            for m in children.get(("member", pool.id), [])
        ]
        listener["pool"] = {
            "id": str(pool.id),
            "protocol": pool.attrs.get("protocol"),
            "session_persistence": pool.attrs.get("session_persistence"),
            "members": members,
        }
    return listener


def recorded_pools(listeners: Iterable[ListenerSpec]) -> dict[str, dict[str, Any]]:
    """What a Service's translation state keeps of the listeners just applied (the reconciler writes it, any
    backend): per listener name its protocol, port, pool protocol and members as ``[name, address, port]``
    (lists, not dicts: a Service may have thousands of members). load_balancer_rows() reads it back where the
    pools live in the backend's own API (openstack), so those rows have members as the embedded ones do."""
    return {
        listener.name: {
            "protocol": listener.protocol,
            "port": listener.port,
            "pool_protocol": listener.pool_protocol or listener.protocol,
            "members": [[m.name, m.address, m.port] for m in listener.members],
        }
        for listener in listeners
    }


def _recorded_listener(name: str, pools: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A listener row from recorded_pools()' form: the embedded rows' shape, without what only those tables
    hold (ids, allowed CIDRs, session persistence); the name only for a state written without it."""
    pool = pools.get(name)
    if pool is None:
        return {"name": name}
    members = [{"name": member, "address": address, "port": port} for member, address, port in pool["members"]]
    return {
        "name": name,
        "protocol": pool["protocol"],
        "port": pool["port"],
        "pool": {"protocol": pool["pool_protocol"], "members": members},
    }


def policy_rows(
    policies: Iterable[Translated],
    rules: Mapping[str, list[SecurityGroupRule]],
    ports: Iterable[Translated],
) -> list[dict[str, Any]]:
    """A row per NetworkPolicy: its security group, directions, rules (embedded backend) and the pods whose
    ports carry the group. ``rules`` by group id; ``ports``: the Pod translations of the policies' namespaces."""
    carriers: dict[tuple[str, str], list[str]] = {}
    for pod in ports:
        for group in pod.state.get("security_groups") or []:
            carriers.setdefault((pod.cluster, str(group)), []).append(pod.name)
    rows = []
    for policy in policies:
        group = str(policy.state.get("security_group"))
        found = rules.get(group) if policy.backend == EMBEDDED else None
        rows.append(
            {
                "cluster": policy.cluster,
                "namespace": policy.namespace,
                "policy": policy.name,
                "backend": policy.backend,
                "security_group": group,
                "directions": list(policy.state.get("directions") or []),
                "rule_count": policy.state.get("rules", len(found or [])),
                "rules": [describe_rule(rule) for rule in found] if found is not None else None,
                "pods": sorted(carriers.get((policy.cluster, group), [])),
            }
        )
    return rows


def describe_rule(rule: SecurityGroupRule) -> dict[str, Any]:
    """A rule as people read it: ``ingress tcp 8080 from 10.0.0.0/24 (ingress rule 0)``."""
    if rule.port_min is None:
        ports = ANY
    elif rule.port_max in (None, rule.port_min):
        ports = str(rule.port_min)
    else:
        ports = f"{rule.port_min}-{rule.port_max}"
    return {
        "direction": rule.direction,
        "protocol": rule.protocol or ANY,
        "ports": ports,
        "remote": rule.remote_cidr,
        "description": rule.description,
    }
