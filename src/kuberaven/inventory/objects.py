"""The objects the inventory mirrors one row each (inventory/): namespaces, service accounts, config maps,
secrets, services.

    writer.py ──(a watch event of one of these)──► ObjectRows ──► its row upserted, deleted or marked
                                                               ──► implied.py's id caches kept in step
    a namespace deleted ──► pods.py says "deleted" for its pods first (their rows cascade away with it)

Ownership: a row kuberaven manages (``xos_managed``) only gets the observed
fields (uid, resourceVersion); when its object vanishes it is kept and marked
for re-creation. External rows follow Kubernetes: created, updated (and
marked in step) and deleted with it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..kube.reflector import WatchEvent, object_key
from ..model.base import SyncCode, table_of, utcnow
from ..model.cluster import Principal, Service, ServicePort
from ..model.workloads import KubernetesConfigMap, KubernetesSecret
from .implied import ImpliedRows
from .pods import PodBatch
from .records import data_keys, service_ports
from .rows import IN_STEP, RECREATE, TD, external_bookkeeping


def observed_object(
    db: Connection,
    table: sa.Table,
    event: WatchEvent,
    scope: dict[str, Any],
    extra: dict[str, Any],
    kind: str,
    before_delete: Callable[[int], None] | None = None,
) -> tuple[int, bool] | None:
    """Upsert (or delete / mark) the row mirroring one object; (id, xos_managed) unless removed.

    ``before_delete(row id)`` runs just before an external row is deleted.
    """
    meta = event.object["metadata"]
    criteria = [table.c[c] == v for c, v in scope.items()] + [table.c.name == meta["name"]]
    if table is table_of(Service):
        criteria.append(table.c.leaf_model_name == "Service")
    row = db.execute(sa.select(table.c.id, table.c.xos_managed, table.c.uid).where(*criteria)).first()
    if event.type == "DELETED":
        if row is None or row.uid not in (meta.get("uid"), None):
            return None
        if row.xos_managed:
            db.execute(
                sa.update(table)
                .where(table.c.id == row.id)
                .values(
                    uid=None,
                    resource_version=None,
                    enacted=None,
                    backend_code=SyncCode.NEW,
                    backend_status=RECREATE.format(kind=kind),
                )
            )
        else:
            if before_delete is not None:
                before_delete(row.id)
            db.execute(sa.delete(table).where(table.c.id == row.id))
        return None
    observed = {"uid": meta["uid"], "resource_version": meta["resourceVersion"]}
    if row is None:
        handle = f"{object_key(event.object)}/{meta['uid']}"
        values = {**scope, "name": meta["name"], **observed, **extra, **external_bookkeeping(utcnow(), handle)}
        return db.execute(sa.insert(table).values(values).returning(table.c.id)).scalar_one(), False
    # An external row is in step once its object is seen (a row made before, like bootstrap's
    # "default" namespace, would otherwise keep the new-row status forever).
    values = observed if row.xos_managed else {**observed, **extra, **IN_STEP}
    db.execute(sa.update(table).where(table.c.id == row.id).values(values))
    return row.id, row.xos_managed


class ObjectRows:
    """Applies one cluster's watch events of mirrored objects; ``handlers`` by watch target (namespaces aside)."""

    def __init__(self, implied: ImpliedRows) -> None:
        self.implied = implied
        self.handlers: dict[str, Callable[[Connection, WatchEvent], None]] = {
            "serviceaccounts": self.service_account,
            "configmaps": functools.partial(self.keyed_data, table_of(KubernetesConfigMap), "ConfigMap"),
            "secrets": functools.partial(self.keyed_data, table_of(KubernetesSecret), "Secret"),
            "services": self.service,
        }

    def namespace(self, db: Connection, event: WatchEvent, pods: PodBatch) -> None:
        name = event.object["metadata"]["name"]
        found = observed_object(
            db,
            TD,
            event,
            {"owner_id": self.implied.cluster_id},
            {},
            "Namespace",
            before_delete=lambda td_id: pods.namespace_deleted(db, td_id, name),
        )
        if found is None:
            self.implied.namespace_deleted()
        else:
            self.implied.caches.trust_domains[name] = found[0]

    def _namespace_of(self, db: Connection, event: WatchEvent) -> int:
        return self.implied.trust_domain(db, event.object["metadata"]["namespace"])

    def service_account(self, db: Connection, event: WatchEvent) -> None:
        td = self._namespace_of(db, event)
        found = observed_object(db, table_of(Principal), event, {"trust_domain_id": td}, {}, "ServiceAccount")
        key = (td, event.object["metadata"]["name"])
        if found is None:
            self.implied.caches.principals.pop(key, None)
        else:
            self.implied.caches.principals[key] = found[0]

    def keyed_data(self, table: sa.Table, kind: str, db: Connection, event: WatchEvent) -> None:
        """A ConfigMap or Secret: its keys, never its values."""
        scope = {"trust_domain_id": self._namespace_of(db, event)}
        observed_object(db, table, event, scope, {"keys": data_keys(event.object)}, kind)

    def service(self, db: Connection, event: WatchEvent) -> None:
        table = table_of(Service)
        extra = {"leaf_model_name": "Service", "kind": "kubernetes"}
        scope = {"trust_domain_id": self._namespace_of(db, event)}
        found = observed_object(db, table, event, scope, extra, "Service")
        if found is None or found[1]:
            return  # gone, or managed: its ports are the user's to set
        service_id = found[0]
        ports = table_of(ServicePort)
        db.execute(sa.delete(ports).where(ports.c.service_id == service_id))
        rows = [
            {**port, "service_id": service_id, **external_bookkeeping(utcnow(), None)}
            for port in service_ports(event.object)
        ]
        if rows:
            db.execute(sa.insert(ports), rows)
