"""Readiness of the daemon's loops (runtime/, how operators see the engine; served by web/probes.py).

/healthz: the process's loop answers. /readyz: 200 only while every
reflector has synced and its stream is alive (not stale), with a JSON body
saying which are not and how far each list got (each component's
ComponentStatus entries, component_status.py). /metrics: Prometheus text
format. During the initial sync, ``kuberaven run`` logs the same progress
(report_initial_sync) so that a large cluster's first minutes are not silent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Protocol

from ..component_status import UNSET, ComponentStatus, as_json

log = logging.getLogger(__name__)


class Observed(Protocol):
    """What /readyz and the progress log read of a part of the daemon (or of all of them: the supervisor)."""

    def ready(self) -> bool: ...
    def status(self) -> list[ComponentStatus]: ...


class Component(Observed, Protocol):
    """A loop of the daemon with watches: the engine, the inventory."""

    async def run(self) -> None: ...
    def stop(self) -> None: ...


def readiness(components: Sequence[Observed]) -> tuple[bool, dict[str, Any]]:
    """Ready only while every component is; the body says which watch is not (its "watches" are ComponentStatus
    values: web/probes.py's /readyz encodes them)."""
    ready = all_ready(components)
    return ready, {"ready": ready, "watches": statuses(components)}


def all_ready(components: Sequence[Observed]) -> bool:
    return bool(components) and all(c.ready() for c in components)


def statuses(components: Sequence[Observed]) -> list[ComponentStatus]:
    return [w for c in components for w in c.status()]


def describe_initial_sync(watches: Sequence[ComponentStatus], elapsed: float) -> str:
    """One log line while the initial lists run: each unsynced watch's progress, then how many are done."""
    syncing = [w for w in watches if w.synced is False]
    synced = sum(1 for w in watches if w.synced is True)
    parts = [_watch_progress(w) for w in syncing]
    return f"initial sync, {elapsed:.0f}s: {'; '.join(parts)} ({synced} of {synced + len(syncing)} watches synced)"


def _watch_progress(watch: ComponentStatus) -> str:
    target = "" if watch.target is UNSET else watch.target
    name = target if watch.component is UNSET else f"{watch.component} {target}"
    if watch.listed is UNSET:  # a consumer of shared informers: its backlog, not a list of its own
        return f"{name} {0 if watch.queued is UNSET else watch.queued} queued"
    listed, expected = watch.listed, watch.expected
    # expected comes from the API server's remainingItemCount; without it (selectors) only the count is known.
    if expected is UNSET or not expected:
        text = f"{name} {listed} listed"
    else:
        text = f"{name} {listed}/{expected} listed ({100 * listed // expected}%)"
    return text + ("" if watch.written is UNSET else f", {watch.written} written")


async def report_initial_sync(components: Sequence[Observed], interval: float = 5.0) -> float:
    """Log progress every ``interval`` until the daemon is ready (/readyz 200), then a summary; returns the seconds.

    Only large clusters take longer than ``interval``; small ones get the summary line alone.
    """
    loop = asyncio.get_running_loop()
    started = loop.time()
    next_report = started + interval
    while True:
        await asyncio.sleep(min(interval, 0.2))
        ready = all_ready(components)
        watches = [w for w in statuses(components) if w.synced is not UNSET]
        now = loop.time()
        if ready:
            lists = lists_made(watches)
            log.info(
                "initial sync done in %.1fs: %d objects listed by %d lists",
                now - started,
                sum(lists.values()),
                len(lists),
                extra={"watches": as_json(watches)},
            )
            return now - started
        if now >= next_report:
            log.info(describe_initial_sync(watches, now - started), extra={"watches": as_json(watches)})
            next_report = now + interval


def lists_made(watches: Sequence[ComponentStatus]) -> dict[str, int]:
    """Objects listed per list made: a shared informer's list counts once, not once per consumer."""
    informers = [w for w in watches if w.component == "informers"]
    return {
        f"{None if w.cluster is UNSET else w.cluster}/{w.target}": w.listed
        for w in informers or watches
        if w.listed is not UNSET
    }
