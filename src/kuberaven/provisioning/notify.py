"""Change notifications from PostgreSQL (provisioning/): LISTEN for the triggers' NOTIFY.

The triggers (migration 0002) notify channel ``kuberaven_sync`` when a
managed row is inserted, changed by a user (``updated`` moves), cleared for
re-creation by the inventory, or a tombstone is written, from any process. The
listener wakes the sync loop; it reconnects with backoff when the connection
drops. SQLite has no NOTIFY: the loop polls instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from ..kube.backoff import Backoff
from ..model.database import Database
from ..model.schema import NOTIFY_CHANNEL

log = logging.getLogger(__name__)

CHANNEL = NOTIFY_CHANNEL  # the triggers' (model/schema.py, migration 0002)


class ChangeListener:
    def __init__(self, database: Database, on_change: Callable[[], None]) -> None:
        url = database.url.set(drivername="postgresql")
        self._conninfo = url.render_as_string(hide_password=False)
        self._on_change = on_change
        self._stopping = asyncio.Event()
        self.listening = False

    async def run(self) -> None:
        import psycopg  # only on PostgreSQL: SQLite processes never load the driver

        backoff = Backoff(0.5, 30.0)
        while not self._stopping.is_set():
            try:
                await self._listen(backoff)
            except (psycopg.Error, OSError) as error:
                self.listening = False
                log.warning("LISTEN %s lost (%s); polling until it is back", CHANNEL, error)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), timeout=backoff.next())

    async def _listen(self, backoff: Backoff) -> None:
        import psycopg

        async with await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True) as connection:
            await connection.execute(f"LISTEN {CHANNEL}")
            self.listening = True
            backoff.reset()
            self._on_change()  # changes made while not listening
            while not self._stopping.is_set():
                async for _ in connection.notifies(timeout=1.0):
                    self._on_change()

    def stop(self) -> None:
        self._stopping.set()
