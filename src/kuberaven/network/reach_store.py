"""can-reach's data (network/, the database edge): two pods' ports, their groups and rules, from the embedded model.

    network_resource (ports, security groups, security_group_rule rows)  ┐
    network_translation (NetworkPolicy rows: group ↔ policy, directions) ┴──► reach.can_reach() ──► CLI, REST

Read-only; the embedded backend and the translator write these tables.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from ..model.database import Database
from ..model.network import NetworkResource, NetworkTranslation
from .backend import SecurityGroupRule
from .backends.embedded_groups import rule_of, rule_rows
from .rules.reach import Endpoint, Group, Reach, ReachError, UnknownPod, can_reach, check_port, pod_name, protocol_name

POLICY_KIND = "NetworkPolicy"


def ask(
    database: Database,
    source: str,
    target: str,
    port: int | None = None,
    protocol: str = "TCP",
    cluster: str | None = None,
) -> Reach:
    """Whether pod ``source`` (NAMESPACE/POD) may reach pod ``target``; ReachError/UnknownPod say why not asked."""
    names = (pod_name(source), pod_name(target))
    checked_port, checked_protocol = check_port(port), protocol_name(protocol)
    with database.session() as session:
        cluster = cluster or _only_cluster(session, names[0])
        ports = {row.name: row for row in session.scalars(_ports(cluster, names))}
        for name in names:
            if name not in ports:
                raise UnknownPod(f"pod {name} has no port in cluster {cluster} (no such pod, or not translated yet)")
        ids = sorted({int(g) for row in ports.values() for g in row.attrs.get("security_groups") or []})
        policies = {
            str(row.state["security_group"]): row
            for row in session.scalars(
                sa.select(NetworkTranslation).where(
                    NetworkTranslation.cluster == cluster, NetworkTranslation.kind == POLICY_KIND
                )
            )
        }
        rules: dict[str, list[SecurityGroupRule]] = {str(i): [] for i in ids}
        for row in rule_rows(session, ids):
            rules[str(row.parent_id)].append(rule_of(row))
        groups = {}
        for group, found in rules.items():
            policy = policies.get(group)
            key = f"{policy.namespace}/{policy.name}" if policy else None
            directions = frozenset(policy.state.get("directions") or []) if policy else frozenset()
            groups[group] = Group(group, key, directions, tuple(found))
        source_port, target_port = (ports[n] for n in names)
    return can_reach(_endpoint(source_port), _endpoint(target_port), groups, checked_port, checked_protocol)


def _ports(cluster: str, names: tuple[str, str]) -> sa.Select[Any]:
    return sa.select(NetworkResource).where(
        NetworkResource.kind == "port", NetworkResource.cluster == cluster, NetworkResource.name.in_(names)
    )


def _endpoint(row: NetworkResource) -> Endpoint:
    return Endpoint(row.name, row.attrs["address"], tuple(str(g) for g in row.attrs.get("security_groups") or []))


def _only_cluster(session: sa.orm.Session, name: str) -> str:
    query = sa.select(NetworkResource.cluster).where(NetworkResource.kind == "port", NetworkResource.name == name)
    clusters = sorted({c for c in session.scalars(query.distinct()) if c})
    if not clusters:
        raise UnknownPod(f"pod {name} has no port in any cluster (no such pod, or not translated yet)")
    if len(clusters) > 1:
        raise ReachError(f"pod {name} has ports in clusters {', '.join(clusters)}: name one")
    return clusters[0]
