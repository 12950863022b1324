"""Watch positions (raven/): which resourceVersion is safe to resume from.

A position is safe only when every event up to it has been *handled*, not
merely received (Kuryr saved it on receipt and lost events on restart). The
engine numbers events; each watcher's :class:`Watermark` says up to which
number all are done; the position is the resourceVersion at the lowest
watermark, together with the objects as handled at that point (a relist
after a long outage diffs against them).

The data model persists positions with the rows they produced; for other
callers :class:`MemoryPositionStore` keeps them in memory.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..kube.reflector import ObjectVersion


@dataclass
class StoredPosition:
    resource_version: str
    known: dict[str, ObjectVersion] = field(default_factory=dict)


class PositionStore(Protocol):
    """Where the engine keeps watch positions across restarts."""

    async def load(self, target: str) -> StoredPosition | None: ...

    async def save(self, target: str, resource_version: str, known: Mapping[str, ObjectVersion]) -> None: ...


class MemoryPositionStore:
    """Positions kept in this process (tests, and engines restarted in-process)."""

    def __init__(self) -> None:
        self.positions: dict[str, StoredPosition] = {}

    async def load(self, target: str) -> StoredPosition | None:
        stored = self.positions.get(target)
        return None if stored is None else StoredPosition(stored.resource_version, dict(stored.known))

    async def save(self, target: str, resource_version: str, known: Mapping[str, ObjectVersion]) -> None:
        self.positions[target] = StoredPosition(resource_version, dict(known))


class Watermark:
    """The highest sequence number at or below which every issued one is done."""

    def __init__(self) -> None:
        self.value = 0
        self._issued: deque[int] = deque()
        self._done: set[int] = set()

    def issue(self, seq: int) -> None:
        self._issued.append(seq)

    def done(self, seqs: list[int]) -> bool:
        """Mark ``seqs`` done; True if the watermark moved."""
        self._done.update(seqs)
        moved = False
        while self._issued and self._issued[0] in self._done:
            self.value = self._issued.popleft()
            self._done.discard(self.value)
            moved = True
        return moved
