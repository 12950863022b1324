"""The engine (watch/): shared informers → event queues → translate(), and → keys → reconcile().

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
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..component_status import ComponentStatus
from ..kube.client import KubeClient
from ..kube.reflector import ReflectorOptions
from .controller import Controller
from .feeds import WatcherFeed
from .informers import InformerFactory, Joined
from .positions import PositionStore
from .reconciler import Reconciler, Watch
from .watcher import Watcher, WatchTarget

log = logging.getLogger(__name__)


@dataclass
class EngineOptions:
    concurrency: int = 16  # handlers (reconciles) in flight per queue: the `concurrency` setting, its one default
    retry_initial: float = 0.005
    retry_max: float = 1000.0
    shutdown_timeout: float = 10.0
    position_interval: float = 1.0
    reflector: ReflectorOptions = field(default_factory=ReflectorOptions)


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
            Controller(
                r,
                concurrency=self.options.concurrency,
                retry_initial=self.options.retry_initial,
                retry_max=self.options.retry_max,
            )
            for r in reconcilers
        ]
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
            feed = WatcherFeed(
                self.factory.informer(target),
                target_watchers,
                watches,
                track_known,
                concurrency=self.options.concurrency,
                retry_initial=self.options.retry_initial,
                retry_max=self.options.retry_max,
            )
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

    def status(self) -> list[ComponentStatus]:
        """Each target's backlog (events or keys not handled yet) and each reconciler's queue."""
        targets = [
            ComponentStatus(target=str(feed.target), synced=feed.synced.is_set(), queued=feed.backlog())
            for feed in self.informers
        ]
        return targets + [ComponentStatus(target=f"reconciler {c.name}", queued=len(c)) for c in self.controllers]

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
