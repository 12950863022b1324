"""Readiness of the daemon's loops (runtime/, how operators see the engine; served by web/app.py).

/healthz: the process's loop answers. /readyz: 200 only while every
reflector has synced and its stream is alive (not stale), with a JSON body
saying which are not and how far each list got. /metrics: Prometheus text
format. During the initial sync, ``kuberaven run`` logs the same progress
(report_initial_sync) so that a large cluster's first minutes are not silent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Protocol

log = logging.getLogger(__name__)


class Observed(Protocol):
    """What /readyz and the progress log read of a part of the daemon (or of all of them: the supervisor)."""

    def ready(self) -> bool: ...
    def status(self) -> list[dict[str, Any]]: ...


class Component(Observed, Protocol):
    """A loop of the daemon with watches: the engine, the inventory."""

    async def run(self) -> None: ...
    def stop(self) -> None: ...


def readiness(components: Sequence[Observed]) -> tuple[bool, dict[str, Any]]:
    """Ready only while every component is; the body says which watch is not."""
    ready = bool(components) and all(c.ready() for c in components)
    return ready, {"ready": ready, "watches": [w for c in components for w in c.status()]}


def describe_initial_sync(watches: Sequence[dict[str, Any]], elapsed: float) -> str:
    """One log line while the initial lists run: each unsynced watch's progress, then how many are done."""
    syncing = [w for w in watches if w.get("synced") is False]
    synced = sum(1 for w in watches if w.get("synced"))
    parts = [_watch_progress(w) for w in syncing]
    return f"initial sync, {elapsed:.0f}s: {'; '.join(parts)} ({synced} of {synced + len(syncing)} watches synced)"


def _watch_progress(watch: dict[str, Any]) -> str:
    name = f"{watch['component']} {watch['target']}" if "component" in watch else watch["target"]
    if "listed" not in watch:  # a consumer of shared informers: its backlog, not a list of its own
        return f"{name} {watch.get('queued', 0)} queued"
    listed, expected = watch["listed"], watch.get("expected")
    # expected comes from the API server's remainingItemCount; without it (selectors) only the count is known.
    text = f"{name} {listed}/{expected} listed ({100 * listed // expected}%)" if expected else f"{name} {listed} listed"
    return text + (f", {watch['written']} written" if "written" in watch else "")


async def report_initial_sync(components: Sequence[Observed], interval: float = 5.0) -> float:
    """Log progress every ``interval`` until the daemon is ready (/readyz 200), then a summary; returns the seconds.

    Only large clusters take longer than ``interval``; small ones get the summary line alone.
    """
    loop = asyncio.get_running_loop()
    started = loop.time()
    next_report = started + interval
    while True:
        await asyncio.sleep(min(interval, 0.2))
        ready, body = readiness(components)
        watches = [w for w in body["watches"] if "synced" in w]
        now = loop.time()
        if ready:
            lists = lists_made(watches)
            log.info(
                "initial sync done in %.1fs: %d objects listed by %d lists",
                now - started,
                sum(lists.values()),
                len(lists),
                extra={"watches": watches},
            )
            return now - started
        if now >= next_report:
            log.info(describe_initial_sync(watches, now - started), extra={"watches": watches})
            next_report = now + interval


def lists_made(watches: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Objects listed per list made: a shared informer's list counts once, not once per consumer."""
    informers = [w for w in watches if w.get("component") == "informers"]
    return {f"{w.get('cluster')}/{w['target']}": w.get("listed") or 0 for w in informers or watches if "listed" in w}
