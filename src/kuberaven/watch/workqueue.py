"""The key-only work queue (watch/, between the informers' events and the reconcilers).

    event ──map──► key ──add──► WorkQueue ──get──► worker: reconcile(key) ──► done(key)
                                  ▲                       │ failed: add_rate_limited(key) (kube/backoff.py)
                                  └── add_after(key, s) ◄─┘ requeue after s seconds; success: forget(key)

client-go's workqueue (queue.go, delaying_queue.go, rate_limiting_queue.go)
on one asyncio loop, with the same rules:

* it holds keys, not events: a key added while it waits is queued once
  (``dirty``), so a burst of changes to one object is one reconcile;
* a key is never handled by two workers at once (``processing``); a key
  added while it is being handled is queued again when :meth:`done` is called,
  so the change is never missed;
* :meth:`add_rate_limited` waits the key's own exponential backoff
  (:class:`~kuberaven.kube.backoff.KeyedBackoff`, its only owner) before adding
  it; :meth:`forget` resets it after a success; :meth:`add_after` adds it
  later (the earliest of several such waits wins);
* :meth:`shutdown` makes :meth:`get` raise :class:`ShutDown` once the queue
  is empty and ignores later adds, until :meth:`reopen`.

Memory is O(keys waiting or in hand), whatever the rate of changes. A
Python set or dict never shrinks its hash table as keys leave it, so a cold
start's backlog (a key per pod) would size the queue's tables for as long as
the process runs: once the queue is idle its tables are made anew
(docs/benchmarks.md measures it).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from .. import metrics
from ..kube.backoff import KeyedBackoff

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """The queue was shut down and holds nothing more: the worker asking ends."""


class Waiting(Exception):
    """Raised by a handler whose object depends on one not handled yet: retried with backoff, logged quietly."""


class WorkQueue(Generic[K]):
    """Keys to handle: each queued once, handled by one worker at a time, retried with per-key backoff."""

    def __init__(self, name: str, *, retry_initial: float = 0.005, retry_max: float = 1000.0) -> None:
        self.name = name
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._delayed: dict[K, tuple[float, asyncio.TimerHandle]] = {}  # key → (when due, its timer)
        self._added: dict[K, float] = {}  # when a waiting key was first added (queue latency)
        self._getters: deque[asyncio.Future[None]] = deque()
        self._backoff = KeyedBackoff(retry_initial, retry_max)
        self._shutting_down = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._depth = metrics.QUEUE_DEPTH.labels(name)
        self._latency = metrics.QUEUE_LATENCY.labels(name)
        self._retries = metrics.RETRIES.labels(name)

    def __len__(self) -> int:
        """Keys waiting to be handled (not those in hand or waiting for their delay)."""
        return len(self._queue)

    @property
    def busy(self) -> int:
        """Keys queued, in hand, or waiting for their delay."""
        return len(self._dirty | self._processing) + len(self._delayed)

    def add(self, key: K) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        self._added.setdefault(key, time.monotonic())
        self._idle.clear()
        if key not in self._processing:
            self._push(key)

    def add_after(self, key: K, delay: float) -> None:
        """``key`` added in ``delay`` seconds (at once when ``delay`` <= 0); an earlier wait already set stays."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        due = time.monotonic() + delay
        waiting = self._delayed.get(key)
        if waiting is not None:
            if waiting[0] <= due:
                return
            waiting[1].cancel()
        self._idle.clear()
        handle = asyncio.get_running_loop().call_later(delay, self._release, key)
        self._delayed[key] = (due, handle)

    def add_rate_limited(self, key: K) -> None:
        """``key`` added after its backoff: 2× longer each time until :meth:`forget`."""
        self._retries.inc()
        self.add_after(key, self._backoff.when(key))

    def forget(self, key: K) -> None:
        """``key`` succeeded: its next failure waits the initial backoff again."""
        self._backoff.forget(key)

    def failures(self, key: K) -> int:
        return self._backoff.failures(key)

    async def get(self) -> K:
        """The next key to handle (it is then in hand until :meth:`done`); ShutDown once shut down and empty."""
        while not self._queue:
            if self._shutting_down:
                raise ShutDown(self.name)
            waiter = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled() and self._queue:
                    self._wake()  # it was woken for a key it will not take: pass the turn on
                raise
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        added = self._added.pop(key, None)
        if added is not None:
            self._latency.observe(time.monotonic() - added)
        self._depth.set(len(self._queue))
        return key

    def done(self, key: K) -> None:
        """The worker finished ``key``; if it was added meanwhile it is queued again."""
        self._processing.discard(key)
        if key in self._dirty:
            self._push(key)
        self._check_idle()

    def reopen(self) -> None:
        """Take keys again after a shutdown (a controller started again); those still queued are handed out."""
        self._shutting_down = False

    def shutdown(self) -> None:
        """Take no more keys; delayed ones are dropped; workers waiting in get() end."""
        self._shutting_down = True
        for _, handle in self._delayed.values():
            handle.cancel()
        self._delayed.clear()
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        self._check_idle()

    async def wait_idle(self) -> None:
        """Until no key is queued, in hand, or waiting for its delay."""
        await self._idle.wait()

    def _push(self, key: K) -> None:
        self._queue.append(key)
        self._depth.set(len(self._queue))
        self._wake()

    def _wake(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _release(self, key: K) -> None:
        self._delayed.pop(key, None)
        self.add(key)
        self._check_idle()

    def _check_idle(self) -> None:
        if not self._dirty and not self._processing and not self._delayed:
            self._idle.set()
            self._shrink()

    def _shrink(self) -> None:
        """Idle: empty tables in place of those a backlog grew (they keep their size, empty or not); the retry
        counts are remade by KeyedBackoff.forget() itself."""
        self._dirty, self._processing, self._delayed, self._added = set(), set(), {}, {}
