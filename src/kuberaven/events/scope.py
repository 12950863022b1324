"""Which outbox rows a relay publishes now (events/, consulted by relay.py before each step).

    one publisher (no leader election, or SQLite) ── AllClusters ── PublisherLock: every cluster, or none
    per cluster (leader election on PostgreSQL)  ── OwnedClusters ── ClusterLocks: the clusters this replica owns
        ClusterPublishing (component.py, in each owned cluster's components) ──► own() / disown()

events/publisher.py says why per cluster, and how the locks keep one
cluster's events to one relay at a time. OwnedClusters lets a disowned
cluster's lock go only once nothing of that cluster is in flight (its
deliveries acknowledged or failed), so the next owner's relay cannot send
that cluster's rows while ours may still deliver some. With the broker down
that may take long: the lock stays held (the next owner's relay waits for it;
its inventory does not), and it goes with our connection if we are killed.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import sqlalchemy as sa

from .publisher import ClusterLocks, PublisherLock

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Turn:
    """What the relay may do in one step."""

    clusters: frozenset[str] | None  # the clusters whose rows it reads; None: every cluster
    lost: bool = False  # the locks went (their connection broke): drop whatever is in flight
    added: bool = False  # clusters added: read again from the oldest unsent row

    @property
    def publish(self) -> bool:
        return self.clusters is None or bool(self.clusters)


NOTHING = Turn(frozenset())


class InFlight:
    """Outbox ids produced to Kafka and not yet acknowledged, and how many of each cluster."""

    def __init__(self) -> None:
        self.ids: dict[int, str] = {}
        self.by_cluster: Counter[str] = Counter()

    def add(self, outbox_id: int, cluster: str) -> None:
        self.ids[outbox_id] = cluster
        self.by_cluster[cluster] += 1

    def difference_update(self, ids: Iterable[int]) -> None:
        for outbox_id in ids:
            cluster = self.ids.pop(outbox_id, None)
            if cluster is not None:
                self.by_cluster[cluster] -= 1
                if not self.by_cluster[cluster]:
                    del self.by_cluster[cluster]

    def clear(self) -> None:
        self.ids.clear()
        self.by_cluster.clear()

    def __contains__(self, outbox_id: object) -> bool:
        return outbox_id in self.ids

    def __len__(self) -> int:
        return len(self.ids)


class AllClusters:
    """One relay of all the processes on the database publishes every cluster's rows."""

    def __init__(self, engine: sa.Engine) -> None:
        self.lock = PublisherLock(engine)
        self.publishing = False

    def turn(self, in_flight: Mapping[str, int]) -> Turn:
        held = self.lock.held()
        turn = Turn(
            None if held else frozenset(), lost=self.publishing and not held, added=held and not self.publishing
        )
        self.publishing = held
        return turn

    def close(self) -> None:
        self.lock.release()
        self.publishing = False


class OwnedClusters:
    """This relay publishes the rows of the clusters this replica owns, each under its cluster's lock."""

    def __init__(self, engine: sa.Engine) -> None:
        self.locks = ClusterLocks(engine)
        self._guard = threading.Lock()  # own()/disown() come from the event loop, turn() from the relay's thread
        self._wanted: set[str] = set()
        self._leaving: dict[str, threading.Event] = {}
        self._notify: dict[str, list[Callable[[], object]]] = {}

    @property
    def publishing(self) -> bool:
        return bool(self.locks.held)

    def own(self, cluster: str) -> None:
        """This replica owns the cluster now: publish its rows once its lock is ours."""
        with self._guard:
            self._wanted.add(cluster)

    def disown(self, cluster: str, notify: Callable[[], object] | None = None) -> threading.Event:
        """Stop publishing the cluster; the event is set (and ``notify`` called, from the relay's thread) once
        its lock is let go (nothing of it in flight)."""
        with self._guard:
            self._wanted.discard(cluster)
            if notify is not None:
                self._notify.setdefault(cluster, []).append(notify)
            return self._leaving.setdefault(cluster, threading.Event())

    def turn(self, in_flight: Mapping[str, int]) -> Turn:
        if not self.locks.alive():
            self._let_go_all()
            return Turn(frozenset(), lost=True)
        with self._guard:
            wanted = set(self._wanted)
        for cluster in sorted(self.locks.held - wanted):
            if not in_flight.get(cluster):
                self.locks.release(cluster)
                log.info("event relay: no longer publishing the events of cluster %s", cluster)
        self._signal_left()
        added = False
        for cluster in sorted(wanted - self.locks.held):
            if self.locks.take(cluster):
                log.info("event relay: publishing the events of cluster %s", cluster)
                added = True
        return Turn(frozenset(self.locks.held & wanted), added=added)

    def close(self) -> None:
        self._let_go_all()

    def _let_go_all(self) -> None:
        self.locks.close()
        self._signal_left()

    def _signal_left(self) -> None:
        """Wake the disowners whose cluster's lock is no longer held (or never was)."""
        with self._guard:
            left = [c for c in self._leaving if c not in self.locks.held or c in self._wanted]
            notify = [n for c in left for n in self._notify.pop(c, [])]
            for cluster in left:
                self._leaving.pop(cluster).set()
        for callback in notify:
            with contextlib.suppress(RuntimeError):  # the waiter's event loop is gone (the process is ending)
                callback()


Scope = AllClusters | OwnedClusters
