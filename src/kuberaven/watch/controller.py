"""The controller (watch/, run by the engine): one reconciler's work queue, workers, and watch positions.

    informer event (seq n) ──► Watch.keys(Change) ──► keys ──► WorkQueue ──► N workers: reconcile(key)
                                  └─► Marks of that feed: key dirty since n     │
                                                                                ├─ DONE / requeue_after: covered
                                                                                └─ raised: add_rate_limited

controller-runtime's internal controller (reconcileHandler) on asyncio:
an error requeues the key with its backoff (kube/backoff.py), a success
forgets it, ``requeue_after`` adds it again later.

Watch positions. The engine stores, per informer, a resourceVersion from
which a restart resumes; it is safe only if every event before it has been
*covered*: each key the event mapped to was reconciled, successfully, by a
reconcile that started after the event arrived (the informer's store held
the event's state by then, so the reconcile read it or newer). Per feed and
key, :class:`Marks` keeps the sequence number of the oldest event not yet
covered: while the key waits (``dirty``) and while a reconcile of it runs
(``running``); a failure puts it back. The feed's safe point is the lowest
of them (a heap), or every event when none is left: memory O(keys
outstanding), not O(events), however often a failing key's object changes.

So positions stay exact without the events themselves: a restart replays
every event after the position, which maps to the same keys again (or to
more: mapping functions may over-approximate, never under). Periodic garbage
collection is still needed for what changed while nothing watched (objects
deleted before a relist diff could say so); it is the translator's.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Callable, Hashable

from .. import metrics
from .reconciler import Change, Reconciler, Result, Watch
from .workqueue import ShutDown, Waiting, WorkQueue

log = logging.getLogger(__name__)


class Marks:
    """Per key, the oldest sequence number of one feed's events it has not covered yet."""

    def __init__(self) -> None:
        self.dirty: dict[Hashable, int] = {}  # waiting for a reconcile
        self.running: dict[Hashable, int] = {}  # taken by the reconcile in hand
        self._heap: list[tuple[int, int, Hashable]] = []  # (seq, tie, key); stale entries dropped lazily
        self._tie = 0

    def add(self, key: Hashable, seq: int) -> None:
        if key not in self.dirty:
            self.dirty[key] = seq
            self._push(seq, key)

    def take(self, key: Hashable) -> None:
        """A reconcile of ``key`` starts: it covers everything marked so far."""
        seq = self.dirty.pop(key, None)
        if seq is not None:
            self.running[key] = seq

    def covered(self, key: Hashable) -> None:
        self.running.pop(key, None)
        if not self.running and not self.dirty:
            # Nothing outstanding: every heap entry is stale, and the tables a backlog grew (a dict keeps its
            # size as keys leave it) are made anew, so a cold start's backlog does not stay.
            self.dirty, self.running, self._heap = {}, {}, []

    def failed(self, key: Hashable) -> None:
        """Not covered after all: what it had taken is dirty again (the oldest of it and any newer)."""
        seq = self.running.pop(key, None)
        if seq is not None and seq < self.dirty.get(key, seq + 1):
            self.dirty[key] = seq
            self._push(seq, key)

    def floor(self, latest: int) -> int:
        """The highest sequence number up to which every event is covered (``latest``: the newest given)."""
        while self._heap:
            seq, _, key = self._heap[0]
            if self.dirty.get(key) == seq or self.running.get(key) == seq:
                return seq - 1
            heapq.heappop(self._heap)
        return latest

    def __len__(self) -> int:
        return len(self.dirty) + len(self.running)

    def _push(self, seq: int, key: Hashable) -> None:
        self._tie += 1
        heapq.heappush(self._heap, (seq, self._tie, key))


class Controller:
    """Runs one reconciler: keys from its watches' events, ``concurrency`` workers, retries with backoff."""

    def __init__(self, reconciler: Reconciler, *, concurrency: int, retry_initial: float, retry_max: float) -> None:
        self.reconciler = reconciler
        self.name = reconciler.name
        self.queue: WorkQueue[Hashable] = WorkQueue(self.name, retry_initial=retry_initial, retry_max=retry_max)
        self._concurrency = reconciler.concurrency or concurrency
        self._marks: list[Marks] = []
        self._listeners: list[Callable[[], None]] = []
        self._workers: list[asyncio.Task[None]] = []
        self._busy: set[asyncio.Task[None]] = set()
        self._stopping = False
        self._duration = metrics.HANDLER_LATENCY.labels(self.name)
        self._errors = metrics.HANDLER_ERRORS.labels(self.name)

    def attach(self, on_progress: Callable[[], None]) -> Marks:
        """A feed's marks; ``on_progress`` is told whenever a key is covered (the feed checks it synced)."""
        marks = Marks()
        self._marks.append(marks)
        self._listeners.append(on_progress)
        return marks

    def offer(self, watch: Watch, marks: Marks, seq: int, change: Change) -> None:
        """An event of ``watch``'s resource: the keys it maps to are queued, and not covered until reconciled."""
        for key in watch.keys(change):
            marks.add(key, seq)
            self.queue.add(key)

    def enqueue(self, key: Hashable) -> None:
        """A key to reconcile that no event brought (start-up, another reconciler's result)."""
        self.queue.add(key)

    def __len__(self) -> int:
        return self.queue.busy

    def start(self) -> None:
        """Workers on the queue, and the reconciler's handle connected; again after a stop (the supervisor
        restarting its crashed engine): the queue takes keys again."""
        self._stopping = False
        self.queue.reopen()
        self._workers = [asyncio.create_task(self._work(), name=f"{self.name}-{i}") for i in range(self._concurrency)]
        if self.reconciler.enqueue is not None:
            self.reconciler.enqueue.connect(self.enqueue)

    async def stop(self, timeout: float) -> None:
        """Take no more keys; give reconciles in flight ``timeout`` seconds to finish."""
        self._stopping = True
        if self.reconciler.enqueue is not None:
            self.reconciler.enqueue.disconnect()
        self.queue.shutdown()
        idle = [w for w in self._workers if w not in self._busy]
        for worker in idle:
            worker.cancel()
        busy = [w for w in self._workers if w in self._busy]
        if busy:
            _, still_running = await asyncio.wait(busy, timeout=timeout)
            for worker in still_running:
                log.warning("%s: reconcile still running after %.0fs, cancelling", self.name, timeout)
                worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []

    async def wait_idle(self) -> None:
        await self.queue.wait_idle()

    async def _work(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        while not self._stopping:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            self._busy.add(task)
            try:
                await self._run(key)
            finally:
                self._busy.discard(task)
                self.queue.done(key)
                for listener in self._listeners:
                    listener()

    async def _run(self, key: Hashable) -> None:
        for marks in self._marks:
            marks.take(key)
        started = time.monotonic()
        try:
            result = await self.reconciler.reconcile(key)
        except asyncio.CancelledError:
            self._failed(key)
            raise
        except Waiting as waiting:
            log.debug("%s: %s waits: %s", self.name, key, waiting)
            self._failed(key)
            self.queue.add_rate_limited(key)
            return
        except Exception:
            self._errors.inc()
            log.exception("%s: reconcile of %s failed", self.name, key)
            self._failed(key)
            self.queue.add_rate_limited(key)
            return
        finally:
            self._duration.observe(time.monotonic() - started)
        for marks in self._marks:
            marks.covered(key)
        self.queue.forget(key)
        after = (result or Result()).requeue_after
        if after is not None:
            self.queue.add_after(key, after)

    def _failed(self, key: Hashable) -> None:
        for marks in self._marks:
            marks.failed(key)
