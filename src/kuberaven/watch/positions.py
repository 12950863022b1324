"""Watch positions (watch/): which resourceVersion is safe to resume from.

A position is safe only when every event up to it has been *handled*, not
merely received (Kuryr saved it on receipt and lost events on restart). The
engine numbers events; each watcher's :class:`Watermark` says up to which
number all are done; the position is the resourceVersion at the lowest
watermark, together with the objects as handled at that point (a relist
after a long outage diffs against them).

The inventory persists positions with the rows they produced; other
consumers of the daemon keep theirs in the same table through
:class:`DatabasePositionStore`; :class:`MemoryPositionStore` keeps them in
memory (tests, and engines restarted in-process).
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import sqlalchemy as sa

from ..kube.reflector import ObjectVersion
from ..model.base import table_of
from ..model.cluster import KubernetesService
from ..model.database import Database
from ..model.journal import WatchPosition

POSITIONS = table_of(WatchPosition)


@dataclass
class StoredPosition:
    resource_version: str
    known: dict[str, ObjectVersion] = field(default_factory=dict)


class PositionStore(Protocol):
    """Where the engine keeps watch positions across restarts."""

    # Whether it stores the objects known at the position (a relist diff reports what vanished
    # meanwhile as DELETED); without, a consumer finds what vanished by comparing with the informer.
    keeps_known: bool

    async def load(self, target: str) -> StoredPosition | None: ...

    async def save(self, target: str, resource_version: str, known: Mapping[str, ObjectVersion]) -> None: ...


class MemoryPositionStore:
    """Positions kept in this process (tests, and engines restarted in-process)."""

    keeps_known = True

    def __init__(self) -> None:
        self.positions: dict[str, StoredPosition] = {}

    async def load(self, target: str) -> StoredPosition | None:
        stored = self.positions.get(target)
        return None if stored is None else StoredPosition(stored.resource_version, dict(stored.known))

    async def save(self, target: str, resource_version: str, known: Mapping[str, ObjectVersion]) -> None:
        self.positions[target] = StoredPosition(resource_version, dict(known))


class Watermark:
    """The highest sequence number at or below which every issued one is done.

    Memory is O(outstanding): the issued-but-not-done numbers, in a heap.
    """

    def __init__(self) -> None:
        self.value = 0
        self._issued = 0  # the highest issued
        self._outstanding: list[int] = []  # heap
        self._done: set[int] = set()  # done, but still in the heap behind an older outstanding one

    def issue(self, seq: int) -> None:
        heapq.heappush(self._outstanding, seq)
        self._issued = seq

    def done(self, seqs: list[int]) -> bool:
        """Mark ``seqs`` done; True if the watermark moved."""
        self._done.update(seqs)
        while self._outstanding and self._outstanding[0] in self._done:
            self._done.discard(heapq.heappop(self._outstanding))
        value = self._outstanding[0] - 1 if self._outstanding else self._issued
        moved, self.value = value > self.value, max(self.value, value)
        return moved


class DatabasePositionStore:
    """Positions in the data model's watch_position table, under ``prefix`` (one per consumer of a cluster).

    Only the resourceVersion is kept: a consumer that needs to know what
    vanished while it was stopped compares its own state with the informer's
    known objects once synced (the network translator's garbage collection).
    Positions belong to a cluster of the data model (a KubernetesService row);
    for a name the model does not know, nothing is stored and every start lists.
    """

    keeps_known = False

    def __init__(self, database: Database, cluster: str, prefix: str) -> None:
        self.database = database
        self.cluster = cluster
        self.prefix = prefix

    def _cluster_id(self, db: sa.Connection) -> int | None:
        return db.execute(sa.select(KubernetesService.id).where(KubernetesService.name == self.cluster)).scalar()

    async def load(self, target: str) -> StoredPosition | None:
        def read() -> str | None:
            with self.database.engine.connect() as db:
                query = sa.select(POSITIONS.c.resource_version).where(
                    POSITIONS.c.cluster_id == self._cluster_id(db), POSITIONS.c.target == f"{self.prefix}{target}"
                )
                return db.execute(query).scalar()

        resource_version = await asyncio.to_thread(read)
        return StoredPosition(resource_version) if resource_version else None

    async def save(self, target: str, resource_version: str, known: Mapping[str, ObjectVersion]) -> None:
        def write() -> None:
            with self.database.engine.begin() as db:
                cluster_id = self._cluster_id(db)
                if cluster_id is None:
                    return
                where = (POSITIONS.c.cluster_id == cluster_id, POSITIONS.c.target == f"{self.prefix}{target}")
                updated = db.execute(sa.update(POSITIONS).where(*where).values(resource_version=resource_version))
                if not updated.rowcount:
                    db.execute(
                        sa.insert(POSITIONS).values(
                            cluster_id=cluster_id, target=f"{self.prefix}{target}", resource_version=resource_version
                        )
                    )

        await asyncio.to_thread(write)
