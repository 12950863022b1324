"""Security group rules and ports' groups in the embedded backend (network/backends/).

    network_policies.py ──► set_security_group_rules ──► network_resource rows of kind security_group_rule
                                                         (parent: the group; attrs: direction, protocol, port range,
                                                         remote CIDR), removed with their group (ON DELETE CASCADE)
                        ──► set_port_security_groups ──► the port row's ``security_groups``

The same rules as Neutron's: a group's rules are a set (duplicates refused
whatever their description), and what can-reach reads (reach_store.py).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ...model.network import NetworkResource
from ..backend import BackendError
from ..drivers.security_groups import SecurityGroupRule

RULE = "security_group_rule"


def rule_of(row: NetworkResource) -> SecurityGroupRule:
    attrs = row.attrs
    return SecurityGroupRule(
        attrs["direction"],
        attrs["remote_cidr"],
        attrs.get("protocol"),
        attrs.get("port_min"),
        attrs.get("port_max"),
        row.name,
    )


def rule_attrs(rule: SecurityGroupRule) -> dict[str, Any]:
    return {
        "direction": rule.direction,
        "ethertype": rule.ethertype,
        "protocol": rule.protocol,
        "port_min": rule.port_min,
        "port_max": rule.port_max,
        "remote_cidr": rule.remote_cidr,
    }


def locked(session: Session, kind: str, resource: str) -> NetworkResource:
    """A row, locked against concurrent changes (PostgreSQL; SQLite serializes writers)."""
    row = session.get(NetworkResource, int(resource), with_for_update=True)
    if row is None or row.kind != kind:
        raise BackendError(f"{kind} {resource} does not exist")
    return row


def rule_rows(session: Session, groups: list[int]) -> list[NetworkResource]:
    query = sa.select(NetworkResource).where(NetworkResource.kind == RULE, NetworkResource.parent_id.in_(groups))
    return list(session.scalars(query.order_by(NetworkResource.id)))


def set_rules(session: Session, group: str, rules: list[SecurityGroupRule]) -> None:
    row = locked(session, "security_group", group)
    wanted = {rule.same_traffic(): rule for rule in reversed(rules)}  # the first of equal traffic wins
    kept = set()
    for existing in rule_rows(session, [row.id]):
        rule = rule_of(existing)
        if wanted.get(rule.same_traffic()) == rule and rule not in kept:
            kept.add(rule)
        else:
            session.delete(existing)
    session.flush()
    for rule in rules:
        if rule not in kept and wanted[rule.same_traffic()] == rule:
            kept.add(rule)
            session.add(
                NetworkResource(
                    kind=RULE,
                    name=rule.description,
                    parent_id=row.id,
                    tags=list(row.tags),
                    attrs=rule_attrs(rule),
                    cluster=row.cluster,
                )
            )


def set_port_groups(session: Session, port: str, groups: list[str]) -> None:
    row = locked(session, "port", port)
    if row.attrs.get("security_groups") != groups:
        row.attrs = {**row.attrs, "security_groups": list(groups)}
