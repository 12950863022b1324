"""The Raven engine (raven/): shared informers → keyed queues → translate().

    SharedInformer (informers.py, one per WatchTarget) ──► WatcherFeed ──► KeyedQueue per watcher ──► translate()
                                                               │
                                                               └──► PositionStore (safe resume point)

Watchers with equal targets share one list+watch, and so do the engine and
the daemon's other consumers when the engine is given their InformerFactory.
Each watcher has its own queue, so a failing watcher is retried alone while
the others move on. The engine runs all of them on one asyncio loop and
stops them cleanly.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..kube.client import KubeClient
from ..kube.reflector import ObjectVersion, ReflectorOptions, WatchEvent
from .informers import InformerFactory, Joined, SharedInformer
from .positions import PositionStore, Watermark
from .queue import KeyedQueue
from .watcher import Watcher, WatchTarget

log = logging.getLogger(__name__)
POSITION_SAMPLE = 0.2  # seconds between the event positions kept (a restart may replay up to this much)


@dataclass
class EngineOptions:
    concurrency: int = 16
    retry_initial: float = 0.005
    retry_max: float = 1000.0
    shutdown_timeout: float = 10.0
    position_interval: float = 1.0
    reflector: ReflectorOptions = field(default_factory=ReflectorOptions)


class _WatcherState:
    def __init__(self, watcher: Watcher, queue: KeyedQueue) -> None:
        self.watcher = watcher
        self.queue = queue
        self.watermark = Watermark()
        self.synced_called = False


class WatcherFeed:
    """Fans one shared informer's events out to its watchers' queues and tracks the safe position."""

    def __init__(self, informer: SharedInformer, watchers: list[Watcher], options: EngineOptions, track_known: bool):
        self.informer = informer
        self.target = informer.target
        self.options = options
        self.watchers = watchers
        # Its name as the informer's consumer (several engines may share one informer).
        self.consumer = ",".join(w.name for w in watchers)
        self.states: list[_WatcherState] = []
        self._seq = 0
        self._synced_seq: int | None = None
        self.synced = asyncio.Event()
        # (seq, resourceVersion) of events and bookmarks; relisted objects carry no
        # usable position (only the list's own resourceVersion is one).
        # Samples of (seq, resourceVersion) — bookmarks, and one event per POSITION_SAMPLE seconds — so that
        # a key stuck in its retries does not make this grow with every later event; ``_latest`` is the newest.
        self._positions: deque[tuple[int, str]] = deque()
        self._latest: tuple[int, str] | None = None
        self._sampled = 0.0
        self._outstanding: dict[int, tuple[int, str, ObjectVersion | None]] = {}
        self.handled: dict[str, ObjectVersion] | None = {} if track_known else None
        self.position_dirty = False
        for index, w in enumerate(watchers):
            queue = KeyedQueue(
                w.name,
                self._handler_for(w),
                functools.partial(self._done, index),
                concurrency=w.concurrency or options.concurrency,
                retry_initial=options.retry_initial,
                retry_max=options.retry_max,
            )
            self.states.append(_WatcherState(w, queue))

    @staticmethod
    def _handler_for(w: Watcher):  # type: ignore[no-untyped-def]
        if w.is_async:
            return w.translate

        async def run_in_thread(event: WatchEvent) -> None:
            await asyncio.to_thread(w.translate, event)

        return run_in_thread

    # ReflectorListener
    def on_event(self, event: WatchEvent) -> None:
        self._seq += 1
        seq = self._seq
        meta = event.object["metadata"]
        if not event.relisted:
            self._record_position(seq, meta["resourceVersion"])
        if self.handled is not None:
            version = None if event.type == "DELETED" else ObjectVersion(meta["uid"], meta["resourceVersion"])
            self._outstanding[seq] = (len(self.states), event.key, version)
        key = event.key
        for state in self.states:
            state.watermark.issue(seq)
            state.queue.add(key, event, seq)

    def _record_position(self, seq: int, resource_version: str, bookmark: bool = False) -> None:
        self._latest = (seq, resource_version)
        now = time.monotonic()
        if bookmark or now - self._sampled >= POSITION_SAMPLE:
            self._positions.append(self._latest)
            self._sampled = now

    def on_bookmark(self, resource_version: str) -> None:
        self._seq += 1
        self._record_position(self._seq, resource_version, bookmark=True)
        for i, state in enumerate(self.states):
            state.watermark.issue(self._seq)
            self._done(i, [self._seq])

    async def wait_for_room(self) -> None:
        """Never waits: the keyed queues hold one event per object at most, so they cannot outgrow the cluster."""

    def on_synced(self) -> None:
        self._synced_seq = self._seq
        for i in range(len(self.states)):
            self._check_synced(i)

    def _done(self, index: int, seqs: list[int]) -> None:
        state = self.states[index]
        if state.watermark.done(seqs):
            self.position_dirty = True
        if self.handled is not None:
            for seq in sorted(seqs):
                self._apply_handled(seq)
        self._check_synced(index)

    def _apply_handled(self, seq: int) -> None:
        entry = self._outstanding.get(seq)
        if entry is None or self.handled is None:
            return
        remaining, key, version = entry
        if remaining > 1:
            self._outstanding[seq] = (remaining - 1, key, version)
            return
        del self._outstanding[seq]
        if version is None:
            self.handled.pop(key, None)
        else:
            self.handled[key] = version

    def _check_synced(self, index: int) -> None:
        state = self.states[index]
        if self._synced_seq is None or state.synced_called or state.watermark.value < self._synced_seq:
            return
        state.synced_called = True
        if state.watcher.on_synced is not None:
            result = state.watcher.on_synced()
            if asyncio.iscoroutine(result):
                asyncio.get_running_loop().create_task(result)
        if all(s.synced_called for s in self.states):
            self.synced.set()

    def position(self) -> str | None:
        """The newest resourceVersion at which every watcher has handled everything before."""
        floor = min(s.watermark.value for s in self.states)
        found = None
        if self._latest is not None and self._latest[0] <= floor:
            self._positions.clear()  # everything up to the newest is handled
            self._positions.append(self._latest)
        while self._positions and self._positions[0][0] <= floor:
            found = self._positions.popleft()
        if found is not None:
            # Keep it as the floor for the next call.
            self._positions.appendleft(found)
            return found[1]
        return None

    def stale(self) -> bool:
        return self.informer.stale()


class Engine:
    """Runs watchers: one shared informer per target, one keyed queue per watcher.

    Given the daemon's ``informers`` (one InformerFactory per cluster), the
    engine is one more consumer of their list+watch; without, it has a
    factory of its own and runs it.
    """

    def __init__(
        self,
        client: KubeClient,
        watchers: Iterable[Watcher],
        *,
        positions: PositionStore | None = None,
        options: EngineOptions | None = None,
        informers: InformerFactory | None = None,
        name: str = "engine",
    ) -> None:
        self.client = client
        self.options = options or EngineOptions()
        self.position_store = positions
        self.owns_informers = informers is None
        self.factory = informers or InformerFactory(client, options=self.options.reflector)
        grouped: dict[WatchTarget, list[Watcher]] = {}
        for w in watchers:
            grouped.setdefault(w.target, []).append(w)
        if not grouped:
            raise ValueError("no watchers registered")
        track_known = positions is not None and positions.keeps_known
        self.informers: list[WatcherFeed] = []
        for target, target_watchers in grouped.items():
            feed = WatcherFeed(self.factory.informer(target), target_watchers, self.options, track_known)
            feed.informer.declare(feed.consumer, feed, _declared_fields(target_watchers))
            self.informers.append(feed)
        self.name = name
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False  # joined its informers (it may own no task: shared informers, no positions)
        self._stopping = asyncio.Event()

    async def start(self) -> None:
        """Join every target's informer at the stored position and start the queues (not synced yet)."""
        for feed in self.informers:
            stored = await self.position_store.load(str(feed.target)) if self.position_store else None
            if stored is not None and feed.handled is not None:
                feed.handled.update(stored.known)
            joined = Joined(
                position=stored.resource_version if stored else None,
                known=stored.known if stored else {},
                needs_list=any(w.needs_list for w in feed.watchers),
            )
            feed.informer.join(feed.consumer, joined)
            for state in feed.states:
                state.queue.start()
        if self.owns_informers:
            self._tasks.append(asyncio.create_task(self.factory.run(), name=f"{self.name} informers"))
        if self.position_store is not None:
            self._tasks.append(asyncio.create_task(self._persist_positions(), name="positions"))
        self._started = True

    async def wait_synced(self, timeout: float | None = None) -> None:
        """Until every watcher has handled its initial list."""
        await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in self.informers)), timeout)

    async def wait_idle(self, timeout: float | None = None) -> None:
        """Until no watcher has anything pending (useful in tests and benchmarks)."""
        queues = [s.queue for i in self.informers for s in i.states]
        await asyncio.wait_for(asyncio.gather(*(q.wait_idle() for q in queues)), timeout)

    def handled_initial_state(self) -> bool:
        """Every watcher has handled what its informer listed (or resumed at) when it started."""
        return all(feed.synced.is_set() for feed in self.informers)

    def ready(self) -> bool:
        return self._started and not any(i.stale() for i in self.informers)

    def status(self) -> list[dict[str, object]]:
        """Each target's backlog: what its watchers have not handled yet (the list's progress is the informers')."""
        return [
            {
                "target": str(feed.target),
                "synced": feed.synced.is_set(),
                "queued": sum(len(s.queue) for s in feed.states),
            }
            for feed in self.informers
        ]

    async def run(self) -> None:
        """Start, then run until :meth:`stop` is called."""
        await self.start()
        try:
            await self._stopping.wait()
        finally:
            await self._shutdown()

    def stop(self) -> None:
        self._stopping.set()

    async def _shutdown(self) -> None:
        if self.owns_informers:
            self.factory.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(s.queue.stop(self.options.shutdown_timeout) for i in self.informers for s in i.states))
        await self._save_positions(force=True)
        self._tasks.clear()
        self._started = False

    async def _persist_positions(self) -> None:
        while True:
            await asyncio.sleep(self.options.position_interval)
            try:
                await self._save_positions()
            except Exception:
                log.exception("saving watch positions failed; will retry")

    async def _save_positions(self, force: bool = False) -> None:
        if self.position_store is None:
            return
        for informer in self.informers:
            if not (informer.position_dirty or force):
                continue
            position = informer.position()
            if position is None:
                continue
            informer.position_dirty = False
            await self.position_store.save(str(informer.target), position, informer.handled or {})


def _declared_fields(watchers: list[Watcher]) -> list[str] | None:
    """The union of the fields the watchers read; None (whole objects) if any did not say."""
    if any(w.fields is None for w in watchers):
        return None
    return sorted({f for w in watchers for f in w.fields or ()})
