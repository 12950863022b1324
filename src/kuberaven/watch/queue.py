"""The event queue (watch/, between the informers and watchers' translate()): events in order per object.

For consumers that need each event, in order (user watchers on the engine);
the network translation's reconcilers take keys instead (workqueue.py).
client-go's workqueue semantics, per watcher, with events instead of keys:

* one object's events are handled in order and never concurrently;
* different objects are handled concurrently, up to ``concurrency``;
* events queued for an object that is busy or waiting collapse to the
  newest state (ADDED then MODIFIED stays ADDED, with the newest object);
  events of a *different* uid under the same name (deleted and recreated)
  never collapse, so a DELETED is never lost;
* a failing handler is retried per object with backoff 5 ms → 1000 s while
  other objects keep flowing (kube/backoff.py's KeyedBackoff, as the work
  queue's); newer events merge into the retried one.

Every event carries a sequence number; ``on_done`` reports which ones were
handled so that the engine can tell which watch position is safe to keep.
An event collapsed into a newer one is reported at once: replaying from any
position before the newer one delivers the newer state. So a queue holds at
most one event per object (per uid) however fast an object changes or
however long its retries wait: memory O(objects), not O(events).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .. import metrics
from ..kube.backoff import KeyedBackoff
from ..kube.reflector import WatchEvent
from .workqueue import Waiting

__all__ = ["Handler", "KeyedQueue", "Waiting"]

log = logging.getLogger(__name__)

Handler = Callable[[WatchEvent], Awaitable[None]]


@dataclass(slots=True)
class _Item:
    event: WatchEvent
    seqs: list[int]


def _uid(event: WatchEvent) -> str | None:
    uid: str | None = event.object.get("metadata", {}).get("uid")  # the API server's type: a string when set
    return uid


def _merge(items: list[_Item], new: _Item) -> list[int]:
    """Append ``new`` to a key's pending items, collapsing into the last one if same uid; the seqs superseded."""
    if items:
        last = items[-1]
        if _uid(last.event) == _uid(new.event) and last.event.type != "DELETED":
            event = new.event
            kind = "ADDED" if last.event.type == "ADDED" and event.type == "MODIFIED" else event.type
            items[-1] = _Item(dataclasses.replace(event, type=kind, received=last.event.received), new.seqs)
            return last.seqs
    items.append(new)
    return []


class KeyedQueue:
    """Per-object ordered, collapsing, rate-limited dispatch of events to one handler."""

    def __init__(
        self,
        name: str,
        handler: Handler,
        on_done: Callable[[list[int]], None],
        *,
        concurrency: int,
        retry_initial: float = 0.005,
        retry_max: float = 1000.0,
    ) -> None:
        self.name = name
        self._handler = handler
        self._on_done = on_done
        self._concurrency = concurrency
        self._backoff = KeyedBackoff(retry_initial, retry_max)
        self._pending: dict[str, list[_Item]] = {}
        self._ready: asyncio.Queue[str] = asyncio.Queue()
        self._busy: set[str] = set()
        self._delayed: dict[str, asyncio.TimerHandle] = {}
        self._workers: list[asyncio.Task[None]] = []
        self._stopping = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._depth = metrics.QUEUE_DEPTH.labels(name)
        self._latency = metrics.QUEUE_LATENCY.labels(name)
        self._duration = metrics.HANDLER_LATENCY.labels(name)
        self._errors = metrics.HANDLER_ERRORS.labels(name)
        self._retries = metrics.RETRIES.labels(name)
        self._lag = metrics.LAG.labels(name)

    def __len__(self) -> int:
        return len(self._pending) + len(self._busy)

    def failures(self, key: str) -> int:
        return self._backoff.failures(key)

    def add(self, key: str, event: WatchEvent, seq: int) -> None:
        items = self._pending.get(key)
        if items is None:
            self._pending[key] = [_Item(event, [seq])]
            if key not in self._busy and key not in self._delayed:
                self._ready.put_nowait(key)
        else:
            superseded = _merge(items, _Item(event, [seq]))
            if superseded:
                self._on_done(superseded)
        self._idle.clear()
        self._depth.set(len(self._pending))

    def start(self) -> None:
        """Workers taking keys; after a stop (the supervisor restarting a crashed engine), the keys still pending
        are taken again, those that waited for a retry at once."""
        self._stopping = False
        for key in list(self._delayed):
            self._release(key)
        self._workers = [asyncio.create_task(self._work(), name=f"{self.name}-{i}") for i in range(self._concurrency)]

    async def stop(self, timeout: float) -> None:
        """Stop taking work; give handlers in flight ``timeout`` seconds to finish."""
        self._stopping = True  # a busy worker returns after its handler instead of taking the next key
        for handle in self._delayed.values():
            handle.cancel()
        idle = [w for w in self._workers if not self._busy_task(w)]
        for worker in idle:
            worker.cancel()
        busy = [w for w in self._workers if w not in idle]
        if busy:
            _, still_running = await asyncio.wait(busy, timeout=timeout)
            for worker in still_running:
                log.warning("%s: handler still running after %.0fs, cancelling", self.name, timeout)
                worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)

    @staticmethod
    def _busy_task(task: asyncio.Task[None]) -> bool:
        return getattr(task, "kuberaven_busy", False)

    async def wait_idle(self) -> None:
        """Until nothing is pending, busy or waiting for a retry."""
        await self._idle.wait()

    async def _work(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        while not self._stopping:
            key = await self._ready.get()
            items = self._pending.pop(key, None)
            if not items:
                continue
            self._busy.add(key)
            task.kuberaven_busy = True  # type: ignore[attr-defined]
            try:
                await self._handle(key, items)
            finally:
                task.kuberaven_busy = False  # type: ignore[attr-defined]
                self._busy.discard(key)
                self._after(key)

    async def _handle(self, key: str, items: list[_Item]) -> None:
        for index, item in enumerate(items):
            started = time.time()
            self._latency.observe(max(0.0, started - item.event.received))
            self._lag.set(max(0.0, started - item.event.received))
            try:
                await self._handler(item.event)
            except asyncio.CancelledError:
                self._requeue(key, items[index:])
                raise
            except Waiting as waiting:
                log.debug("%s: %s waits: %s", self.name, key, waiting)
                self._requeue(key, items[index:])
                self._schedule_retry(key)
                return
            except Exception:
                self._errors.inc()
                log.exception("%s: handler failed for %s (%s)", self.name, key, item.event.type)
                self._requeue(key, items[index:])
                self._schedule_retry(key)
                return
            finally:
                self._duration.observe(time.time() - started)
            self._on_done(item.seqs)
        self._backoff.forget(key)

    def _requeue(self, key: str, unfinished: list[_Item]) -> None:
        for item in self._pending.pop(key, []):
            superseded = _merge(unfinished, item)
            if superseded:
                self._on_done(superseded)
        self._pending[key] = unfinished

    def _schedule_retry(self, key: str) -> None:
        delay = self._backoff.when(key)
        self._retries.inc()
        self._delayed[key] = asyncio.get_running_loop().call_later(delay, self._release, key)

    def _release(self, key: str) -> None:
        self._delayed.pop(key, None)
        if key in self._pending and key not in self._busy:
            self._ready.put_nowait(key)

    def _after(self, key: str) -> None:
        if key in self._pending and key not in self._delayed:
            self._ready.put_nowait(key)
        self._depth.set(len(self._pending))
        if not self._pending and not self._busy and not self._delayed:
            self._lag.set(0)
            self._idle.set()
            self._shrink()

    def _shrink(self) -> None:
        """Idle: empty tables in place of those a backlog grew (a dict or set keeps its size as keys leave); the
        retry counts are remade by KeyedBackoff.forget() itself."""
        self._pending, self._busy, self._delayed = {}, set(), {}
