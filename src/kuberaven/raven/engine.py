"""The Raven engine (raven/): Reflectors → keyed queues → translate().

    Reflector (one per WatchTarget) ──► SharedInformer ──► KeyedQueue per watcher ──► translate()
                                               │
                                               └──► PositionStore (safe resume point)

Watchers with equal targets share one list+watch. Each watcher has its own
queue, so a failing watcher is retried alone while the others move on. The
engine runs all of them on one asyncio loop and stops them cleanly.
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
from ..kube.reflector import ObjectVersion, Reflector, ReflectorOptions, WatchEvent
from ..kube.resources import Discovery
from .positions import PositionStore, Watermark
from .queue import KeyedQueue
from .watcher import Watcher, WatchTarget

log = logging.getLogger(__name__)


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


class SharedInformer:
    """Fans one Reflector's events out to its watchers' queues and tracks the safe position."""

    def __init__(self, target: WatchTarget, watchers: list[Watcher], options: EngineOptions, track_known: bool):
        self.target = target
        self.options = options
        self.reflector: Reflector | None = None
        self.states: list[_WatcherState] = []
        self._seq = 0
        self._synced_seq: int | None = None
        self.synced = asyncio.Event()
        # (seq, resourceVersion) of events and bookmarks; relisted objects carry no
        # usable position (only the list's own resourceVersion is one).
        self._positions: deque[tuple[int, str]] = deque()
        self._outstanding: dict[int, tuple[int, str, ObjectVersion | None]] = {}
        self.handled: dict[str, ObjectVersion] | None = {} if track_known else None
        self.position_dirty = False
        for index, w in enumerate(watchers):
            queue = KeyedQueue(
                w.name,
                self._handler_for(w),
                functools.partial(self._done, index),
                concurrency=options.concurrency,
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
            self._positions.append((seq, meta["resourceVersion"]))
        if self.handled is not None:
            version = None if event.type == "DELETED" else ObjectVersion(meta["uid"], meta["resourceVersion"])
            self._outstanding[seq] = (len(self.states), event.key, version)
        key = event.key
        for state in self.states:
            state.watermark.issue(seq)
            state.queue.add(key, event, seq)

    def on_bookmark(self, resource_version: str) -> None:
        self._seq += 1
        self._positions.append((self._seq, resource_version))
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
        while self._positions and self._positions[0][0] <= floor:
            found = self._positions.popleft()
        if found is not None:
            # Keep it as the floor for the next call.
            self._positions.appendleft(found)
            return found[1]
        return None

    def stale(self) -> bool:
        return self.reflector is None or not self.reflector.synced or self.reflector.stale()


class Engine:
    """Runs watchers: one Reflector per target, one keyed queue per watcher."""

    def __init__(
        self,
        client: KubeClient,
        watchers: Iterable[Watcher],
        *,
        positions: PositionStore | None = None,
        options: EngineOptions | None = None,
    ) -> None:
        self.client = client
        self.options = options or EngineOptions()
        self.position_store = positions
        self.discovery = Discovery(client)
        grouped: dict[WatchTarget, list[Watcher]] = {}
        for w in watchers:
            grouped.setdefault(w.target, []).append(w)
        if not grouped:
            raise ValueError("no watchers registered")
        self.informers = [SharedInformer(t, ws, self.options, positions is not None) for t, ws in grouped.items()]
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()

    async def start(self) -> None:
        """Resolve every target and start watching (returns once started, not synced)."""
        for informer in self.informers:
            target = informer.target
            resource = await self.discovery.resolve(target.api_version, target.kind)
            stored = await self.position_store.load(str(target)) if self.position_store else None
            if stored is not None and informer.handled is not None:
                informer.handled.update(stored.known)
            informer.reflector = Reflector(
                self.client,
                resource,
                informer,
                namespace=target.namespace,
                label_selector=target.label_selector,
                field_selector=target.field_selector,
                resource_version=stored.resource_version if stored else None,
                known=stored.known if stored else None,
                options=self.options.reflector,
            )
            for state in informer.states:
                state.queue.start()
            self._tasks.append(asyncio.create_task(informer.reflector.run(), name=f"reflector {target}"))
        if self.position_store is not None:
            self._tasks.append(asyncio.create_task(self._persist_positions(), name="positions"))

    async def wait_synced(self, timeout: float | None = None) -> None:
        """Until every watcher has handled its initial list."""
        await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in self.informers)), timeout)

    async def wait_idle(self, timeout: float | None = None) -> None:
        """Until no watcher has anything pending (useful in tests and benchmarks)."""
        queues = [s.queue for i in self.informers for s in i.states]
        await asyncio.wait_for(asyncio.gather(*(q.wait_idle() for q in queues)), timeout)

    def ready(self) -> bool:
        return bool(self._tasks) and not any(i.stale() for i in self.informers)

    def status(self) -> list[dict[str, object]]:
        now = time.monotonic()
        return [
            {
                "target": str(i.target),
                "synced": bool(i.reflector and i.reflector.synced),
                "connected": bool(i.reflector and i.reflector.connected),
                "idle_seconds": round(now - i.reflector.last_activity, 1) if i.reflector else None,
                "queued": sum(len(s.queue) for s in i.states),
                **(i.reflector.progress() if i.reflector else {}),
            }
            for i in self.informers
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
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(s.queue.stop(self.options.shutdown_timeout) for i in self.informers for s in i.states))
        await self._save_positions(force=True)
        self._tasks.clear()

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
            if position is None or informer.handled is None:
                continue
            informer.position_dirty = False
            await self.position_store.save(str(informer.target), position, informer.handled)
