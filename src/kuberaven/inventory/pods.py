"""One batch's pods (inventory/): their rows' observed columns, and the lifecycle events their changes announce.

    pod Items of a batch ──load()──► PodState per namespace/name (the stored row, if any)
                         ──change()──► lifecycle.pod_transition() ──► next columns + events (outbox)
    writer.py ──write()──► implied.py: the pods' service accounts, slices, images (found or made)
                       ──► pod rows inserted / updated / deleted / marked
              ──write_outbox()──► the outbox rows, the transaction's last statement

Reads and the per-pod work come first, every write at the end: on SQLite a
transaction holds the file's one write lock from its first write to its
commit, and the daemon's other writers (the relay marking events sent, the
network translator, watch positions) wait that long.

A pod's observed columns have one writer, this module; what a change
announces is lifecycle.py's to decide. Managed rows (``xos_managed``) only
get the observed columns, and are kept and marked for re-creation when
their pod goes; external rows follow the pod.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..events.schema import event_ids, event_time, pod_event
from ..model.base import SyncCode, table_of, utcnow
from ..model.cluster import Slice
from ..model.journal import OutboxEvent
from ..provisioning.manifests import MANAGED_BY, MANAGER
from .implied import ImpliedRows
from .lifecycle import OBSERVED_COLUMNS, PodEvent, observed_columns, pod_transition
from .records import Item, PodRecord, SliceRef
from .rows import KSI, NOW, RECREATE, SI, TD, encode_json, insert_many, json_value, stamp

OUTBOX = table_of(OutboxEvent)
_SLICE = table_of(Slice)
# The observed columns SQLAlchemy would encode with the json module per row: given encoded (rows.json_value()).
JSON_OBSERVED = tuple(c for c in OBSERVED_COLUMNS if isinstance(SI.c[c].type, sa.JSON))
_STORED_COLUMNS = [SI.c[c] for c in ("id", "name", "xos_managed", "slice_id", "image_id", *OBSERVED_COLUMNS)]


def _stored_query(criterion: sa.ColumnElement[bool]) -> sa.Select[Any]:
    return (
        sa.select(TD.c.name.label("namespace"), _SLICE.c.name.label("slice_name"), *_STORED_COLUMNS)
        .join(TD, TD.c.id == SI.c.trust_domain_id)
        .outerjoin(_SLICE, _SLICE.c.id == SI.c.slice_id)
        .where(SI.c.owner_id == sa.bindparam("cluster_id"), SI.c.leaf_model_name == KSI, criterion)
    )


# A batch's pods by name, built once (its IN (…) list given at execution).
_STORED_BY_NAME = _stored_query(SI.c.name.in_(sa.bindparam("names", expanding=True)))


def encoded(observed: dict[str, Any]) -> dict[str, Any]:
    """Observed columns as statement parameters: the JSON ones encoded, as ``{column}_json``."""
    params = {c: v for c, v in observed.items() if c not in JSON_OBSERVED}
    params.update((f"{c}_json", encode_json(observed[c])) for c in JSON_OBSERVED if c in observed)
    return params


@functools.cache
def _outbox_insert(dialect: str) -> sa.Insert:
    return sa.insert(OUTBOX).values(payload=json_value(dialect, "payload"))


@dataclass
class PodState:
    """A pod row as the batch sees it: loaded, then changed event by event."""

    id: int | None
    xos_managed: bool
    observed: dict[str, Any]
    slice_id: int | None = None
    image_id: int | None = None
    slice_name: str | None = None  # the stored slice's: a bare pod whose slice has its name keeps it
    # Kept here, not looked up again at write time: a namespace deleted later in
    # the same batch clears the id caches.
    trust_domain_id: int | None = None
    changed: bool = False
    deleted: bool = False
    # The pod's implied rows still to find or make at write time: its slice (None: a managed row keeps its
    # own) and its record (service account, images).
    implied_of: tuple[SliceRef | None, PodRecord] | None = None


def slice_ref(item: Item, record: PodRecord) -> SliceRef:
    """The pod's slice: its top controller's, as owners.py found it, or its own when bare."""
    return item.slice or SliceRef.bare(record.name, record.uid)


def _has_slice(state: PodState, ref: SliceRef) -> bool:
    """A bare pod whose row already points at its own slice: nothing to look up (implied.py keeps no cache of
    bare pods' slices). A controller's slice is looked up in the cache, which may also update its count."""
    return ref.is_bare and state.slice_id is not None and state.slice_name == ref.name


class PodBatch:
    """The pods of one batch of one cluster, and the outbox events (pod key, event) they announce."""

    def __init__(self, implied: ImpliedRows, cluster: str) -> None:
        self.implied = implied
        self.cluster = cluster
        self.cluster_id = implied.cluster_id
        self.states: dict[str, PodState] = {}
        # (pod key, status, the columns it describes): the events, made at write time (write_outbox()).
        self.outbox: list[tuple[str, str, dict[str, Any]]] = []

    def load(self, db: Connection, pods: list[Item]) -> None:
        """The batch's stored pod rows."""
        names = sorted({item.event.object["metadata"]["name"] for item in pods if item.event})
        self.states = self._stored(db, _STORED_BY_NAME, {"names": names}) if names else {}

    def _stored(self, db: Connection, query: sa.Select[Any], params: dict[str, Any]) -> dict[str, PodState]:
        """The cluster's pod rows ``query`` (of _stored_query()) finds, by namespace/name."""
        states = {}
        for row in db.execute(query, {"cluster_id": self.cluster_id, **params}).mappings():
            observed = {c: row[c] for c in OBSERVED_COLUMNS}
            states[f"{row['namespace']}/{row['name']}"] = PodState(
                row["id"], row["xos_managed"], observed, row["slice_id"], row["image_id"], row["slice_name"]
            )
        return states

    def change(self, db: Connection, item: Item) -> None:
        """One pod's change: its row's observed columns and its events, as lifecycle.pod_transition() says."""
        event = item.event
        assert event is not None
        key = event.key
        state = self.states.get(key)
        if event.type == "DELETED":
            self._gone(key, event.object["metadata"].get("uid"), item.record, state)
            return
        record = item.record
        assert record is not None, "pod items are made with Item.of()"
        if record.terminating and (state is None or state.deleted):
            # Going, and not (or no longer) recorded: typically a managed pod whose row a
            # user just deleted. Recording it now would resurrect its row as external.
            return
        transition = pod_transition(None if state is None or state.deleted else state.observed, record)
        self.outbox += [(key, status, observed) for status, observed in transition.events]
        if state is None or (state.deleted and not state.xos_managed and state.id is None):
            state = self.states[key] = PodState(None, False, {})
        state.deleted = False
        state.changed = True
        assert transition.next is not None
        state.observed = transition.next
        state.trust_domain_id = self.implied.trust_domain(db, record.namespace)
        state.implied_of = (None if state.xos_managed else slice_ref(item, record), record)

    def _gone(self, key: str, uid: str | None, record: PodRecord | None, state: PodState | None) -> None:
        if state is not None and not state.deleted and state.observed.get("uid") in (uid, None):
            self.outbox += [(key, status, observed) for status, observed in pod_transition(state.observed, None).events]
            state.deleted = True
        elif state is None and record is not None and record.labels.get(MANAGED_BY) == MANAGER and record.pod_ips:
            # Its row was deleted before the pod went (a user deleted a managed row): the pod's
            # last state, which a watched DELETED carries, shows it had an IP, so it had "created".
            self.outbox.append((key, PodEvent.DELETED, observed_columns(record)))
        # Otherwise a DELETED of an older uid, already announced when its successor was seen.

    def namespace_deleted(self, db: Connection, td_id: int, namespace: str) -> None:
        """An external namespace is deleted: its pod rows are about to cascade away with its trust domain.

        Kubernetes empties a namespace before it deletes it, so its pods are
        gone, but their own DELETED events come on another watch and may
        arrive later (or, for a pod first seen earlier in this batch, its row
        would be inserted under a deleted trust domain). Say "deleted" for
        them now; their late DELETED events then find nothing to repeat.
        """
        for key, stored in self._stored(db, _stored_query(SI.c.trust_domain_id == td_id), {}).items():
            self.states.setdefault(key, stored)
        prefix = f"{namespace}/"
        for key, state in self.states.items():
            if key.startswith(prefix) and not state.deleted:
                self.outbox += [(key, status, gone) for status, gone in pod_transition(state.observed, None).events]
                state.deleted = True

    # --- at the end of the batch --------------------------------------------

    def write(self, db: Connection) -> None:
        """The pods' implied rows, then the pod rows; their events after, with write_outbox()."""
        self._write_implied(db)
        self._write_rows(db)

    def _write_implied(self, db: Connection) -> None:
        """The service accounts, slices and images of the batch's changed pods: found or made, a few statements
        for the whole batch (implied.py), and their ids on the pods' states."""
        due = [(state, *state.implied_of) for state in self.states.values() if state.implied_of and not state.deleted]
        external = [(state, ref, record) for state, ref, record in due if ref is not None]
        implied = self.implied
        implied.prefetch_slices(db, ((ref, record) for state, ref, record in external if not _has_slice(state, ref)))
        implied.prefetch_images(db, (image for _, _, record in external for image in record.images))
        for state, ref, record in due:
            assert state.trust_domain_id is not None  # change() set it with implied_of
            td, state.implied_of = state.trust_domain_id, None
            if ref is not None:
                if not _has_slice(state, ref):
                    state.slice_id, state.slice_name = implied.slice(db, td, ref, record), ref.name
                state.image_id = implied.image(db, record.images[0]) if record.images else None
                for image in record.images[1:]:
                    implied.image(db, image)
            implied.principal(db, td, record.service_account)
        implied.end_batch()

    def _write_rows(self, db: Connection) -> None:
        now = stamp(db, utcnow())
        inserts: list[tuple[str, PodState]] = []
        external: list[dict[str, Any]] = []
        managed: list[dict[str, Any]] = []
        removed: list[int] = []
        recreate: list[int] = []
        for key, state in self.states.items():
            if state.deleted:
                if state.id is None:
                    continue
                (recreate if state.xos_managed else removed).append(state.id)
            elif not state.changed:
                continue
            elif state.id is None:
                inserts.append((key, state))
            elif state.xos_managed:
                managed.append({"_id": state.id, **encoded(state.observed)})
            else:
                external.append(
                    {"_id": state.id, **encoded(state.observed), "slice_id": state.slice_id, "image_id": state.image_id}
                )
        if inserts:
            rows = [self._new_row(key, state, now) for key, state in inserts]
            criteria = (SI.c.leaf_model_name == KSI, SI.c.owner_id == self.cluster_id)
            ids = insert_many(db, SI, rows, ("trust_domain_id", "name"), *criteria, json_columns=JSON_OBSERVED)
            for row, (_, state) in zip(rows, inserts, strict=True):
                state.id = ids[(row["trust_domain_id"], row["name"])]
        for rows in (external, managed):
            if rows:
                db.execute(_update_observed(db.dialect.name, tuple(rows[0])), rows)
        if removed:
            slices = db.execute(sa.select(SI.c.slice_id).where(SI.c.id.in_(removed))).scalars().all()
            db.execute(sa.delete(SI).where(SI.c.id.in_(removed)))
            self.implied.remove_empty_slices(db, {s for s in slices if s is not None})
        if recreate:
            cleared = dict.fromkeys(OBSERVED_COLUMNS)
            db.execute(
                sa.update(SI)
                .where(SI.c.id.in_(recreate))
                .values(**cleared, enacted=None, backend_code=SyncCode.NEW, backend_status=RECREATE.format(kind="Pod"))
            )

    def _new_row(self, key: str, state: PodState, now: Any) -> dict[str, Any]:
        name = key.rpartition("/")[2]
        return {
            "leaf_model_name": KSI,
            "name": name,
            "owner_id": self.cluster_id,
            "trust_domain_id": state.trust_domain_id,
            "slice_id": state.slice_id,
            "image_id": state.image_id,
            **encoded(state.observed),
            "backend_handle": f"{key}/{state.observed['uid']}",
            NOW: now,
        }

    def write_outbox(self, db: Connection, now: float) -> list[str]:
        """The batch's events, with the rows' ids (write() first); their ids drawn at once and one time for all
        (the batch's). The statuses of the events written."""
        if not self.outbox:
            return []
        rows = []
        time = event_time()
        for event_id, (key, status, observed) in zip(event_ids(len(self.outbox)), self.outbox, strict=True):
            state = self.states.get(key)
            namespace, _, name = key.partition("/")
            event = pod_event(
                status,
                cluster=self.cluster,
                namespace=namespace,
                name=name,
                observed=observed,
                instance_id=state.id if state else None,
                event_id=event_id,
                time=time,
            )
            rows.append(
                {
                    "event_id": event_id,
                    "cluster": self.cluster,
                    "key": key,
                    "status": status,
                    "payload_json": encode_json(event),
                    "created": now,
                    "attempts": 0,
                }
            )
        db.execute(_outbox_insert(db.dialect.name), rows)
        return [status for _, status, _ in self.outbox]


@functools.cache
def _update_observed(dialect: str, keys: tuple[str, ...]) -> sa.Update:
    """The UPDATE of pod rows by ``_id`` with the parameters ``keys`` (of encoded()), built once per set of keys."""
    values: dict[str, Any] = {}
    for key in keys:
        if key.endswith("_json") and key[: -len("_json")] in JSON_OBSERVED:
            values[key[: -len("_json")]] = json_value(dialect, key[: -len("_json")])
        elif key != "_id":
            values[key] = sa.bindparam(key)
    return sa.update(SI).where(SI.c.id == sa.bindparam("_id")).values(values)
