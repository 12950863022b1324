"""The event log (events/): the outbox read back in order, for ``kuberaven events`` and /api/v1/events.

Sent events are trimmed after the retention (``trim_sent``): by the relay,
or by the daemon at start when there is no Kafka and the outbox is the log.

Each event is the Kafka payload plus ``seq`` (its outbox id, the position to
resume from) and ``sent`` (when Kafka acknowledged it, or null).
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from ..model.base import table_of
from ..model.database import Database
from ..model.journal import OutboxEvent

OUTBOX = table_of(OutboxEvent)


def event_document(row: OutboxEvent) -> dict[str, Any]:
    return {"seq": row.id, "sent": row.sent, **row.payload}


def events_after(database: Database, since: int, limit: int) -> list[dict[str, Any]]:
    """At most ``limit`` events with a sequence number above ``since``, oldest first."""
    with database.session() as session:
        rows = session.scalars(
            sa.select(OutboxEvent).where(OutboxEvent.id > since).order_by(OutboxEvent.id).limit(limit)
        )
        return [event_document(row) for row in rows]


def newest_seq(database: Database) -> int:
    with database.session() as session:
        return session.scalar(sa.select(sa.func.max(OutboxEvent.id))) or 0


def trim_sent(database: Database, retention: float, now: float | None = None, *, sent_only: bool = True) -> int:
    """Delete events older than ``retention`` (only sent ones when a relay publishes them)."""
    cutoff = (now or time.time()) - retention
    condition = OUTBOX.c.sent < cutoff if sent_only else OUTBOX.c.created < cutoff
    with database.engine.begin() as db:
        return db.execute(sa.delete(OUTBOX).where(condition)).rowcount
