"""Marking delivered outbox rows sent (events/, a thread beside the relay's: relay.py hands it the delivered ids).

    OutboxRelay thread ── produce ──► Kafka ── delivery report ──► add(ids) ──► SentMarks thread
                       ◄── take_marked() (off the in-flight set) ◄── UPDATE event_outbox SET sent ─┘

A row is marked sent only after Kafka acknowledged it, in a transaction of
this thread's own, so the relay never waits for the database's write lock
while it could be producing: on SQLite one writer at a time holds the file,
and a cold start's inventory and network writers hold it most of the time.
The relay keeps a delivered row in flight until it is marked (take_marked()),
so it is neither produced again nor counted out of ``max_in_flight`` early,
and a cluster's publisher lock is let go only once its rows are marked.

When marks are written: at most one UPDATE every ``interval`` seconds while
deliveries keep coming (each takes every id delivered so far, so a wait for
the write lock makes the next mark larger, not later), and at once when the
relay says nothing else is in flight (``now``): the last row of a burst is
marked as soon as the broker acknowledged it. A failed mark (the database
down or locked past its busy timeout) keeps its ids and is tried again after
a back-off; until then they stay in flight. A crash before a mark re-sends
those rows on the next start: at least once.

The relay's other routine write, the trim of old sent rows (log.py), runs
here too, every TRIM_EVERY seconds between marks, for the same reason.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

import sqlalchemy as sa

from ..kube.backoff import Backoff
from ..model.base import table_of
from ..model.database import Database
from ..model.journal import OutboxEvent

log = logging.getLogger(__name__)
OUTBOX = table_of(OutboxEvent)
MARK_INTERVAL = 0.5  # seconds between marks while deliveries keep coming
# Ids per UPDATE … WHERE id IN (…): well under SQLite's 32,766 bound parameters.
MARK_CHUNK = 5000
TRIM_EVERY = 60.0  # seconds between trims of old sent rows


class SentMarks:
    """Writes ``sent`` on delivered outbox rows, batched, from a thread of its own."""

    def __init__(
        self,
        database: Database,
        *,
        interval: float = MARK_INTERVAL,
        on_marked: Callable[[], object] | None = None,
        trim: Callable[[], object] | None = None,
    ) -> None:
        self.database = database
        self.interval = interval
        self._on_marked = on_marked  # called from this thread after each mark (the relay's wake())
        self._trim = trim  # the trim of old sent rows, every TRIM_EVERY seconds (first at the start)
        self._trimmed = -TRIM_EVERY  # monotonic time of the last trim
        self._changed = threading.Condition()
        self._due: list[int] = []  # delivered, not yet marked
        self._marked: list[int] = []  # marked, not yet taken by the relay
        self._now = False
        self._closing = False
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None  # the last failed mark's error; None once a mark succeeds
        self.marks = 0  # transactions written

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="outbox-marks", daemon=True)
        self._thread.start()

    def add(self, delivered: Iterable[int], *, now: bool) -> None:
        """Delivered ids to mark; ``now``: nothing else is in flight, mark without waiting for the interval."""
        with self._changed:
            self._due.extend(delivered)
            self._now = self._now or now
            self._changed.notify()

    def take_marked(self) -> list[int]:
        """The ids marked since the last call."""
        with self._changed:
            marked, self._marked = self._marked, []
        return marked

    def close(self, timeout: float = 30.0) -> None:
        """Mark what is due (for up to ``timeout`` seconds), then stop the thread."""
        with self._changed:
            self._closing = True
            self._changed.notify()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("event relay: %d delivered events not marked sent; they are sent again", len(self._due))

    def _run(self) -> None:
        backoff = Backoff(0.5, 10.0)
        last = 0.0
        while True:
            batch = self._next(last)
            if batch is None:
                return
            self._trim_if_due()
            if not batch:
                continue
            try:
                self._write(batch)
            except sa.exc.SQLAlchemyError as error:
                if self._retry_later(batch, error, backoff.next()):
                    continue
                return
            backoff.reset()
            last = time.monotonic()
            self.marks += 1
            with self._changed:
                self._marked.extend(batch)
                self.last_error = None
            if self._on_marked is not None:
                self._on_marked()

    def _next(self, last: float) -> list[int] | None:
        """The next ids to mark, once due ([]: none, the trim is due; None: closing and nothing left)."""
        with self._changed:
            while not self._due:
                if self._closing:
                    return None
                trim_in = self._trimmed + TRIM_EVERY - time.monotonic() if self._trim is not None else None
                if trim_in is not None and trim_in <= 0:
                    return []
                self._changed.wait(trim_in)
            due_at = last + self.interval
            while not (self._now or self._closing) and time.monotonic() < due_at:
                self._changed.wait(due_at - time.monotonic())
            batch, self._due, self._now = self._due, [], False
        return batch

    def _trim_if_due(self) -> None:
        if self._trim is None or time.monotonic() - self._trimmed < TRIM_EVERY:
            return
        self._trimmed = time.monotonic()
        try:
            self._trim()
        except sa.exc.SQLAlchemyError as error:
            log.warning("event relay: trimming sent events failed: %s; again in %.0fs", error, TRIM_EVERY)

    def _write(self, ids: list[int]) -> None:
        sent = time.time()
        with self.database.engine.begin() as db:
            for start in range(0, len(ids), MARK_CHUNK):
                chunk = ids[start : start + MARK_CHUNK]
                db.execute(sa.update(OUTBOX).where(OUTBOX.c.id.in_(chunk)).values(sent=sent))

    def _retry_later(self, batch: list[int], error: Exception, delay: float) -> bool:
        """Keep the ids for the next try after ``delay`` (False: closing, give up: they are sent again)."""
        with self._changed:
            self.last_error = str(error)
            self._due[:0] = batch
            if self._closing:
                log.warning("event relay: %d delivered events not marked sent (%s); sent again", len(self._due), error)
                return False
            log.warning("event relay: marking %d events sent failed: %s; again in %.1fs", len(batch), error, delay)
            retry_at = time.monotonic() + delay
            while not self._closing and time.monotonic() < retry_at:  # close() cuts it short: one more try
                self._changed.wait(retry_at - time.monotonic())
            return True
