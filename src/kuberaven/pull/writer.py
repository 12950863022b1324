"""The inventory's database side (pull/ → model/ + events/): one transaction per batch.

    batch of watch events ──► rows of the data model
                          ──► outbox events (events/)          } one transaction
                          ──► watch positions                  }

A batch commits whole or not at all, so after any crash the stored watch
position matches the stored rows and outbox: the restart neither replays nor
skips. Runs in a worker thread (SQLAlchemy is synchronous); Core statements,
not ORM objects, because this is the hot path.

Ownership rules: rows kuberaven manages (``xos_managed``) only get the
observed fields (uid, IPs, phase, ...); when their object vanishes they are
kept and marked for re-creation. External rows follow Kubernetes: created,
updated and deleted with it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .. import metrics
from ..events.schema import pod_event
from ..kube.reflector import ObjectVersion, WatchEvent, object_key
from ..model.base import utcnow
from ..model.database import Database
from ..model.images import ImageReference
from ..model.tables import (
    Image,
    KubernetesConfigMap,
    KubernetesSecret,
    KubernetesService,
    OutboxEvent,
    Principal,
    Service,
    ServiceInstance,
    ServicePort,
    Site,
    Slice,
    TrustDomain,
    WatchPosition,
)
from ..sync.manifests import MANAGED_BY
from .lifecycle import OBSERVED_COLUMNS, PodEvent, observed_columns, pod_transition
from .records import PodRecord, data_keys, pod_record, service_ports, slim

KSI = "KubernetesServiceInstance"
PREFETCH_CHUNK = 400  # names per IN (…), well below SQLite's bound on parameters
# Watched for their desired replicas only (Slice.controller_replica_count).
CONTROLLERS = ("deployments", "replicasets", "statefulsets", "replicationcontrollers")
SI = ServiceInstance.__table__
TD = TrustDomain.__table__
RECREATE = "{kind} deleted in Kubernetes; kuberaven will re-create it"


@dataclass(frozen=True, slots=True)
class SliceRef:
    """The slice a pod belongs to: its top controller (or the pod itself when bare)."""

    name: str
    controller_kind: str
    controller_uid: str | None
    replicas: int | None = None  # the controller's desired replicas, for kinds that have them


@dataclass(slots=True)
class Item:
    target: str
    event: WatchEvent | None = None  # None: a bookmark (position only); the object slim()med
    resource_version: str | None = None  # a usable position, when the event gives one
    synced: bool = False  # the target's initial list is complete up to here
    slice: SliceRef | None = None
    record: PodRecord | None = None  # a pod's, read before the object was slimmed

    @classmethod
    def of(cls, target: str, event: WatchEvent, resource_version: str | None) -> Item:
        """An event as it is queued: the object slimmed, a pod's record read first."""
        # A relisted DELETED is a stub with no status; a watched one carries the pod's last state.
        stub = event.type == "DELETED" and event.relisted
        record = pod_record(event.object) if target == "pods" and not stub else None
        slimmed = WatchEvent(event.type, slim(event.object), relisted=event.relisted)
        return cls(target, slimmed, resource_version, record=record)


@dataclass
class BatchResult:
    rows: int = 0
    statuses: list[str] = field(default_factory=list)  # of the outbox events written

    @property
    def events(self) -> int:
        return len(self.statuses)


@dataclass
class _PodState:
    """A pod row as the batch sees it: loaded, then changed event by event."""

    id: int | None
    xos_managed: bool
    observed: dict[str, Any]
    slice_id: int | None = None
    image_id: int | None = None
    # Kept here, not looked up again at write time: a namespace deleted later in
    # the same batch clears the id caches.
    trust_domain_id: int | None = None
    changed: bool = False
    deleted: bool = False


@dataclass
class _Caches:
    trust_domains: dict[str, int] = field(default_factory=dict)
    principals: dict[tuple[int, str], int] = field(default_factory=dict)
    slices: dict[tuple[int, str], int] = field(default_factory=dict)
    replicas: dict[int, int | None] = field(default_factory=dict)  # slice id → controller_replica_count stored
    images: dict[ImageReference, int] = field(default_factory=dict)


class InventoryWriter:
    """Applies batches of watch events of one cluster to the database."""

    def __init__(self, database: Database, cluster: str) -> None:
        self.database = database
        self.cluster = cluster
        self.cluster_id = 0
        self.site_id = 0
        self.caches = _Caches()
        self.handlers: dict[str, Callable[[Connection, WatchEvent], None]] = {
            "serviceaccounts": self._service_account,
            "configmaps": functools.partial(self._keyed_data, KubernetesConfigMap.__table__, "ConfigMap"),
            "secrets": functools.partial(self._keyed_data, KubernetesSecret.__table__, "Secret"),
            "services": self._service,
            **dict.fromkeys(CONTROLLERS, self._controller),
        }

    # --- start-up ---------------------------------------------------------

    def load(self) -> dict[str, tuple[str | None, dict[str, ObjectVersion]]]:
        """The cluster's ids, and per target the stored position and the objects known at it."""
        with self.database.engine.begin() as db:
            cluster = db.execute(sa.select(KubernetesService.id).where(KubernetesService.name == self.cluster)).scalar()
            if cluster is None:
                raise LookupError(f"KubernetesService {self.cluster!r} does not exist")
            self.cluster_id = cluster
            site = db.execute(sa.select(Site.id).order_by(Site.id).limit(1)).scalar()
            if site is None:
                raise LookupError("no Site exists; run `kuberaven db upgrade` to bootstrap one")
            self.site_id = site
            positions = dict(
                db.execute(
                    sa.select(WatchPosition.target, WatchPosition.resource_version).where(
                        WatchPosition.cluster_id == cluster
                    )
                ).all()
            )
            targets = ("pods", "namespaces", *self.handlers)
            return {target: (positions.get(target), self._known(db, target)) for target in targets}

    def _known(self, db: Connection, target: str) -> dict[str, ObjectVersion]:
        if target in CONTROLLERS:
            return {}  # not mirrored as rows: what vanished meanwhile needs no event
        if target == "namespaces":
            query = sa.select(sa.null(), TD.c.name, TD.c.uid, TD.c.resource_version).where(
                TD.c.owner_id == self.cluster_id, TD.c.uid.is_not(None)
            )
        else:
            table = {
                "pods": SI,
                "serviceaccounts": Principal.__table__,
                "configmaps": KubernetesConfigMap.__table__,
                "secrets": KubernetesSecret.__table__,
                "services": Service.__table__,
            }[target]
            query = (
                sa.select(TD.c.name, table.c.name, table.c.uid, table.c.resource_version)
                .join(TD, TD.c.id == table.c.trust_domain_id)
                .where(TD.c.owner_id == self.cluster_id, table.c.uid.is_not(None))
            )
            if target == "pods":
                query = query.where(SI.c.leaf_model_name == KSI)
        known = {}
        for namespace, name, uid, rv in db.execute(query):
            known[f"{namespace}/{name}" if namespace else name] = ObjectVersion(uid, rv)
        return known

    # --- one batch --------------------------------------------------------

    def apply(self, items: list[Item]) -> BatchResult:
        """Apply a batch in one transaction; on any error nothing of it is stored."""
        try:
            with self.database.engine.begin() as db:
                result = self._apply(db, items)
        except BaseException:
            # Ids cached during the failed transaction may not exist.
            self.caches = _Caches()
            raise
        for status in result.statuses:
            metrics.EVENTS_WRITTEN.labels(status).inc()
        return result

    def _apply(self, db: Connection, items: list[Item]) -> BatchResult:
        now = time.time()
        result = BatchResult()
        pods = [item for item in items if item.target == "pods" and item.event is not None]
        states = self._load_pods(db, pods)
        self._prefetch_slices(db, pods, states)
        outbox: list[tuple[str, dict[str, Any]]] = []  # (pod key, event)
        positions: dict[str, str] = {}
        for item in items:
            if item.event is not None:
                result.rows += 1
                if item.target == "pods":
                    self._pod(db, item, states, outbox)
                elif item.target == "namespaces":
                    self._namespace(db, item.event, states, outbox)
                else:
                    self.handlers[item.target](db, item.event)
            if item.resource_version is not None:
                positions[item.target] = item.resource_version
        self._write_pods(db, states)
        result.statuses = self._write_outbox(db, outbox, states, now)
        self._save_positions(db, positions)
        return result

    # --- pods -------------------------------------------------------------

    def _load_pods(self, db: Connection, pods: list[Item]) -> dict[str, _PodState]:
        names = {item.event.object["metadata"]["name"] for item in pods if item.event}
        return self._stored_pods(db, SI.c.name.in_(names)) if names else {}

    def _stored_pods(self, db: Connection, criterion: sa.ColumnElement[bool]) -> dict[str, _PodState]:
        """The cluster's pod rows matching ``criterion``, by namespace/name."""
        columns = [SI.c[c] for c in ("id", "name", "xos_managed", "slice_id", "image_id", *OBSERVED_COLUMNS)]
        query = (
            sa.select(TD.c.name.label("namespace"), *columns)
            .join(TD, TD.c.id == SI.c.trust_domain_id)
            .where(SI.c.owner_id == self.cluster_id, SI.c.leaf_model_name == KSI, criterion)
        )
        states = {}
        for row in db.execute(query).mappings():
            observed = {c: row[c] for c in OBSERVED_COLUMNS}
            states[f"{row['namespace']}/{row['name']}"] = _PodState(
                row["id"], row["xos_managed"], observed, row["slice_id"], row["image_id"]
            )
        return states

    def _pod(self, db: Connection, item: Item, states: dict[str, _PodState], outbox: list) -> None:
        """One pod's change: its row's observed columns and its events, as lifecycle.pod_transition() says."""
        event = item.event
        assert event is not None
        key = event.key
        state = states.get(key)
        if event.type == "DELETED":
            self._pod_gone(key, event.object["metadata"].get("uid"), item.record, state, outbox)
            return
        record = item.record
        assert record is not None, "pod items are made with Item.of()"
        if record.terminating and (state is None or state.deleted):
            # Going, and not (or no longer) recorded: typically a managed pod whose row a
            # user just deleted. Recording it now would resurrect its row as external.
            return
        transition = pod_transition(None if state is None or state.deleted else state.observed, record)
        outbox += [(key, self._event(status, key, observed)) for status, observed in transition.events]
        if state is None or (state.deleted and not state.xos_managed and state.id is None):
            state = states[key] = _PodState(None, False, {})
        state.deleted = False
        state.changed = True
        assert transition.next is not None
        state.observed = transition.next
        td = state.trust_domain_id = self._trust_domain(db, record.namespace)
        if not state.xos_managed:
            state.slice_id = self._slice(db, td, item.slice or SliceRef(record.name, "Pod", record.uid), record)
            state.image_id = self._image(db, record.images[0]) if record.images else None
            for image in record.images[1:]:
                self._image(db, image)
        self._principal(db, td, record.service_account)

    def _pod_gone(
        self, key: str, uid: str | None, record: PodRecord | None, state: _PodState | None, outbox: list
    ) -> None:
        if state is not None and not state.deleted and state.observed.get("uid") in (uid, None):
            for status, observed in pod_transition(state.observed, None).events:
                outbox.append((key, self._event(status, key, observed)))
            state.deleted = True
        elif state is None and record is not None and record.labels.get(MANAGED_BY) == "kuberaven" and record.pod_ips:
            # Its row was deleted before the pod went (a user deleted a managed row): the pod's
            # last state, which a watched DELETED carries, shows it had an IP, so it had "created".
            outbox.append((key, self._event(PodEvent.DELETED, key, observed_columns(record))))
        # Otherwise a DELETED of an older uid, already announced when its successor was seen.

    def _pods_gone_with_namespace(
        self, db: Connection, td_id: int, namespace: str, states: dict[str, _PodState], outbox: list
    ) -> None:
        """An external namespace is deleted: its pod rows are about to cascade away with its trust domain.

        Kubernetes empties a namespace before it deletes it, so its pods are
        gone, but their own DELETED events come on another watch and may
        arrive later (or, for a pod first seen earlier in this batch, its row
        would be inserted under a deleted trust domain). Say "deleted" for
        them now; their late DELETED events then find nothing to repeat.
        """
        for key, stored in self._stored_pods(db, SI.c.trust_domain_id == td_id).items():
            states.setdefault(key, stored)
        prefix = f"{namespace}/"
        for key, state in states.items():
            if key.startswith(prefix) and not state.deleted:
                for status, observed in pod_transition(state.observed, None).events:
                    outbox.append((key, self._event(status, key, observed)))
                state.deleted = True

    def _event(self, status: str, key: str, observed: dict[str, Any]) -> dict[str, Any]:
        namespace, _, name = key.partition("/")
        return pod_event(status, cluster=self.cluster, namespace=namespace, name=name, observed=observed)

    def _write_pods(self, db: Connection, states: dict[str, _PodState]) -> None:
        now = utcnow()
        inserts, external, managed, removed, recreate = [], [], [], [], []
        for key, state in states.items():
            if state.deleted:
                if state.id is None:
                    continue
                (recreate if state.xos_managed else removed).append(state.id)
            elif not state.changed:
                continue
            elif state.id is None:
                inserts.append((key, state))
            elif state.xos_managed:
                managed.append({"_id": state.id, **state.observed})
            else:
                external.append({"_id": state.id, **state.observed, "slice_id": state.slice_id,
                                 "image_id": state.image_id})  # fmt: skip
        if inserts:
            rows = [self._new_pod_row(key, state, now) for key, state in inserts]
            ids = insert_many(db, SI, rows, ("trust_domain_id", "name"), SI.c.leaf_model_name == KSI,
                              SI.c.owner_id == self.cluster_id)  # fmt: skip
            for row, (_, state) in zip(rows, inserts, strict=True):
                state.id = ids[(row["trust_domain_id"], row["name"])]
        for rows in (external, managed):
            if rows:
                values = {c: sa.bindparam(c) for c in rows[0] if c != "_id"}
                db.execute(sa.update(SI).where(SI.c.id == sa.bindparam("_id")).values(values), rows)
        if removed:
            slices = db.execute(sa.select(SI.c.slice_id).where(SI.c.id.in_(removed))).scalars().all()
            db.execute(sa.delete(SI).where(SI.c.id.in_(removed)))
            self._remove_empty_slices(db, {s for s in slices if s is not None})
        if recreate:
            cleared = dict.fromkeys(OBSERVED_COLUMNS)
            db.execute(
                sa.update(SI).where(SI.c.id.in_(recreate)).values(
                    **cleared, enacted=None, backend_code=0, backend_status=RECREATE.format(kind="Pod")
                )
            )  # fmt: skip

    def _new_pod_row(self, key: str, state: _PodState, now: Any) -> dict[str, Any]:
        name = key.rpartition("/")[2]
        return {
            "leaf_model_name": KSI,
            "name": name,
            "owner_id": self.cluster_id,
            "trust_domain_id": state.trust_domain_id,
            "slice_id": state.slice_id,
            "image_id": state.image_id,
            **state.observed,
            **_external_bookkeeping(now, f"{key}/{state.observed['uid']}"),
        }

    def _remove_empty_slices(self, db: Connection, slice_ids: set[int]) -> None:
        if not slice_ids:
            return
        table = Slice.__table__
        empty = sa.select(SI.c.id).where(SI.c.slice_id == table.c.id).exists()
        gone = db.execute(
            sa.delete(table)
            .where(table.c.id.in_(slice_ids), table.c.xos_managed.is_(False), ~empty)
            .returning(table.c.id)
        ).scalars().all()  # fmt: skip
        if gone:
            self.caches.slices = {k: v for k, v in self.caches.slices.items() if v not in set(gone)}

    def _write_outbox(self, db: Connection, outbox: list, states: dict[str, _PodState], now: float) -> list[str]:
        if not outbox:
            return []
        rows = []
        for key, event in outbox:
            state = states.get(key)
            event["kubernetesserviceinstance_id"] = state.id if state else None
            rows.append({
                "event_id": event["event_id"], "cluster": self.cluster, "key": key, "status": event["status"],
                "payload": event, "created": now, "attempts": 0,
            })  # fmt: skip
        db.execute(sa.insert(OutboxEvent.__table__), rows)
        return [row["status"] for row in rows]

    # --- the rows a pod implies ---------------------------------------------

    def _trust_domain(self, db: Connection, namespace: str) -> int:
        found = self.caches.trust_domains.get(namespace)
        if found is None:
            found = self._find_or_insert(
                db, TD, {"owner_id": self.cluster_id, "name": namespace}, {}
            )  # fmt: skip
            self.caches.trust_domains[namespace] = found
        return found

    def _principal(self, db: Connection, td: int, name: str) -> int:
        found = self.caches.principals.get((td, name))
        if found is None:
            found = self._find_or_insert(db, Principal.__table__, {"trust_domain_id": td, "name": name}, {})
            self.caches.principals[(td, name)] = found
        return found

    def _prefetch_slices(self, db: Connection, pods: list[Item], states: dict[str, _PodState]) -> None:
        """The slices a batch's new external pods need, found or made with a few statements, not two per pod.

        Bare pods have a slice each: one at a time, a cold start of them spent most of its time here.
        """
        wanted: dict[tuple[int, str], tuple[SliceRef, PodRecord]] = {}
        for item in pods:
            record = item.record
            if record is None or item.event is None or item.event.type == "DELETED":
                continue
            state = states.get(record.key)
            if state is not None and state.xos_managed:
                continue
            ref = item.slice or SliceRef(record.name, "Pod", record.uid)
            key = (self._trust_domain(db, record.namespace), ref.name)
            if key not in self.caches.slices:
                wanted.setdefault(key, (ref, record))
        if not wanted:
            return
        table = Slice.__table__
        names, domains = sorted({name for _, name in wanted}), sorted({td for td, _ in wanted})
        for start in range(0, len(names), PREFETCH_CHUNK):
            chunk = names[start : start + PREFETCH_CHUNK]
            query = sa.select(table.c.id, table.c.trust_domain_id, table.c.name).where(
                table.c.trust_domain_id.in_(domains), table.c.name.in_(chunk)
            )
            for found in db.execute(query):
                self.caches.slices[(found.trust_domain_id, found.name)] = found.id
        missing = [(key, ref, record) for key, (ref, record) in wanted.items() if key not in self.caches.slices]
        if not missing:
            return
        now = utcnow()
        rows = [
            {"trust_domain_id": td, "name": name, "site_id": self.site_id,
             "principal_id": self._principal(db, td, record.service_account), "controller_kind": ref.controller_kind,
             "controller_uid": ref.controller_uid, "controller_replica_count": ref.replicas,
             **_external_bookkeeping(now, None)}
            for (td, name), ref, record in missing
        ]  # fmt: skip
        ids = insert_many(db, table, rows, ("trust_domain_id", "name"))
        for key, ref, _ in missing:
            self.caches.slices[key] = ids[key]
            self.caches.replicas[ids[key]] = ref.replicas

    def _slice(self, db: Connection, td: int, ref: SliceRef, record: PodRecord) -> int:
        found = self.caches.slices.get((td, ref.name))
        if found is None:
            extra = {
                "site_id": self.site_id,
                "principal_id": self._principal(db, td, record.service_account),
                "controller_kind": ref.controller_kind,
                "controller_uid": ref.controller_uid,
                "controller_replica_count": ref.replicas,
            }
            found = self._find_or_insert(db, Slice.__table__, {"trust_domain_id": td, "name": ref.name}, extra)
            self.caches.slices[(td, ref.name)] = found
            self.caches.replicas.setdefault(found, ref.replicas)
        if self.caches.replicas.get(found) != ref.replicas:
            # A found slice, or a custom controller scaled (read again once its owner cache expired).
            table = Slice.__table__
            db.execute(sa.update(table).where(table.c.id == found, table.c.xos_managed.is_(False))
                       .values(controller_replica_count=ref.replicas))  # fmt: skip
            self.caches.replicas[found] = ref.replicas
        return found

    def _controller(self, db: Connection, event: WatchEvent) -> None:
        """A Deployment, ReplicaSet, StatefulSet or ReplicationController scaled: its slices' replica count."""
        if event.type == "DELETED":
            return  # its slices go with their pods
        table = Slice.__table__
        replicas = (event.object.get("spec") or {}).get("replicas")
        changed = db.execute(
            sa.update(table)
            .where(table.c.controller_uid == event.object["metadata"]["uid"], table.c.xos_managed.is_(False))
            .where(sa.or_(table.c.controller_replica_count.is_(None), table.c.controller_replica_count != replicas))
            .values(controller_replica_count=replicas)
            .returning(table.c.id)
        ).scalars().all()  # fmt: skip
        for slice_id in changed:
            self.caches.replicas[slice_id] = replicas

    def _image(self, db: Connection, image: ImageReference) -> int:
        found = self.caches.images.get(image)
        if found is None:
            key = {"name": image.name, "tag": image.tag, "digest": image.digest}
            found = self._find_or_insert(db, Image.__table__, key, {"kind": "container"})
            self.caches.images[image] = found
        return found

    def _find_or_insert(self, db: Connection, table: sa.Table, key: dict[str, Any], extra: dict[str, Any]) -> int:
        criteria = [table.c[c] == v for c, v in key.items()]
        found = db.execute(sa.select(table.c.id).where(*criteria)).scalar()
        if found is not None:
            return found
        row = {**key, **extra, **_external_bookkeeping(utcnow(), None)}
        return db.execute(sa.insert(table).values(row).returning(table.c.id)).scalar_one()

    # --- namespaces, service accounts, config maps, secrets, services -------

    def _observed_object(
        self, db: Connection, table: sa.Table, event: WatchEvent, scope: dict[str, Any], extra: dict[str, Any],
        kind: str, before_delete: Callable[[int], None] | None = None,
    ) -> tuple[int, bool] | None:
        """Upsert (or delete / mark) the row mirroring one object; (id, xos_managed) unless removed.

        ``before_delete(row id)`` runs just before an external row is deleted.
        """
        meta = event.object["metadata"]
        criteria = [table.c[c] == v for c, v in scope.items()] + [table.c.name == meta["name"]]
        if table is Service.__table__:
            criteria.append(table.c.leaf_model_name == "Service")
        row = db.execute(sa.select(table.c.id, table.c.xos_managed, table.c.uid).where(*criteria)).first()
        if event.type == "DELETED":
            if row is None or row.uid not in (meta.get("uid"), None):
                return None
            if row.xos_managed:
                db.execute(
                    sa.update(table).where(table.c.id == row.id).values(
                        uid=None, resource_version=None, enacted=None, backend_code=0,
                        backend_status=RECREATE.format(kind=kind),
                    )
                )  # fmt: skip
            else:
                if before_delete is not None:
                    before_delete(row.id)
                db.execute(sa.delete(table).where(table.c.id == row.id))
            return None
        observed = {"uid": meta["uid"], "resource_version": meta["resourceVersion"]}
        if row is None:
            handle = f"{object_key(event.object)}/{meta['uid']}"
            values = {**scope, "name": meta["name"], **observed, **extra, **_external_bookkeeping(utcnow(), handle)}
            return db.execute(sa.insert(table).values(values).returning(table.c.id)).scalar_one(), False
        values = observed if row.xos_managed else {**observed, **extra}
        db.execute(sa.update(table).where(table.c.id == row.id).values(values))
        return row.id, row.xos_managed

    def _namespace(self, db: Connection, event: WatchEvent, states: dict[str, _PodState], outbox: list) -> None:
        name = event.object["metadata"]["name"]
        found = self._observed_object(
            db, TD, event, {"owner_id": self.cluster_id}, {}, "Namespace",
            before_delete=lambda td_id: self._pods_gone_with_namespace(db, td_id, name, states, outbox),
        )  # fmt: skip
        if found is None:
            # Its principals, slices and instances went with it (ON DELETE CASCADE).
            self.caches = _Caches(images=self.caches.images)
        else:
            self.caches.trust_domains[name] = found[0]

    def _namespace_of(self, db: Connection, event: WatchEvent) -> int:
        return self._trust_domain(db, event.object["metadata"]["namespace"])

    def _service_account(self, db: Connection, event: WatchEvent) -> None:
        td = self._namespace_of(db, event)
        found = self._observed_object(db, Principal.__table__, event, {"trust_domain_id": td}, {}, "ServiceAccount")
        key = (td, event.object["metadata"]["name"])
        if found is None:
            self.caches.principals.pop(key, None)
        else:
            self.caches.principals[key] = found[0]

    def _keyed_data(self, table: sa.Table, kind: str, db: Connection, event: WatchEvent) -> None:
        """A ConfigMap or Secret: its keys, never its values."""
        scope = {"trust_domain_id": self._namespace_of(db, event)}
        self._observed_object(db, table, event, scope, {"keys": data_keys(event.object)}, kind)

    def _service(self, db: Connection, event: WatchEvent) -> None:
        table = Service.__table__
        extra = {"leaf_model_name": "Service", "kind": "kubernetes"}
        scope = {"trust_domain_id": self._namespace_of(db, event)}
        found = self._observed_object(db, table, event, scope, extra, "Service")
        if found is None or found[1]:
            return  # gone, or managed: its ports are the user's to set
        service_id = found[0]
        ports = ServicePort.__table__
        db.execute(sa.delete(ports).where(ports.c.service_id == service_id))
        rows = [
            {**port, "service_id": service_id, **_external_bookkeeping(utcnow(), None)}
            for port in service_ports(event.object)
        ]
        if rows:
            db.execute(sa.insert(ports), rows)

    # --- positions ----------------------------------------------------------

    def _save_positions(self, db: Connection, positions: dict[str, str]) -> None:
        table = WatchPosition.__table__
        for target, rv in positions.items():
            updated = db.execute(
                sa.update(table)
                .where(table.c.cluster_id == self.cluster_id, table.c.target == target)
                .values(resource_version=rv)
            ).rowcount
            if not updated:
                db.execute(sa.insert(table).values(cluster_id=self.cluster_id, target=target, resource_version=rv))


def insert_many(
    db: Connection, table: sa.Table, rows: list[dict[str, Any]], key: tuple[str, str], *criteria: sa.ColumnElement[bool]
) -> dict[tuple[Any, Any], int]:
    """Insert ``rows`` and return their ids by their unique ``key`` (two columns).

    One executemany and one SELECT per few hundred rows: on SQLite, INSERT … RETURNING with the
    rows' order kept runs one statement per row, which was most of a cold start's time.
    """
    db.execute(sa.insert(table), rows)
    first, second = key
    ids: dict[tuple[Any, Any], int] = {}
    for start in range(0, len(rows), PREFETCH_CHUNK):
        chunk = rows[start : start + PREFETCH_CHUNK]
        firsts, seconds = sorted({r[first] for r in chunk}), sorted({r[second] for r in chunk})
        query = sa.select(table.c.id, table.c[first], table.c[second]).where(
            table.c[first].in_(firsts), table.c[second].in_(seconds), *criteria
        )
        ids.update(((a, b), row_id) for row_id, a, b in db.execute(query))
    return ids


def _external_bookkeeping(now: Any, handle: str | None) -> dict[str, Any]:
    """A row the inventory found: in step with Kubernetes from the start, not managed by kuberaven."""
    return {
        "created": now, "updated": now, "enacted": now, "backend_status": "OK", "backend_code": 1,
        "backend_handle": handle, "xos_managed": False, "policy_code": 0, "deleted": False,
        "backend_need_delete": False, "no_sync": False, "no_policy": False,
    }  # fmt: skip

