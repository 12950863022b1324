"""listing.py's data (network/, the database edge): a page of translation rows of one kind, with what the rows need.

    network_translation (Namespace | Pod | Service | NetworkPolicy rows, filtered, one page) ┐
    network_resource (embedded backend: listeners, pools, members, security_group_rule rows) ┴──► listing.*_rows()

Read-only; the translator and the backends write these tables. Used by
GET /api/v1/network/{networks,ports,loadbalancers,policies} and ``kuberaven net get``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from ..model.database import Database
from ..model.network import NetworkResource, NetworkTranslation
from .backends.embedded_groups import rule_of, rule_rows
from .drivers.security_groups import SecurityGroupRule
from .rules.listing import (
    EMBEDDED,
    KINDS,
    Resource,
    Translated,
    group_names,
    load_balancer_rows,
    network_rows,
    policy_rows,
    port_rows,
)

KIND_OF = {"networks": "Namespace", "ports": "Pod", "loadbalancers": "Service", "policies": "NetworkPolicy"}
CHUNK = 500  # ids per IN (…), below SQLite's bound on parameters


class UnknownListing(ValueError):
    """Not one of KINDS."""


# The order of `kuberaven net get`: cluster, namespace, name.
ORDER = (NetworkTranslation.cluster, NetworkTranslation.namespace, NetworkTranslation.name, NetworkTranslation.id)


def list_network(
    database: Database,
    what: str,
    *,
    cluster: str | None = None,
    namespace: str | None = None,
    limit: int = 100,
    offset: int = 0,
    where: Sequence[Any] = (),
    order_by: Sequence[Any] = ORDER,
) -> tuple[int, list[dict[str, Any]]]:
    """How many objects of ``what`` (networks, ports, loadbalancers, policies) match, and one page of rows.
    ``where``: more criteria on the translation rows (the REST API's search); ``order_by``: their order."""
    if what not in KINDS:
        raise UnknownListing(f"{what!r}: no such network listing (use {', '.join(KINDS)})")
    kind = KIND_OF[what]
    criteria = [NetworkTranslation.kind == kind, *where]
    if cluster is not None:
        criteria.append(NetworkTranslation.cluster == cluster)
    if namespace is not None:  # a Namespace row's own name is the namespace
        column = NetworkTranslation.name if kind == "Namespace" else NetworkTranslation.namespace
        criteria.append(column == namespace)
    with database.session() as session:
        total = session.scalar(sa.select(sa.func.count()).select_from(NetworkTranslation).where(*criteria)) or 0
        query = sa.select(NetworkTranslation).where(*criteria).order_by(*order_by)
        found = [_translated(row) for row in session.scalars(query.limit(limit).offset(offset))]
        return total, _rows(session, what, found)


def _rows(session: Session, what: str, found: list[Translated]) -> list[dict[str, Any]]:
    clusters = sorted({t.cluster for t in found})
    if what == "networks":
        return network_rows(found, _port_counts(session, clusters, [t.name for t in found]))
    namespaces = sorted({t.namespace for t in found if t.namespace})
    if what == "ports":
        owners = _translations(session, "Namespace", clusters, names=namespaces)
        policies = _translations(session, "NetworkPolicy", clusters, namespaces=namespaces)
        return port_rows(found, group_names(owners, policies))
    if what == "loadbalancers":
        return load_balancer_rows(found, _load_balancer_parts(session, found))
    ports = _translations(session, "Pod", clusters, namespaces=namespaces)
    return policy_rows(found, _rules(session, found), ports)


def _translated(row: NetworkTranslation) -> Translated:
    return Translated(row.cluster, row.kind, row.namespace, row.name, row.backend, dict(row.state or {}))


def _chunks(values: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for start in range(0, len(values), CHUNK):
        yield values[start : start + CHUNK]


def _translations(
    session: Session,
    kind: str,
    clusters: list[str],
    *,
    names: list[str] | None = None,
    namespaces: list[str] | None = None,
) -> list[Translated]:
    """The translation rows of ``kind`` in ``clusters`` with one of ``names`` or in one of ``namespaces``."""
    by_name = names is not None
    column, values = (NetworkTranslation.name, names) if by_name else (NetworkTranslation.namespace, namespaces)
    found: list[Translated] = []
    for chunk in _chunks(sorted(set(values or []))):
        query = sa.select(NetworkTranslation).where(
            NetworkTranslation.kind == kind, NetworkTranslation.cluster.in_(clusters), column.in_(chunk)
        )
        found.extend(_translated(row) for row in session.scalars(query))
    return found


def _port_counts(session: Session, clusters: list[str], namespaces: list[str]) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for chunk in _chunks(sorted(set(namespaces))):
        query = (
            sa.select(NetworkTranslation.cluster, NetworkTranslation.namespace, sa.func.count())
            .where(
                NetworkTranslation.kind == "Pod",
                NetworkTranslation.cluster.in_(clusters),
                NetworkTranslation.namespace.in_(chunk),
            )
            .group_by(NetworkTranslation.cluster, NetworkTranslation.namespace)
        )
        counts.update(((cluster, namespace or ""), count) for cluster, namespace, count in session.execute(query))
    return counts


def _embedded_ids(found: list[Translated], key: str) -> list[int]:
    return sorted({int(t.state[key]) for t in found if t.backend == EMBEDDED and str(t.state.get(key, "")).isdigit()})


def _children(session: Session, kind: str, parents: list[int]) -> list[Resource]:
    found: list[Resource] = []
    for chunk in _chunks(parents):
        query = sa.select(NetworkResource).where(NetworkResource.kind == kind, NetworkResource.parent_id.in_(chunk))
        found.extend(Resource(r.id, r.kind, r.name, r.parent_id, dict(r.attrs or {})) for r in session.scalars(query))
    return found


def _load_balancer_parts(session: Session, services: list[Translated]) -> list[Resource]:
    """The embedded backend's listeners, pools and members of these Services' load balancers."""
    listeners = _children(session, "listener", _embedded_ids(services, "load_balancer"))
    pools = _children(session, "pool", [r.id for r in listeners])
    members = _children(session, "member", [r.id for r in pools])
    return [*listeners, *pools, *members]


def _rules(session: Session, policies: list[Translated]) -> dict[str, list[SecurityGroupRule]]:
    """The embedded backend's rules of these policies' security groups, by group id."""
    groups = _embedded_ids(policies, "security_group")
    rules: dict[str, list[SecurityGroupRule]] = {str(group): [] for group in groups}
    for chunk in _chunks(groups):
        for row in rule_rows(session, list(chunk)):
            rules[str(row.parent_id)].append(rule_of(row))
    return rules
