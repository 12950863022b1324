"""The translation state (network/): one NetworkTranslation row per translated object, in worker threads.

    namespaces.py, pods.py, loadbalancers.py, network_policies.py ──► TranslationStore ──► network_translation rows
                                                                      (cluster, kind, uid → backend ids)
    a pod's "Pod" row: its record (pod_network.py), written by reconcilers/pods.py alone

Every call blocks (SQLAlchemy): the translator runs them in its threads (kube/loops.py's OffLoop).
Queries over many uids go in chunks, below SQLite's bound on parameters.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from ..kube.uids import compact_uid
from ..model.base import table_of
from ..model.database import Database
from ..model.network import NetworkTranslation
from .drivers import NetworkBackend
from .vif import PORT_ACTIVE

CHUNK = 500
TRANSLATIONS = table_of(NetworkTranslation)
# One row's translation replaced (save_many's executemany), its id given as ``_id``.
_UPDATE_STATE = (
    sa.update(TRANSLATIONS)
    .where(TRANSLATIONS.c.id == sa.bindparam("_id"))
    .values(backend=sa.bindparam("backend"), state=sa.bindparam("state"), updated=sa.bindparam("updated"))
)
Row = tuple[str, str, str | None, str, dict[str, Any]]  # kind, uid, namespace, name, state
# The queries over a batch of uids, their lists given at execution (``uids``): a list given to in_() is a value of the
# statement, and SQLAlchemy's caches of compiled statements kept such lists, and their uid strings, alive (about
# 1.6 of a pod's decoded strings a pod held that way after a cold start: docs/benchmarks.md).
_STATES = sa.select(TRANSLATIONS.c.uid, TRANSLATIONS.c.state).where(
    TRANSLATIONS.c.cluster == sa.bindparam("cluster"),
    TRANSLATIONS.c.kind == sa.bindparam("kind"),
    TRANSLATIONS.c.uid.in_(sa.bindparam("uids", expanding=True)),
)
_KEYS = sa.select(TRANSLATIONS.c.uid, TRANSLATIONS.c.namespace, TRANSLATIONS.c.name).where(
    TRANSLATIONS.c.cluster == sa.bindparam("cluster"),
    TRANSLATIONS.c.kind == sa.bindparam("kind"),
    TRANSLATIONS.c.uid.in_(sa.bindparam("uids", expanding=True)),
)
_EXISTING = sa.select(TRANSLATIONS.c.id, TRANSLATIONS.c.kind, TRANSLATIONS.c.uid).where(
    TRANSLATIONS.c.cluster == sa.bindparam("cluster"), TRANSLATIONS.c.uid.in_(sa.bindparam("uids", expanding=True))
)


class TranslationStore:
    def __init__(self, database: Database, cluster: str, backend: NetworkBackend) -> None:
        self.database = database
        self.cluster = cluster
        self.backend = backend

    def _of(self, kind: str, uid: str) -> sa.ColumnElement[bool]:
        """The criterion of one object's translation row."""
        return sa.and_(
            NetworkTranslation.cluster == self.cluster, NetworkTranslation.kind == kind, NetworkTranslation.uid == uid
        )

    def row(self, kind: str, uid: str) -> NetworkTranslation | None:
        with self.database.session() as session:
            return session.scalars(sa.select(NetworkTranslation).where(self._of(kind, uid))).first()

    def uids_of(self, kind: str) -> set[str]:
        with self.database.session() as session:
            query = sa.select(NetworkTranslation.uid).where(
                NetworkTranslation.cluster == self.cluster, NetworkTranslation.kind == kind
            )
            return set(session.scalars(query))

    def keys_of(self, kind: str) -> dict[str, str]:
        """namespace/name → uid of the translated objects of ``kind`` (the keys their reconciler knows them by)."""
        with self.database.session() as session:
            query = sa.select(NetworkTranslation.namespace, NetworkTranslation.name, NetworkTranslation.uid).where(
                NetworkTranslation.cluster == self.cluster, NetworkTranslation.kind == kind
            )
            return {(f"{ns}/{name}" if ns else name): uid for ns, name, uid in session.execute(query)}

    def keys_named(self, kind: str, uids: list[str]) -> dict[str, str]:
        """uid → namespace/name of those of ``uids`` that have a translation row of ``kind``."""
        found: dict[str, str] = {}
        with self.database.engine.connect() as db:
            for start in range(0, len(uids), CHUNK):
                params = {"cluster": self.cluster, "kind": kind, "uids": uids[start : start + CHUNK]}
                found.update((uid, f"{ns}/{name}" if ns else name) for uid, ns, name in db.execute(_KEYS, params))
        return found

    def rows_of(self, kind: str) -> list[NetworkTranslation]:
        with self.database.session() as session:
            query = sa.select(NetworkTranslation).where(
                NetworkTranslation.cluster == self.cluster, NetworkTranslation.kind == kind
            )
            return list(session.scalars(query))

    def rows_in(self, kind: str, namespace: str) -> list[NetworkTranslation]:
        """The translation rows of the objects of ``kind`` in ``namespace``."""
        with self.database.session() as session:
            query = sa.select(NetworkTranslation).where(
                NetworkTranslation.cluster == self.cluster,
                NetworkTranslation.kind == kind,
                NetworkTranslation.namespace == namespace,
            )
            return list(session.scalars(query))

    def update_state(self, kind: str, uid: str, expect: dict[str, Any], changes: dict[str, Any]) -> bool:
        """``changes`` merged into an object's state if it still has the values ``expect`` names (the same
        port: another writer may have made a new one meanwhile); whether it did."""
        with self.database.session() as session:
            row = session.scalars(sa.select(NetworkTranslation).where(self._of(kind, uid)).with_for_update()).first()
            if row is None or any(row.state.get(k) != v for k, v in expect.items()):
                return False
            row.state, row.updated = {**row.state, **changes}, time.time()
            return True

    def state(self, kind: str, uid: str) -> dict[str, Any] | None:
        row = self.row(kind, uid)
        return dict(row.state) if row is not None else None

    def rows_named(self, kind: str, namespace: str | None, name: str) -> list[NetworkTranslation]:
        with self.database.session() as session:
            return list(
                session.scalars(
                    sa.select(NetworkTranslation)
                    .where(
                        NetworkTranslation.cluster == self.cluster,
                        NetworkTranslation.kind == kind,
                        NetworkTranslation.namespace.is_(None)
                        if namespace is None
                        else NetworkTranslation.namespace == namespace,
                        NetworkTranslation.name == name,
                    )
                    .order_by(NetworkTranslation.updated.desc())
                )
            )

    def namespace_state(self, name: str) -> dict[str, Any] | None:
        rows = self.rows_named("Namespace", None, name)
        return dict(rows[0].state) if rows else None

    def states(self, kind: str, uids: list[str]) -> dict[str, dict[str, Any]]:
        """The translation states of many objects of ``kind``, by uid."""
        found: dict[str, dict[str, Any]] = {}
        with self.database.engine.connect() as db:
            for start in range(0, len(uids), CHUNK):
                params = {"cluster": self.cluster, "kind": kind, "uids": uids[start : start + CHUNK]}
                found.update((uid, dict(state)) for uid, state in db.execute(_STATES, params))
        return found

    def save_many(self, rows: list[Row]) -> None:
        """Translation rows in one transaction: Core statements, one executemany for the new rows and one for
        the changed (a cold start's port batches write hundreds at once; ORM objects cost several times the
        CPU, all of it while holding SQLite's write lock and the GIL)."""
        if not rows:
            return
        with self.database.engine.begin() as db:
            uids = [uid for _, uid, *_ in rows]
            existing: dict[tuple[str, str], int] = {}
            for start in range(0, len(uids), CHUNK):
                params = {"cluster": self.cluster, "uids": uids[start : start + CHUNK]}
                existing.update(((kind, uid), row_id) for row_id, kind, uid in db.execute(_EXISTING, params))
            now, backend = time.time(), self.backend.name
            new: dict[tuple[str, str], dict[str, Any]] = {}  # by (kind, uid): the last state of one given twice
            changed: dict[int, dict[str, Any]] = {}
            for kind, uid, namespace, name, state in rows:
                row_id = existing.get((kind, uid))
                if row_id is None:
                    new[(kind, uid)] = {
                        "cluster": self.cluster,
                        "kind": kind,
                        "uid": uid,
                        "namespace": namespace,
                        "name": name,
                        "backend": backend,
                        "state": state,
                        "updated": now,
                    }
                else:
                    changed[row_id] = {"_id": row_id, "backend": backend, "state": state, "updated": now}
            if new:
                db.execute(sa.insert(TRANSLATIONS), list(new.values()))
            if changed:
                db.execute(_UPDATE_STATE, list(changed.values()))

    def save(self, kind: str, uid: str, namespace: str | None, name: str, state: dict[str, Any]) -> None:
        self.save_many([(kind, uid, namespace, name, state)])

    def pooled_ports_not_active(self) -> list[str]:
        """The pooled ports (network/pools.py) that pods hold and whose status is not recorded ACTIVE: what
        network/activation.py asks Neutron for by id (one indexed scan, the JSON read by the database)."""
        status = TRANSLATIONS.c.state["status"].as_string()
        query = sa.select(TRANSLATIONS.c.state["port"].as_string()).where(
            TRANSLATIONS.c.cluster == self.cluster,
            TRANSLATIONS.c.kind == "Pod",
            TRANSLATIONS.c.state["pooled"].as_boolean().is_(True),
            sa.or_(status.is_(None), status != PORT_ACTIVE),
        )
        with self.database.engine.connect() as db:
            return [port for (port,) in db.execute(query)]

    def delete_rows(self, kind: str, uids: list[str]) -> None:
        """The translation rows of ``kind`` with these uids, deleted (nothing in the backend)."""
        with self.database.engine.begin() as db:
            for start in range(0, len(uids), CHUNK):
                chosen = uids[start : start + CHUNK]
                db.execute(
                    sa.delete(TRANSLATIONS).where(
                        TRANSLATIONS.c.cluster == self.cluster,
                        TRANSLATIONS.c.kind == kind,
                        TRANSLATIONS.c.uid.in_(chosen),
                    )
                )

    def release_port(self, kind: str, port: str, pod: str, groups: list[str]) -> dict[str, Any] | None:
        """One transaction: the pooled port's row (``kind``, uid ``port``) no longer names ``pod`` and keeps
        the pod's last ``groups``, and the pod's row is deleted. Returns the port's row state, free, or None
        when that row does not name the pod (the pod's row is deleted all the same)."""
        with self.database.session() as session:
            row = session.scalars(sa.select(NetworkTranslation).where(self._of(kind, port)).with_for_update()).first()
            freed = None
            if row is not None and row.state.get("pod") == pod:
                freed = {**row.state, "pod": None, "security_groups": sorted(groups)}
                row.state, row.updated = freed, time.time()
            session.execute(sa.delete(NetworkTranslation).where(self._of("Pod", pod)))
            return freed

    def forget_all_but(self, live: set[int | str], kinds: list[str]) -> None:
        """Drop the translation rows of ``kinds`` whose object is not live (``live``: compact uids, kube/uids.py;
        compared here: a NOT IN of every live uid would exceed SQLite's bound on parameters in a large cluster).
        The rows are read as a Core cursor iterates them, not buffered as an ORM result (a row per object of
        the cluster, at the end of the cold start)."""
        query = sa.select(TRANSLATIONS.c.id, TRANSLATIONS.c.uid).where(
            TRANSLATIONS.c.cluster == self.cluster, TRANSLATIONS.c.kind.in_(kinds)
        )
        with self.database.engine.begin() as db:
            gone = [row_id for row_id, uid in db.execute(query) if compact_uid(uid) not in live]
            for start in range(0, len(gone), CHUNK):
                db.execute(sa.delete(TRANSLATIONS).where(TRANSLATIONS.c.id.in_(gone[start : start + CHUNK])))

    def forget(self, kind: str, uid: str, resource_kinds: tuple[str, ...]) -> None:
        """Delete what was made for a gone object (the state keeps each id under its kind), then its row."""
        state = self.state(kind, uid)
        if state is None:
            return
        for resource_kind in resource_kinds:
            if state.get(resource_kind):
                self.backend.delete(resource_kind, str(state[resource_kind]))
        with self.database.session() as session:
            session.execute(sa.delete(NetworkTranslation).where(self._of(kind, uid)))
