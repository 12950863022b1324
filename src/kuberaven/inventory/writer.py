"""The inventory's database side (inventory/ → model/ + events/): one transaction per batch.

    batch of Items (records.py) ──► pods.py: pod rows + outbox events    }
                                    implied.py: namespaces, service      }
                                      accounts, slices, images of pods   } one transaction
                                    objects.py: other mirrored objects   }
                                    implied.py: controllers' replicas    }
                                ──► watch positions                      }
                                ──► pods.py: the outbox events, last     }

A batch commits whole or not at all, so after any crash the stored watch
position matches the stored rows and outbox: the restart neither replays nor
skips. The events are written last, in the database's outbox turn (held until
the COMMIT), so that the relay sees a process's events in the order of their
ids. Runs in a worker thread (SQLAlchemy is synchronous); Core statements,
not ORM objects, because this is the hot path (rows.py).

Ownership rules: rows kuberaven manages (``xos_managed``) only get the
observed fields (uid, IPs, phase, ...); when their object vanishes they are
kept and marked for re-creation. External rows follow Kubernetes: created,
updated and deleted with it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .. import metrics
from ..kube.reflector import ObjectVersion, WatchEvent
from ..model.base import table_of
from ..model.cluster import KubernetesService, Principal, Service, Site
from ..model.database import Database
from ..model.journal import WatchPosition
from ..model.workloads import KubernetesConfigMap, KubernetesSecret
from .implied import CONTROLLERS, ImpliedRows
from .objects import ObjectRows
from .pods import PodBatch
from .records import Item
from .rows import KSI, SI, TD


@dataclass
class BatchResult:
    rows: int = 0
    statuses: list[str] = field(default_factory=list)  # of the outbox events written

    @property
    def events(self) -> int:
        return len(self.statuses)


class InventoryWriter:
    """Applies batches of watch events of one cluster to the database."""

    def __init__(self, database: Database, cluster: str) -> None:
        self.database = database
        self.cluster = cluster
        self.cluster_id = 0
        self.implied = ImpliedRows()
        self.objects = ObjectRows(self.implied)
        # Pods and namespaces aside (they touch the batch's pods): the watch targets' handlers.
        self.handlers: dict[str, Callable[[Connection, WatchEvent], None]] = {
            **self.objects.handlers,
            **dict.fromkeys(CONTROLLERS, self.implied.scaled),
        }

    # --- start-up ---------------------------------------------------------

    def load(self) -> dict[str, tuple[str | None, dict[str, ObjectVersion]]]:
        """The cluster's ids, and per target the stored position and the objects known at it."""
        with self.database.engine.begin() as db:
            cluster = db.execute(sa.select(KubernetesService.id).where(KubernetesService.name == self.cluster)).scalar()
            if cluster is None:
                raise LookupError(f"KubernetesService {self.cluster!r} does not exist")
            self.cluster_id = self.implied.cluster_id = cluster
            site = db.execute(sa.select(Site.id).order_by(Site.id).limit(1)).scalar()
            if site is None:
                raise LookupError("no Site exists; run `kuberaven db upgrade` to bootstrap one")
            self.implied.site_id = site
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
                "serviceaccounts": table_of(Principal),
                "configmaps": table_of(KubernetesConfigMap),
                "secrets": table_of(KubernetesSecret),
                "services": table_of(Service),
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
        """Apply a batch in one transaction; on any error nothing of it is stored.

        Its events are the transaction's last statement, written in the database's outbox turn, which is let go
        after the COMMIT: the process's outbox rows become visible in the order of their ids (Database says why).
        """
        try:
            with contextlib.ExitStack() as turn, self.database.engine.begin() as db:
                result, pods, now = self._apply(db, items)
                if pods.outbox:
                    turn.enter_context(self.database.outbox_turn)
                    result.statuses = pods.write_outbox(db, now)
        except BaseException:
            self.implied.forget()
            raise
        for status in result.statuses:
            metrics.EVENTS_WRITTEN.labels(status).inc()
        return result

    def _apply(self, db: Connection, items: list[Item]) -> tuple[BatchResult, PodBatch, float]:
        """Every write of the batch but its events (the pods' batch holds them): the result, the batch, its time."""
        now = time.time()
        result = BatchResult()
        pods = PodBatch(self.implied, self.cluster)
        pods.load(db, [item for item in items if item.target == "pods" and item.event is not None])
        positions: dict[str, str] = {}
        for item in items:
            if item.event is not None:
                result.rows += 1
                if item.target == "pods":
                    pods.change(db, item)
                elif item.target == "namespaces":
                    self.objects.namespace(db, item.event, pods)
                else:
                    self.handlers[item.target](db, item.event)
            if item.resource_version is not None:
                positions[item.target] = item.resource_version
        pods.write(db)
        self.implied.write_scaled(db)
        self._save_positions(db, positions)
        return result, pods, now

    def _save_positions(self, db: Connection, positions: dict[str, str]) -> None:
        table = table_of(WatchPosition)
        for target, rv in positions.items():
            updated = db.execute(
                sa.update(table)
                .where(table.c.cluster_id == self.cluster_id, table.c.target == target)
                .values(resource_version=rv)
            ).rowcount
            if not updated:
                db.execute(sa.insert(table).values(cluster_id=self.cluster_id, target=target, resource_version=rv))
