"""The Raven engine (raven/): shared informers → event queues → translate(), and → keys → reconcile().

    SharedInformer (informers.py, one per WatchTarget) ──► WatcherFeed ──► KeyedQueue per watcher ──► translate()
                                                               │       └─► Watch.keys ──► Controller per
                                                               │           reconciler (controller.py) ──► reconcile(key)
                                                               └──► PositionStore (safe resume point)

Watchers and reconcilers' watches of equal targets share one list+watch,
and so do the engine and the daemon's other consumers when the engine is
given their InformerFactory. Each watcher has its own queue and each
reconciler its own controller, so a failing one is retried alone while the
others move on. A feed's safe position is the lowest of what its watchers
have handled (queue.py's seqs) and what its reconcilers have covered
(controller.py's Marks). The engine runs all of them on one asyncio loop and
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
from .controller import Controller, Marks
from .informers import InformerFactory, Joined, SharedInformer
from .positions import PositionStore, Watermark
from .queue import KeyedQueue
from .reconciler import Change, Reconciler, Watch
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
        self, informer: SharedInformer, watchers: list[Watcher], watches: list[tuple[Controller, Watch]],
        options: EngineOptions, track_known: bool,
    ) -> None:  # fmt: skip
        self.informer = informer
        self.target = informer.target
        self.options = options
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
                w.name, self._handler_for(w), functools.partial(self._done, index),
                concurrency=w.concurrency or options.concurrency, retry_initial=options.retry_initial,
                retry_max=options.retry_max,
            )  # fmt: skip
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
                change = Change(event.type, event.object, previous, event.relisted)
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


class Engine:
    """Runs watchers and reconcilers: one shared informer per target, an event queue per watcher, a controller
    (work queue of keys) per reconciler.

    Given the daemon's ``informers`` (one InformerFactory per cluster), the
    engine is one more consumer of their list+watch; without, it has a
    factory of its own and runs it.
    """

    def __init__(
        self,
        client: KubeClient,
        watchers: Iterable[Watcher] = (),
        *,
        reconcilers: Iterable[Reconciler] = (),
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
        self.controllers = [
            Controller(r, concurrency=self.options.concurrency, retry_initial=self.options.retry_initial,
                       retry_max=self.options.retry_max)
            for r in reconcilers
        ]  # fmt: skip
        grouped: dict[WatchTarget, tuple[list[Watcher], list[tuple[Controller, Watch]]]] = {}
        for w in watchers:
            grouped.setdefault(w.target, ([], []))[0].append(w)
        for controller in self.controllers:
            for watch in controller.reconciler.watches:
                grouped.setdefault(watch.target, ([], []))[1].append((controller, watch))
        if not grouped:
            raise ValueError("no watchers or reconcilers registered")
        track_known = positions is not None and positions.keeps_known
        self.informers: list[WatcherFeed] = []
        for target, (target_watchers, watches) in grouped.items():
            feed = WatcherFeed(self.factory.informer(target), target_watchers, watches, self.options, track_known)
            feed.informer.declare(feed.consumer, feed, feed.fields)
            self.informers.append(feed)
        self.name = name
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False  # joined its informers (it may own no task: shared informers, no positions)
        self._stopping = asyncio.Event()

    def controller(self, name: str) -> Controller:
        """The controller of the reconciler named ``name`` (to queue keys no event brings)."""
        for controller in self.controllers:
            if controller.name == name:
                return controller
        raise KeyError(f"no reconciler named {name!r}")

    async def start(self) -> None:
        """Join every target's informer at the stored position and start the queues (not synced yet)."""
        for feed in self.informers:
            stored = await self.position_store.load(str(feed.target)) if self.position_store else None
            if stored is not None and feed.handled is not None:
                feed.handled.update(stored.known)
            joined = Joined(
                position=stored.resource_version if stored else None,
                known=stored.known if stored and feed.handled is not None else {},
                needs_list=feed.needs_list,
            )
            feed.saved = joined.position
            feed.informer.join(feed.consumer, joined)
            for queue in feed.queues:
                queue.start()
        for controller in self.controllers:
            controller.start()
        if self.owns_informers:
            self._tasks.append(asyncio.create_task(self.factory.run(), name=f"{self.name} informers"))
        if self.position_store is not None:
            self._tasks.append(asyncio.create_task(self._persist_positions(), name="positions"))
        self._started = True

    async def wait_synced(self, timeout: float | None = None) -> None:
        """Until every watcher and reconciler has handled its initial list."""
        await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in self.informers)), timeout)

    async def wait_idle(self, timeout: float | None = None) -> None:
        """Until no watcher or reconciler has anything pending (useful in tests and benchmarks)."""
        waits = [q.wait_idle() for i in self.informers for q in i.queues] + [c.wait_idle() for c in self.controllers]
        await asyncio.wait_for(asyncio.gather(*waits), timeout)

    def handled_initial_state(self) -> bool:
        """Every watcher has handled what its informer listed (or resumed at) when it started."""
        return all(feed.synced.is_set() for feed in self.informers)

    def ready(self) -> bool:
        return self._started and not any(i.stale() for i in self.informers)

    def status(self) -> list[dict[str, object]]:
        """Each target's backlog (events or keys not handled yet) and each reconciler's queue."""
        targets: list[dict[str, object]] = [
            {"target": str(feed.target), "synced": feed.synced.is_set(), "queued": feed.backlog()}
            for feed in self.informers
        ]
        return targets + [{"reconciler": c.name, "queued": len(c)} for c in self.controllers]

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
        timeout = self.options.shutdown_timeout
        await asyncio.gather(
            *(q.stop(timeout) for i in self.informers for q in i.queues), *(c.stop(timeout) for c in self.controllers)
        )
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
        for feed in self.informers:
            position = feed.position()
            if position is None or (position == feed.saved and not force):
                continue
            await self.position_store.save(str(feed.target), position, feed.handled or {})
            feed.saved = position
