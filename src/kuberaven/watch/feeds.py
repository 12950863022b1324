"""Feeds (watch/, inside the engine): one shared informer's events to its watchers' queues and reconcilers.

    SharedInformer.on_event ──► WatcherFeed: seq n ──► each watcher's KeyedQueue (queue.py), Watermark (positions.py)
                                               └──► each reconciler's Watch.keys ──► Controller, Marks (controller.py)
    position() ──► the newest resourceVersion at or below the lowest of them: safe to resume from

The engine (engine.py) makes one feed per target and saves its positions.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import deque

from ..kube.reflector import ObjectVersion, WatchEvent
from .controller import Controller, Marks
from .informers import SharedInformer
from .positions import Watermark
from .queue import KeyedQueue
from .reconciler import Change, Watch
from .watcher import Watcher

POSITION_SAMPLE = 0.2  # seconds between the event positions kept (a restart may replay up to this much)


class _WatcherSink:
    """A watcher on a feed: its event queue and the watermark of the events it handled."""

    def __init__(self, watcher: Watcher, queue: KeyedQueue) -> None:
        self.name = watcher.name
        self.watcher = watcher
        self.queue = queue
        self.watermark = Watermark()
        self.synced_called = False

    def floor(self, latest: int) -> int:
        return self.watermark.value

    def on_synced(self) -> None:
        if self.watcher.on_synced is not None:
            result = self.watcher.on_synced()
            if asyncio.iscoroutine(result):
                asyncio.get_running_loop().create_task(result)


class _ControllerSink:
    """A reconciler's Watch on a feed: events become its keys; its marks say which events are covered."""

    def __init__(self, controller: Controller, watch: Watch, marks: Marks) -> None:
        self.name = controller.name
        self.controller = controller
        self.watch = watch
        self.marks = marks
        self.synced_called = False

    def floor(self, latest: int) -> int:
        return self.marks.floor(latest)

    def on_synced(self) -> None:
        pass


Sink = _WatcherSink | _ControllerSink


class WatcherFeed:
    """Fans one shared informer's events out to its watchers' queues and reconcilers, and tracks the safe position."""

    def __init__(
        self,
        informer: SharedInformer,
        watchers: list[Watcher],
        watches: list[tuple[Controller, Watch]],
        track_known: bool,
        *,
        concurrency: int,
        retry_initial: float,
        retry_max: float,
    ) -> None:
        self.informer = informer
        self.target = informer.target
        self.watchers = watchers
        self.watches = [watch for _, watch in watches]
        # Its name as the informer's consumer (several engines may share one informer).
        self.consumer = ",".join([w.name for w in watchers] + [c.name for c, _ in watches])
        self.sinks: list[Sink] = []
        self._seq = 0
        self._synced_seq: int | None = None
        self.synced = asyncio.Event()
        # Samples of (seq, resourceVersion) — bookmarks, and one event per POSITION_SAMPLE seconds — so that
        # a key stuck in its retries does not make this grow with every later event; ``_latest`` is the newest.
        # Relisted objects carry no usable position (only the list's own resourceVersion is one).
        self._positions: deque[tuple[int, str]] = deque()
        self._latest: tuple[int, str] | None = None
        self._sampled = 0.0
        self._outstanding: dict[int, tuple[int, str, ObjectVersion | None]] = {}
        # The objects as handled at the position: kept for watchers' events, not reconcilers' keys (a key
        # covers no one version), so a feed with reconcilers stores none (garbage collection covers them).
        self.handled: dict[str, ObjectVersion] | None = {} if track_known and not watches else None
        self.saved: str | None = None
        for w in watchers:
            index = len(self.sinks)
            queue = KeyedQueue(
                w.name,
                self._handler_for(w),
                functools.partial(self._done, index),
                concurrency=w.concurrency or concurrency,
                retry_initial=retry_initial,
                retry_max=retry_max,
            )
            self.sinks.append(_WatcherSink(w, queue))
        for controller, watch in watches:
            marks = controller.attach(functools.partial(self._progress, len(self.sinks)))
            self.sinks.append(_ControllerSink(controller, watch, marks))

    @property
    def fields(self) -> list[str] | None:
        """The union of the fields the watchers and the mappings read; None (whole objects) if a watcher did not say."""
        if any(w.fields is None for w in self.watchers):
            return None
        return sorted({f for w in self.watchers for f in w.fields or ()} | {f for w in self.watches for f in w.fields})

    @property
    def needs_list(self) -> bool:
        return any(w.needs_list for w in self.watchers) or any(w.needs_list for w in self.watches)

    @property
    def queues(self) -> list[KeyedQueue]:
        return [s.queue for s in self.sinks if isinstance(s, _WatcherSink)]

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
            self._outstanding[seq] = (len(self.sinks), event.key, version)
        key = event.key
        store = self.informer.store
        change: Change | None = None
        for sink in self.sinks:
            if isinstance(sink, _WatcherSink):
                sink.watermark.issue(seq)
                sink.queue.add(key, event, seq)
                continue
            if change is None:
                previous = store.previous if store is not None else None
                change = Change(event.type, event.object, previous, event.relisted, key)
            sink.controller.offer(sink.watch, sink.marks, seq, change)

    def _record_position(self, seq: int, resource_version: str, bookmark: bool = False) -> None:
        self._latest = (seq, resource_version)
        now = time.monotonic()
        if bookmark or now - self._sampled >= POSITION_SAMPLE:
            self._positions.append(self._latest)
            self._sampled = now

    def on_bookmark(self, resource_version: str) -> None:
        self._seq += 1
        self._record_position(self._seq, resource_version, bookmark=True)
        for i, sink in enumerate(self.sinks):
            if isinstance(sink, _WatcherSink):
                sink.watermark.issue(self._seq)
                self._done(i, [self._seq])

    async def wait_for_room(self) -> None:
        """Never waits: the queues hold one event or key per object at most, so they cannot outgrow the cluster."""

    def on_synced(self) -> None:
        self._synced_seq = self._seq
        for i in range(len(self.sinks)):
            self._check_synced(i)

    def _done(self, index: int, seqs: list[int]) -> None:
        sink = self.sinks[index]
        assert isinstance(sink, _WatcherSink)
        sink.watermark.done(seqs)
        if self.handled is not None:
            for seq in sorted(seqs):
                self._apply_handled(seq)
        self._check_synced(index)

    def _progress(self, index: int) -> None:
        if not self.sinks[index].synced_called:
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
        sink = self.sinks[index]
        if self._synced_seq is None or sink.synced_called or sink.floor(self._seq) < self._synced_seq:
            return
        sink.synced_called = True
        sink.on_synced()
        if all(s.synced_called for s in self.sinks):
            self.synced.set()

    def position(self) -> str | None:
        """The newest resourceVersion at which every watcher and reconciler has handled everything before."""
        floor = min(s.floor(self._seq) for s in self.sinks)
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

    def backlog(self) -> int:
        return sum(len(s.queue) if isinstance(s, _WatcherSink) else len(s.marks) for s in self.sinks)

    def stale(self) -> bool:
        return self.informer.stale()
