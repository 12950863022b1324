"""Which replica's relay publishes (events/, consulted by relay.py before each step).

On PostgreSQL several replicas share one outbox. Exactly one relay publishes
at a time: the one holding a session-level advisory lock
(``pg_try_advisory_lock``) on a connection of its own; the others stand by and
try again every few seconds. One publisher, not rows claimed per batch
(``FOR UPDATE SKIP LOCKED``), because the relay keeps thousands of rows in
flight across transactions and in outbox order per pod: claims would need a
claim column and a per-pod ordering rule between relays, while one Kafka
producer already outruns what the inventories write. The lock dies with its
connection, so a relay whose process is killed hands over as soon as
PostgreSQL sees the socket close, without waiting for any lease. A relay
whose connection breaks while its process lives finds out within
``check_every`` seconds and drops what it had queued; until then it may still
send what it had read, so one pod's events can repeat out of order once, in
that window (Kafka offers no fencing to an idempotent producer).

With leader election (replicas sharing the clusters through Leases), the
one publisher became the next shared cost as replicas are added: measured,
one relay sends about 4,500 events/s on one core (0.08 ms of CPU an event)
while a replica's inventory writes about 1,200 pod rows/s, so past three or
four replicas the one publisher would bound a cold start. There each replica
publishes the rows of the clusters it owns: ClusterLocks takes one advisory
lock per cluster (the cluster's name hashed to 64 bits), on one connection
of its own, for the clusters whose Lease it holds, and lets one go only after
its relay has stopped sending that cluster (nothing of it in flight). Two
relays therefore never send one cluster's events at once, and the new
owner starts from that cluster's oldest unsent row: per-pod order is kept
across a hand-over as with the one publisher. Both kinds also exclude each
other: the one publisher holds PUBLISHER_LOCK_KEY exclusively, per-cluster
publishers hold it shared.

SQLite serves one process: its relay always publishes.
"""

from __future__ import annotations

import hashlib
import logging
import time

import sqlalchemy as sa

log = logging.getLogger(__name__)
# An arbitrary 64-bit key for pg_advisory_lock, the same in every replica ("kuberave" in ASCII).
PUBLISHER_LOCK_KEY = 0x6B75_6265_7261_7665


class PublisherLock:
    """Held by at most one relay of all the processes on one PostgreSQL database."""

    def __init__(self, engine: sa.Engine, check_every: float = 2.0) -> None:
        self.engine = engine
        self.shared = engine.dialect.name == "postgresql"
        self.check_every = check_every  # seconds between checks that the holding connection is alive
        self._connection: sa.Connection | None = None
        self._checked_at = 0.0

    def held(self) -> bool:
        """Whether this relay may publish now: take the lock if free, check the connection that holds it."""
        if not self.shared:
            return True
        try:
            if self._connection is None:
                return self._try_take()
            if time.monotonic() - self._checked_at >= self.check_every:
                self._connection.execute(sa.text("SELECT 1"))
                self._connection.commit()
                self._checked_at = time.monotonic()
            return True
        except sa.exc.DBAPIError as error:
            log.warning("event relay: lost the publisher lock's connection: %s", error)
            self._drop()
            return False

    def _try_take(self) -> bool:
        connection = self.engine.connect()
        try:
            taken = connection.execute(sa.select(sa.func.pg_try_advisory_lock(PUBLISHER_LOCK_KEY))).scalar_one()
            connection.commit()  # a session lock outlives the transaction; an idle transaction would not be welcome
        except BaseException:
            connection.invalidate()
            connection.close()
            raise
        if not taken:
            connection.close()
            return False
        self._connection = connection
        self._checked_at = time.monotonic()
        log.info("event relay: this replica publishes the outbox (publisher lock taken)")
        return True

    def release(self) -> None:
        if self._connection is None:
            return
        try:
            self._connection.execute(sa.select(sa.func.pg_advisory_unlock(PUBLISHER_LOCK_KEY)))
            self._connection.commit()
        except sa.exc.DBAPIError as error:
            log.debug("event relay: unlock failed (the lock went with its connection): %s", error)
        self._drop()

    def _drop(self) -> None:
        """Close the connection for good: a pooled connection would keep a session lock."""
        if self._connection is not None:
            self._connection.invalidate()
            self._connection.close()
            self._connection = None


def cluster_lock_key(cluster: str) -> int:
    """The advisory lock of one cluster's events: its name hashed to a signed 64-bit key."""
    digest = hashlib.blake2b(f"kuberaven publisher {cluster}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class ClusterLocks:
    """The per-cluster publisher locks one relay holds, on one PostgreSQL connection of their own."""

    def __init__(self, engine: sa.Engine, check_every: float = 2.0) -> None:
        self.engine = engine
        self.check_every = check_every
        self.held: set[str] = set()
        self._connection: sa.Connection | None = None
        self._checked_at = 0.0

    def take(self, cluster: str) -> bool:
        """Take the cluster's lock if free (and the shared one that keeps a one-publisher relay out)."""
        if cluster in self.held:
            return True
        connection = self._connect()
        if connection is None:
            return False
        taken = self._call(connection, sa.func.pg_try_advisory_lock(cluster_lock_key(cluster)))
        if taken:
            self.held.add(cluster)
        return bool(taken)

    def release(self, cluster: str) -> None:
        if cluster not in self.held or self._connection is None:
            return
        self.held.discard(cluster)
        self._call(self._connection, sa.func.pg_advisory_unlock(cluster_lock_key(cluster)))

    def alive(self) -> bool:
        """Whether the locks still stand: the connection answers (checked every ``check_every`` seconds)."""
        if self._connection is None:
            return True  # nothing held, nothing to lose
        if time.monotonic() - self._checked_at < self.check_every:
            return True
        try:
            self._call(self._connection, sa.literal(1))
        except sa.exc.DBAPIError as error:
            log.warning("event relay: lost the publisher locks' connection: %s", error)
            self.close()
            return False
        self._checked_at = time.monotonic()
        return True

    def close(self) -> None:
        """Let every lock go (with the connection: a pooled connection would keep session locks)."""
        self.held.clear()
        if self._connection is not None:
            self._connection.invalidate()
            self._connection.close()
            self._connection = None

    def _connect(self) -> sa.Connection | None:
        if self._connection is not None:
            return self._connection
        connection = self.engine.connect()
        try:
            shared = self._call(connection, sa.func.pg_try_advisory_lock_shared(PUBLISHER_LOCK_KEY))
        except BaseException:
            connection.invalidate()
            connection.close()
            raise
        if not shared:
            log.info("event relay: a one-publisher relay holds the outbox; waiting for it")
            connection.close()
            return None
        self._connection, self._checked_at = connection, time.monotonic()
        return connection

    @staticmethod
    def _call(connection: sa.Connection, what: sa.ColumnElement[object]) -> object:
        value = connection.execute(sa.select(what)).scalar_one()
        connection.commit()  # session locks outlive the transaction; an idle transaction would not be welcome
        return value
