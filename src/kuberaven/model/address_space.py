"""A cluster's own address space (model/): the CIDRs of a KubernetesService row, checked when it is saved.

    KubernetesService.pod_cidr / service_cidr / namespace_pool (None: the network_* setting)
        ──► check_address_space(): each is a network in CIDR notation; a cluster's service
            network does not overlap its pod networks; two clusters in one OpenStack project
            (openstack_project, None for both counts as one) do not overlap
        ──► the daemon's network translation of that cluster (network/backend.py NetworkOptions)

Clusters in different projects may reuse addresses, as separate clouds do.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any, Protocol

import sqlalchemy as sa

from .errors import ValidationError

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
ADDRESS_FIELDS = ("pod_cidr", "service_cidr", "namespace_pool")
POD_FIELDS = ("pod_cidr", "namespace_pool")
MODEL = "KubernetesService"


class Cluster(Protocol):
    """What is read of a KubernetesService row."""

    @property
    def id(self) -> int | None: ...
    @property
    def name(self) -> str: ...
    @property
    def openstack_project(self) -> str | None: ...


def networks(cluster: Cluster) -> dict[str, IPNetwork]:
    """The cluster's own CIDRs by field; ValidationError naming the field if one is not a network."""
    found: dict[str, IPNetwork] = {}
    for field in ADDRESS_FIELDS:
        value = getattr(cluster, field)
        if value is None:
            continue
        try:
            found[field] = ipaddress.ip_network(value, strict=True)
        except ValueError as error:
            raise ValidationError(
                MODEL, field, f"{value!r} is not a network in CIDR notation (like 10.128.0.0/16): {error}"
            ) from None
    return found


def check_address_space(cluster: Cluster, session: Session) -> None:
    own = networks(cluster)
    service = own.get("service_cidr")
    for field in POD_FIELDS:
        if service is not None and field in own and service.overlaps(own[field]):
            raise ValidationError(MODEL, "service_cidr", f"{service} overlaps the cluster's {field} {own[field]}")
    for other in _same_project(cluster, session):
        theirs = networks(other)
        for field, network in own.items():
            clash = next((f for f, n in theirs.items() if n.overlaps(network)), None)
            if clash is not None:
                raise ValidationError(
                    MODEL,
                    field,
                    f"{network} overlaps {clash} {theirs[clash]} of cluster {other.name!r} in the same OpenStack "
                    "project: give one of them other addresses or its own openstack_project",
                )


def _same_project(cluster: Cluster, session: Session) -> list[Cluster]:
    """The other clusters of the project: stored, and made earlier in this session (an apply's chunk)."""
    table: Any = type(cluster)  # KubernetesService (cluster.py imports this module, not the other way)
    project = table.openstack_project
    query = sa.select(table).where(
        project.is_(None) if cluster.openstack_project is None else project == cluster.openstack_project
    )
    with session.no_autoflush:
        stored = list(session.scalars(query))
    pending = [
        row for row in session.new if isinstance(row, table) and row.openstack_project == cluster.openstack_project
    ]
    return [row for row in {id(row): row for row in [*stored, *pending]}.values() if row is not cluster]
