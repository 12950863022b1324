"""The event log (events/): the outbox read back in order, for ``kuberaven events`` and /api/v1/events.

Each event is the Kafka payload plus ``seq`` (its outbox id, the position to
resume from) and ``sent`` (when Kafka acknowledged it, or null).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from ..model.database import Database
from ..model.tables import OutboxEvent


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
