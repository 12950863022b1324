"""The rows a pod implies (inventory/): its namespace, service account, slice and images, found or made.

    pods.py (a pod's namespace, service account, SliceRef, images) ──► ImpliedRows ──► ids
    objects.py (a namespace or service account watched) ──► the id caches kept in step
    controllers watched (Deployments, ReplicaSets, ...) ──► scaled() ──► write_scaled(): their slices' replicas

A pod can be seen before its namespace or service account is (they come on
other watches), so the pod's row finds or makes them. Their ids are cached
across batches; writer.py drops the caches when a batch fails, whose ids may
not exist. A bare pod's own slice is the exception: one per pod, it is kept
for its batch only, and the pod's row holds its id from then on.

A slice's ``controller_replica_count`` has one writer per kind of controller
(replicas.py decides): a built-in controller's (Deployment, ReplicaSet,
StatefulSet, ReplicationController) is written by its watch events alone,
a new slice starting from what the watch last said; a custom kind's (its
scale subresource, which no watch reports) by the pods' owner walk alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..kube.reflector import WatchEvent
from ..model.base import table_of, utcnow
from ..model.cluster import Image, Principal, Slice
from ..model.images import ImageReference
from .records import PodRecord, SliceRef
from .replicas import counted, desired_replicas, first_count, pod_sets_count
from .rows import (
    NOW,
    PREFETCH_CHUNK,
    SI,
    TD,
    find_or_insert,
    find_or_insert_shared,
    insert_many,
    insert_shared,
    stamp,
)

# Watched for their desired replicas only (Slice.controller_replica_count).
CONTROLLERS = ("deployments", "replicasets", "statefulsets", "replicationcontrollers")

# Built once, their IN (…) lists given at execution (building IN (…) from a list coerces every value, per call).
_SLICE, _IMAGE = table_of(Slice), table_of(Image)
_SLICES_BY_NAME = sa.select(_SLICE.c.id, _SLICE.c.trust_domain_id, _SLICE.c.name).where(
    _SLICE.c.trust_domain_id.in_(sa.bindparam("domains", expanding=True)),
    _SLICE.c.name.in_(sa.bindparam("names", expanding=True)),
)
# A watched controller's slices take its desired replicas (executemany: one row per controller scaled).
_SCALE = (
    sa.update(_SLICE)
    .where(
        _SLICE.c.controller_uid == sa.bindparam("controller"),
        _SLICE.c.xos_managed.is_(False),
        _SLICE.c.controller_replica_count.is_distinct_from(sa.bindparam("desired")),
    )
    .values(controller_replica_count=sa.bindparam("desired"))
)
_IMAGES_BY_NAME = sa.select(_IMAGE.c.id, _IMAGE.c.name, _IMAGE.c.tag, _IMAGE.c.digest).where(
    _IMAGE.c.name.in_(sa.bindparam("names", expanding=True))
)


@dataclass
class Caches:
    trust_domains: dict[str, int] = field(default_factory=dict)
    principals: dict[tuple[int, str], int] = field(default_factory=dict)
    slices: dict[tuple[int, str], int] = field(default_factory=dict)
    # slice id → controller_replica_count stored, for custom controllers' slices (the pods' path writes those)
    replicas: dict[int, int | None] = field(default_factory=dict)
    images: dict[ImageReference, int] = field(default_factory=dict)


class ImpliedRows:
    """Finds or makes one cluster's implied rows, caching their ids."""

    def __init__(self) -> None:
        self.cluster_id = 0
        self.site_id = 0  # the site new slices belong to
        self.caches = Caches()
        # Bare pods' own slices found or made in this batch, let go by end_batch(): after it the pod's row holds
        # the id (pods.py reads it back with the row), and a cache entry per bare pod would grow with the cluster.
        self._own_slices: dict[tuple[int, str], int] = {}
        # Built-in top controllers' desired replicas as their watches last said (by uid): new slices start
        # from it. Kept across failed batches: a retry replays the same events.
        self.watched: dict[str, int | None] = {}
        # Those of them the batch saw, for write_scaled() at its end.
        self.scaled_due: dict[str, int | None] = {}

    def forget(self) -> None:
        """After a failed batch: ids cached during it may not exist."""
        self.caches = Caches()
        self.scaled_due = {}
        self.end_batch()

    def end_batch(self) -> None:
        self._own_slices = {}

    def namespace_deleted(self) -> None:
        """Its principals, slices and instances went with it (ON DELETE CASCADE); images are the cluster's."""
        self.caches = Caches(images=self.caches.images)
        self.end_batch()

    def trust_domain(self, db: Connection, namespace: str) -> int:
        found = self.caches.trust_domains.get(namespace)
        if found is None:
            found = find_or_insert(db, TD, {"owner_id": self.cluster_id, "name": namespace}, {})
            self.caches.trust_domains[namespace] = found
        return found

    def principal(self, db: Connection, td: int, name: str) -> int:
        found = self.caches.principals.get((td, name))
        if found is None:
            found = find_or_insert(db, table_of(Principal), {"trust_domain_id": td, "name": name}, {})
            self.caches.principals[(td, name)] = found
        return found

    def prefetch_slices(self, db: Connection, pods: Iterable[tuple[SliceRef, PodRecord]]) -> None:
        """The slices a batch's new external pods need, found or made with a few statements, not two per pod.

        Bare pods have a slice each: one at a time, a cold start of them spent most of its time here.
        """
        wanted: dict[tuple[int, str], tuple[SliceRef, PodRecord]] = {}
        for ref, record in pods:
            key = (self.trust_domain(db, record.namespace), ref.name)
            if key not in self._slices(ref):
                wanted.setdefault(key, (ref, record))
        if not wanted:
            return
        table = table_of(Slice)
        names, domains = sorted({name for _, name in wanted}), sorted({td for td, _ in wanted})
        for start in range(0, len(names), PREFETCH_CHUNK):
            chunk = names[start : start + PREFETCH_CHUNK]
            for found_id, td, name in db.execute(_SLICES_BY_NAME, {"domains": domains, "names": chunk}):
                if (td, name) in wanted:  # not another namespace's slice of a wanted name
                    self._slices(wanted[td, name][0])[td, name] = found_id
        missing = [(key, ref, record) for key, (ref, record) in wanted.items() if key not in self._slices(ref)]
        if not missing:
            return
        now = stamp(db, utcnow())
        rows = [
            {
                "trust_domain_id": td,
                "name": name,
                "site_id": self.site_id,
                "principal_id": self.principal(db, td, record.service_account),
                "controller_kind": ref.controller_kind,
                "controller_uid": ref.controller_uid,
                "controller_replica_count": first_count(ref, self.watched),
                NOW: now,
            }
            for (td, name), ref, record in missing
        ]
        ids = insert_many(db, table, rows, ("trust_domain_id", "name"))
        for key, ref, _ in missing:
            self._slices(ref)[key] = ids[key]
            if not ref.is_bare:
                self.caches.replicas[ids[key]] = first_count(ref, self.watched)

    def slice(self, db: Connection, td: int, ref: SliceRef, record: PodRecord) -> int:
        slices = self._slices(ref)
        found = slices.get((td, ref.name))
        if found is None:
            count = first_count(ref, self.watched)
            extra = {
                "site_id": self.site_id,
                "principal_id": self.principal(db, td, record.service_account),
                "controller_kind": ref.controller_kind,
                "controller_uid": ref.controller_uid,
                "controller_replica_count": count,
            }
            found = find_or_insert(db, table_of(Slice), {"trust_domain_id": td, "name": ref.name}, extra)
            slices[td, ref.name] = found
            if ref.is_bare:
                return found  # a bare pod's slice has no count to keep
            self.caches.replicas.setdefault(found, count)
        if not ref.is_bare and pod_sets_count(ref, self.caches.replicas.get(found)):
            # A found slice of a custom controller, or one scaled (read again once its owner cache expired).
            table = table_of(Slice)
            db.execute(
                sa.update(table)
                .where(table.c.id == found, table.c.xos_managed.is_(False))
                .values(controller_replica_count=ref.replicas)
            )
            self.caches.replicas[found] = ref.replicas
        return found

    def _slices(self, ref: SliceRef) -> dict[tuple[int, str], int]:
        return self._own_slices if ref.is_bare else self.caches.slices

    def remove_empty_slices(self, db: Connection, slice_ids: set[int]) -> None:
        """External slices whose last pod row went go too."""
        if not slice_ids:
            return
        table = table_of(Slice)
        empty = sa.select(SI.c.id).where(SI.c.slice_id == table.c.id).exists()
        gone = (
            db.execute(
                sa.delete(table)
                .where(table.c.id.in_(slice_ids), table.c.xos_managed.is_(False), ~empty)
                .returning(table.c.id)
            )
            .scalars()
            .all()
        )
        if gone:
            self.caches.slices = {k: v for k, v in self.caches.slices.items() if v not in set(gone)}

    def scaled(self, db: Connection, event: WatchEvent) -> None:
        """A Deployment, ReplicaSet, StatefulSet or ReplicationController changed: its slices' count, at
        write_scaled(). Not written now: a batch's first write takes SQLite's write lock until it commits."""
        uid = event.object["metadata"]["uid"]
        if counted(event.type, event.object):
            self.watched[uid] = self.scaled_due[uid] = desired_replicas(event.object)
        else:
            self.watched.pop(uid, None)
            self.scaled_due.pop(uid, None)

    def write_scaled(self, db: Connection) -> None:
        """The batch's scaled controllers: their slices take the count (those made in this batch have it)."""
        if self.scaled_due:
            rows = [{"controller": uid, "desired": replicas} for uid, replicas in self.scaled_due.items()]
            db.execute(_SCALE, rows)
            self.scaled_due = {}

    def prefetch_images(self, db: Connection, images: Iterable[ImageReference]) -> None:
        """The images a batch's pods name, found or made with a few statements for the whole batch.

        One by one (a SELECT, an INSERT and its statement built anew for each) they would be a third of a cold
        start's writes (docs/benchmarks.md). Another writer may insert the same image meanwhile: ON CONFLICT DO
        NOTHING, then read.
        """
        wanted = {image for image in images if image not in self.caches.images}
        if not wanted:
            return
        self._find_images(db, wanted)
        missing = sorted(image for image in wanted if image not in self.caches.images)
        if not missing:
            return
        now = stamp(db, utcnow())
        rows = [{**image._asdict(), "kind": "container", NOW: now} for image in missing]
        insert_shared(db, table_of(Image), rows, ImageReference._fields)
        self._find_images(db, set(missing))

    def _find_images(self, db: Connection, images: set[ImageReference]) -> None:
        names = sorted({image.name for image in images})
        for start in range(0, len(names), PREFETCH_CHUNK):
            for row_id, *key in db.execute(_IMAGES_BY_NAME, {"names": names[start : start + PREFETCH_CHUNK]}):
                reference = ImageReference(*key)
                if reference in images:
                    self.caches.images[reference] = row_id

    def image(self, db: Connection, image: ImageReference) -> int:
        found = self.caches.images.get(image)
        if found is None:
            key = {"name": image.name, "tag": image.tag, "digest": image.digest}
            found = find_or_insert_shared(db, table_of(Image), key, {"kind": "container"})
            self.caches.images[image] = found
        return found
