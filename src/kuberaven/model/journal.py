"""kuberaven's own records of its work (model/): watch positions, the event outbox, sync tombstones.

    inventory/ writer ──(one transaction)──► WatchPosition, OutboxEvent ──► watch/ resumes, events/ relays
    tombstones.py (with a delete) ──► SyncTombstone ──► provisioning/ deletes the object

Not user models: ``kuberaven apply/get/delete`` never address them; they
are written beside the rows whose change they record, in the same
transaction, so a crash never separates the two.
"""

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from .base import Model
from .fields import fk


class WatchPosition(Model):
    """Where a watch of one cluster resumes; written with the rows it produced."""

    __tablename__ = "watch_position"
    __table_args__ = (sa.UniqueConstraint("cluster_id", "target"),)
    natural_key = ("cluster", "target")

    cluster_id: Mapped[int] = mapped_column(fk("service.id"))
    target: Mapped[str] = mapped_column(sa.String(512))
    resource_version: Mapped[str | None] = mapped_column(sa.String(64))


class OutboxEvent(Model):
    """One pod lifecycle event: the event log, and the queue of the Kafka relay."""

    __tablename__ = "event_outbox"
    natural_key = ("event_id",)

    event_id: Mapped[str] = mapped_column(sa.String(36), unique=True)
    cluster: Mapped[str] = mapped_column(sa.String(63))
    key: Mapped[str] = mapped_column(sa.String(512))
    status: Mapped[str] = mapped_column(sa.String(16))
    payload: Mapped[dict[str, Any]] = mapped_column(sa.JSON)
    created: Mapped[Any] = mapped_column(sa.Float, index=True)  # epoch seconds: cheap to compare
    sent: Mapped[float | None] = mapped_column(sa.Float, index=True)
    attempts: Mapped[int] = mapped_column(default=0)
    last_error: Mapped[str | None] = mapped_column(sa.Text)


class SyncTombstone(Model):
    """A managed row was deleted: what the sync loop must still remove from Kubernetes.

    Written in the deleting transaction (model/tombstones.py), so a delete made
    while the daemon is down is still carried out when it starts.
    """

    __tablename__ = "sync_tombstone"
    natural_key = ("model", "row_id")

    model: Mapped[str] = mapped_column(sa.String(64))
    row_id: Mapped[int]
    cluster_id: Mapped[int | None] = mapped_column(index=True)  # no FK: the cluster row may go first
    # The deleted row's object: its namespace (None for a namespace itself) and name.
    namespace: Mapped[str | None] = mapped_column(sa.String(63))
    name: Mapped[str | None] = mapped_column(sa.String(253))
    # A KubernetesResourceInstance's applied objects; a Slice's controller kind.
    applied_objects: Mapped[list[dict[str, Any]] | None] = mapped_column(sa.JSON)
    controller_kind: Mapped[str | None] = mapped_column(sa.String(63))
    # A mount's instance or a port's service: re-applied without the deleted row.
    parent_id: Mapped[int | None]
    created: Mapped[Any] = mapped_column(sa.Float)
