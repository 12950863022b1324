"""Reconciler declarations (watch/, what the engine runs besides watchers): what is read, which keys, reconcile().

controller-runtime's builder, kept small:

    Reconciler(
        "network-load-balancers", load_balancers.reconcile,
        watches=[Watch(SERVICES),                              # For(): an object's own key
                 Watch(ENDPOINT_SLICES, keys=owning_service)],  # Watches(): an event ──► the keys it affects
    )

A reconciler is *level-triggered*: ``reconcile(key)`` reads the newest state
through listers (store.py) over the shared informers, makes the world match
it, and returns :data:`DONE`, a :class:`Result` asking to be run again after
some seconds, or raises (retried with the key's backoff; :class:`Waiting`
for "not yet", logged quietly). Events carry no state into it: a mapping
function only says which keys an event concerns, from the event's object and
the one it replaced in the informer's store (:class:`Change`). Keys that no
event brings (another reconciler's finding, a poll's report) come through an
:class:`Enqueue` handle named in the declaration, controller-runtime's
``source.Channel``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..kube.reflector import object_key
from .watcher import WatchTarget
from .workqueue import Waiting

__all__ = ["DONE", "Change", "Enqueue", "Reconciler", "Result", "Waiting", "Watch", "own_key"]


@dataclass(frozen=True, slots=True)
class Change:
    """One event as a mapping function sees it."""

    type: str  # ADDED | MODIFIED | DELETED
    object: dict[str, Any]  # the event's object: the fields the Watch declared
    previous: dict[str, Any] | None = None  # the informer's stored object it replaced (None: new or not known)
    relisted: bool = False
    # The reflector's own key string (WatchEvent.known_key): the queues and the reconcilers' caches keyed by it
    # keep that one string per object rather than an equal copy each.
    known_key: str | None = field(default=None, repr=False, compare=False)

    @property
    def key(self) -> str:
        return self.known_key if self.known_key is not None else object_key(self.object)


Keys = Callable[[Change], Iterable[Hashable]]


def own_key(change: Change) -> tuple[str]:
    """For(): an object's own namespace/name."""
    return (change.key,)


@dataclass(frozen=True)
class Watch:
    """A resource whose events queue keys: its own (For) or, through ``keys``, others' (Watches/Owns)."""

    target: WatchTarget
    keys: Keys = own_key
    fields: tuple[str, ...] = ()  # what ``keys`` reads of an event's object (besides name, namespace, uid)
    needs_list: bool = False  # the informer lists at every start (the store is then complete)


@dataclass(frozen=True)
class Result:
    """What a reconcile asks for: nothing more, or to run again after ``requeue_after`` seconds."""

    requeue_after: float | None = None


DONE = Result()
Reconcile = Callable[[Any], Awaitable[Result | None]]


class Enqueue:
    """A handle on one reconciler's queue, for keys no event brings: ``enqueue(key)`` from the event loop or any
    thread.

    It is made before the engine (its callers are built before the controllers are) and named in the
    reconciler's declaration; its controller reads it while it runs. Keys given while none does wait here, each
    once, until one does.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reader: tuple[asyncio.AbstractEventLoop, Callable[[Hashable], None]] | None = None
        self._waiting: dict[Hashable, None] = {}  # keys given while no controller reads, in order

    def __call__(self, key: Hashable) -> None:
        with self._lock:
            reader = self._reader
            if reader is None:
                self._waiting[key] = None
                return
        loop, add = reader
        if _running_loop() is loop:
            add(key)
        else:
            loop.call_soon_threadsafe(add, key)

    def connect(self, add: Callable[[Hashable], None]) -> None:
        """The controller reads the keys from now on (on the event loop): those waiting first."""
        with self._lock:
            self._reader = (asyncio.get_running_loop(), add)
            waiting, self._waiting = list(self._waiting), {}
        for key in waiting:
            add(key)

    def disconnect(self) -> None:
        """The controller stopped: keys wait again."""
        with self._lock:
            self._reader = None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # a worker thread
        return None


@dataclass
class Reconciler:
    name: str
    reconcile: Reconcile
    watches: Sequence[Watch] = field(default_factory=tuple)
    concurrency: int | None = None  # keys reconciled at once (default: the engine's)
    enqueue: Enqueue | None = None  # where keys no event brings come from (None: only the watches' keys)

    def __post_init__(self) -> None:
        if not self.watches:
            raise ValueError(f"reconciler {self.name!r} watches nothing")
        targets = [w.target for w in self.watches]
        if len(set(targets)) != len(targets):
            raise ValueError(f"reconciler {self.name!r} watches one resource twice: give one Watch its keys")
