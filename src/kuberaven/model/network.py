"""Network translation state and the embedded network backend's tables (model/).

    network/ translator ──► NetworkTranslation: cluster object uid ↔ backend ids
    network/backends/embedded.py ──► NetworkResource (+ NetworkAddress, its IPAM)

``NetworkTranslation`` is written whatever the backend: it is what the
translator knows it made, read back at start-up and by the REST API.

The embedded backend keeps Neutron's and Octavia's model in two tables:
resources of every kind in one (a parent link gives subnets their network,
listeners their load balancer, members their pool; ON DELETE CASCADE gives
cascade deletes), and every address handed out in another, whose unique key
(subnet, address) is what makes double allocation impossible, even between
processes.
"""

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from .base import Model


class NetworkTranslation(Model):
    """One Kubernetes object's translation: the backend resources made for it."""

    __tablename__ = "network_translation"
    __table_args__ = (sa.UniqueConstraint("cluster", "kind", "uid"),)
    natural_key = ("cluster", "kind", "uid")

    cluster: Mapped[str] = mapped_column(sa.String(253))
    kind: Mapped[str] = mapped_column(sa.String(63))  # Namespace | Pod | Service
    uid: Mapped[str] = mapped_column(sa.String(63))
    namespace: Mapped[str | None] = mapped_column(sa.String(63))
    name: Mapped[str] = mapped_column(sa.String(253))
    backend: Mapped[str] = mapped_column(sa.String(32))
    # Backend ids and what was made (network, subnet, port, load balancer, listeners, …).
    state: Mapped[dict[str, Any]] = mapped_column(sa.JSON)
    updated: Mapped[float] = mapped_column(sa.Float)


class NetworkResource(Model):
    """A network, subnet, port, security group, router, load balancer, listener, pool, member or floating IP."""

    __tablename__ = "network_resource"
    natural_key = ("kind", "name")

    kind: Mapped[str] = mapped_column(sa.String(32), index=True)
    name: Mapped[str] = mapped_column(sa.String(255))
    parent_id: Mapped[int | None] = mapped_column(sa.ForeignKey("network_resource.id", ondelete="CASCADE"), index=True)
    tags: Mapped[list[str]] = mapped_column(sa.JSON, default=list)
    # Kind-specific fields: cidr, gateway, address, protocol, port, vip_port_id, …
    attrs: Mapped[dict[str, Any]] = mapped_column(sa.JSON, default=dict)
    # The cluster's tag, a column so that "everything of this cluster" is one index lookup.
    cluster: Mapped[str | None] = mapped_column(sa.String(253), index=True)


class NetworkAddress(Model):
    """An address of a subnet in use, by a port or a floating IP (the embedded IPAM)."""

    __tablename__ = "network_address"
    __table_args__ = (sa.UniqueConstraint("subnet_id", "address"),)
    natural_key = ("subnet_id", "address")

    subnet_id: Mapped[int] = mapped_column(sa.ForeignKey("network_resource.id", ondelete="CASCADE"))
    address: Mapped[str] = mapped_column(sa.String(45))
    holder_id: Mapped[int] = mapped_column(sa.ForeignKey("network_resource.id", ondelete="CASCADE"), index=True)
