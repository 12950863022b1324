"""History's upkeep (runtime/): recording on or off as the settings say, and pruning, under the supervisor.

    daemon.py ──► HistoryKeeper.run(): model/history.set_recording(enabled)   (once, at start)
                     └─ every prune_interval: model/history.prune(now - retention), in batches, in a thread

The triggers (model/history.py) record every change as it is written; this
component never touches the write path. Pruning deletes at most
``prune_batch`` versions per transaction, so writers wait for no long lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge, Gt

from ..component_status import ComponentStatus
from ..model.base import utcnow
from ..model.database import Database
from ..model.history import prune, set_recording

log = logging.getLogger(__name__)
WEEK = 7 * 24 * 3600.0


@dataclass(frozen=True)
class HistoryOptions:
    """The model's history: settings ``history_enabled``, ``history_retention``, ``history_prune_interval``."""

    enabled: bool = True  # false: the triggers are dropped (nothing recorded; what was kept stays until pruned)
    retention: Annotated[float, Gt(0)] = WEEK  # seconds a version is kept after it ended
    prune_interval: Annotated[float, Gt(0)] = 600.0  # seconds between pruning passes
    prune_batch: Annotated[int, Ge(1)] = 1000  # versions deleted per transaction


class HistoryKeeper:
    """Sets recording on or off at start, then prunes versions older than the retention, periodically."""

    def __init__(self, database: Database, options: HistoryOptions | None = None) -> None:
        self.database = database
        self.options = options or HistoryOptions()
        self._stopping = asyncio.Event()
        self.passes = 0
        self.pruned = 0
        self.last_error: str | None = None

    async def run(self) -> None:
        self._stopping.clear()
        recording_set = False
        while not self._stopping.is_set():
            try:
                if not recording_set:
                    if await asyncio.to_thread(self._set_recording):
                        log.info("history recording %s", "started" if self.options.enabled else "stopped")
                    recording_set = True
                self.pruned += await asyncio.to_thread(self.prune_once)
                self.last_error = None
            except Exception as error:  # the database is down: try again at the next pass, no crash
                self.last_error = str(error)
                log.error("history upkeep failed: %s", error)
            self.passes += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=self.options.prune_interval)

    def _set_recording(self) -> bool:
        with self.database.engine.begin() as db:
            return set_recording(db, self.options.enabled)

    def prune_once(self, now: dt.datetime | None = None) -> int:
        """One pass: every version that ended more than ``retention`` ago goes; how many went."""
        cutoff = (now or utcnow()) - dt.timedelta(seconds=self.options.retention)
        removed = prune(self.database.engine, cutoff, self.options.prune_batch)
        if removed:
            log.info("history: pruned %d versions that ended before %s", removed, cutoff.isoformat())
        return removed

    def stop(self) -> None:
        self._stopping.set()

    def ready(self) -> bool:
        return True  # pruning is upkeep: the daemon serves without it

    def status(self) -> list[ComponentStatus]:
        return [
            ComponentStatus(
                component="history",
                recording=self.options.enabled,
                passes=self.passes,
                pruned=self.pruned,
                last_error=self.last_error,
            )
        ]
