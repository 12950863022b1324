"""Watcher declarations and their registry (watch/, what the engine runs).

A watcher is *what to watch* plus a ``translate`` function; an Engine
multiplexes any number of them. A :class:`Registry` collects them for an
Engine of the caller's own (``kuberaven run`` runs the lists of plugins.py
and the ``watchers`` setting, no registry):

    watchers = Registry()

    @watchers.watcher("v1", "Pod", namespace="default")
    async def log_pods(event):
        print(event.type, event.object["metadata"]["name"])

``translate`` may be a coroutine function or a plain function (run in a
worker thread so it cannot block the loop). It receives a
:class:`~kuberaven.kube.reflector.WatchEvent`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..kube.reflector import WatchEvent

Translate = Callable[[WatchEvent], Awaitable[Any] | Any]
SyncedCallback = Callable[[], Awaitable[Any] | Any]


@dataclass(frozen=True)
class WatchTarget:
    """What one list+watch covers; watchers with equal targets share one Reflector."""

    api_version: str
    kind: str
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        selectors = ",".join(s for s in (self.label_selector, self.field_selector) if s)
        return f"{self.api_version}/{self.kind}{where}" + (f" [{selectors}]" if selectors else "")


@dataclass
class Watcher:
    """A declaration of what to watch and the function that translates its events."""

    target: WatchTarget
    translate: Translate
    name: str = ""
    # Called once the initial list has been handled (the "synced" signal).
    on_synced: SyncedCallback | None = None
    # The fields translate() reads (kube/projection.py paths, e.g. "status.podIP"); None: whole objects.
    # Declaring them is what keeps memory small: nothing else is decoded.
    fields: tuple[str, ...] | None = None
    # True when translate() needs every object at start (a list), not only the changes since its position.
    needs_list: bool = False
    # Objects handled at once (default: the engine's); many for handlers that only wait on a Batcher.
    concurrency: int | None = None
    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        if not self.name:
            self.name = getattr(self.translate, "__qualname__", repr(self.translate))
        # Callable objects count too: their __call__ may be the coroutine function.
        call = getattr(self.translate, "__call__", None)  # noqa: B004
        self.is_async = inspect.iscoroutinefunction(self.translate) or inspect.iscoroutinefunction(call)


class Registry:
    """An ordered set of watchers: filled by the ``watcher`` decorator or a list."""

    def __init__(self, watchers: Iterable[Watcher] = ()) -> None:
        self.watchers: list[Watcher] = []
        for w in watchers:
            self.add(w)

    def add(self, w: Watcher) -> Watcher:
        if any(existing.name == w.name for existing in self.watchers):
            raise ValueError(f"a watcher named {w.name!r} is already registered")
        self.watchers.append(w)
        return w

    def watcher(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        name: str = "",
    ) -> Callable[[Translate], Translate]:
        """Decorator: register ``translate`` for this resource."""

        def register(translate: Translate) -> Translate:
            target = WatchTarget(api_version, kind, namespace, label_selector, field_selector)
            self.add(Watcher(target, translate, name=name))
            return translate

        return register

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.watchers)

    def __len__(self) -> int:
        return len(self.watchers)
