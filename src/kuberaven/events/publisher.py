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

SQLite serves one process: its relay always publishes.
"""

from __future__ import annotations

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
