"""Deletes the sync loop must carry out (model/ → provisioning/): tombstones written with the delete.

Deleting a row through the Python API, the CLI or the REST API (all ORM
deletes) records, in the same transaction, a :class:`SyncTombstone` for each
managed row that goes: the row itself and the rows the database removes with
it (ON DELETE CASCADE), found by walking the foreign keys. The sync loop
(provisioning/) then deletes their Kubernetes objects, even if it was down at the time.

Rules that keep deletes safe:

* external rows (``xos_managed`` false) leave no tombstone: their objects are
  not kuberaven's to delete;
* deleting a KubernetesService (a cluster) leaves none either: forgetting a
  cluster never deletes anything in it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.orm import Session

from .base import Model, table_of
from .cluster import KubernetesService, ServicePort, TrustDomain
from .journal import SyncTombstone
from .workloads import KubernetesConfigVolumeMount, KubernetesSecretVolumeMount

# Models whose rows are Kubernetes objects, by the name tombstones use.
SYNCED = frozenset(
    {
        "TrustDomain",
        "Principal",
        "KubernetesConfigMap",
        "KubernetesSecret",
        "KubernetesServiceInstance",
        "KubernetesResourceInstance",
        "Service",
        "Slice",
    }
)
# Rows that are part of another row's object: their delete re-applies that row.
PARENTS = {
    KubernetesConfigVolumeMount.__tablename__: "service_instance_id",
    KubernetesSecretVolumeMount.__tablename__: "service_instance_id",
    ServicePort.__tablename__: "service_id",
}


def deletes_object(model: str, model_class: type[Model] | None, row: Mapping[str, Any]) -> bool:
    """Whether the sync loop deletes the Kubernetes object of this deleted row (its own, not a parent's)."""
    if not row.get("xos_managed"):
        return False
    # A plugin's model with a delete policy (provisioning/model_policies.py) says so with policed_deletes = True.
    if model not in SYNCED and not getattr(model_class, "policed_deletes", False):
        return False
    # A service with no namespace has no Kubernetes object.
    return not (model == "Service" and row.get("trust_domain_id") is None)


def _model_class(table: sa.Table, row: dict[str, Any]) -> type[Model] | None:
    leaf = row.get("leaf_model_name")
    for mapper in Model.registry.mappers:
        if (leaf and mapper.class_.__name__ == leaf) or (not leaf and mapper.local_table is table):
            return mapper.class_
    return None


@event.listens_for(Session, "before_flush")
def _record_deletes(session: Session, _context: Any, _instances: Any) -> None:
    roots = [row for row in session.deleted if isinstance(row, Model) and not isinstance(row, SyncTombstone)]
    if not roots:
        return
    walk = _Walk(session.connection())
    for root in roots:
        if isinstance(root, KubernetesService):
            continue
        table = table_of(root)
        # As stored, not as this session last saw it: the sync loop writes applied_objects meanwhile.
        stored = walk.connection.execute(sa.select(table).where(table.c.id == root.id)).mappings().first()
        if stored is not None:
            session.add_all(walk.tombstones(table, [dict(stored)]))


def _cascading_children(table: sa.Table) -> Iterable[tuple[sa.Table, sa.Column[Any]]]:
    for child in Model.metadata.sorted_tables:
        for fk in child.foreign_keys:
            if fk.column.table is table and (fk.ondelete or "").upper() == "CASCADE" and child is not table:
                yield child, fk.parent


class _Walk:
    """One flush's deletes: the rows and what cascades from them → tombstones."""

    def __init__(self, connection: sa.Connection) -> None:
        self.connection = connection
        self.now = time.time()
        self._namespaces: dict[int, tuple[int | None, str | None]] = {}  # trust domain id → (cluster id, name)
        self._seen: set[tuple[str, int]] = set()  # (table, id) of the rows walked

    def tombstones(self, table: sa.Table, rows: list[dict[str, Any]]) -> Iterable[SyncTombstone]:
        # A row reached twice (a pod through its slice and through its trust domain) is one tombstone.
        rows = [row for row in rows if (table.name, row["id"]) not in self._seen]
        self._seen.update((table.name, row["id"]) for row in rows)
        if not rows:
            return
        for row in rows:
            tombstone = self._tombstone(table, row)
            if tombstone is not None:
                yield tombstone
        ids = [row["id"] for row in rows]
        for child_table, column in _cascading_children(table):
            query = sa.select(child_table).where(column.in_(ids))
            children = [dict(r) for r in self.connection.execute(query).mappings()]
            if children:
                yield from self.tombstones(child_table, children)

    def _tombstone(self, table: sa.Table, row: dict[str, Any]) -> SyncTombstone | None:
        if not row.get("xos_managed"):
            return None
        model_class = _model_class(table, row)
        model = model_class.__name__ if model_class is not None else table.name
        parent_column = PARENTS.get(table.name)
        if parent_column is not None:
            return SyncTombstone(model=model, row_id=row["id"], parent_id=row[parent_column], created=self.now)
        if not deletes_object(model, model_class, row):
            return None
        if model == "TrustDomain":
            cluster_id, namespace = row["owner_id"], None
        else:
            cluster_id, namespace = self._namespace_of(row.get("trust_domain_id"))
        if model == "KubernetesResourceInstance":
            cluster_id = row.get("owner_id") or cluster_id
        return SyncTombstone(
            model=model,
            row_id=row["id"],
            cluster_id=cluster_id,
            namespace=namespace,
            name=row.get("name"),
            applied_objects=row.get("applied_objects"),
            controller_kind=row.get("controller_kind"),
            created=self.now,
        )

    def _namespace_of(self, trust_domain_id: int | None) -> tuple[int | None, str | None]:
        """(cluster id, namespace) of a trust domain, looked up once per flush."""
        if trust_domain_id is None:
            return None, None
        if trust_domain_id not in self._namespaces:
            td = table_of(TrustDomain)
            query = sa.select(td.c.owner_id, td.c.name).where(td.c.id == trust_domain_id)
            found = self.connection.execute(query).first()
            self._namespaces[trust_domain_id] = (found.owner_id, found.name) if found else (None, None)
        return self._namespaces[trust_domain_id]
