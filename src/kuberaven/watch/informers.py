"""Shared informers (watch/): one list+watch per (cluster, resource, selector), fanned out to every consumer.

    Reflector (decodes only the union of declared fields) ──► SharedInformer ──► inventory (inventory/)
                                                                             ├──► network translator (network/)
                                                                             └──► watchers' engine (watch/engine.py)

client-go's SharedInformerFactory, kept small: consumers *declare* what they
watch and which fields they read when they are built, then *join* when they
start with the position they stored. The informer starts its Reflector once
every declared consumer has joined:

* from the oldest stored position when every consumer has one and none needs
  a full list (a restart lists nothing);
* otherwise with a LIST (paginated), diffed against what consumers know.

A consumer that reads objects by key (a reconciler) declares a lister: the
informer then keeps a store of the fields listers declared (store.py),
updated before any consumer hears of an event.

A consumer that is ahead of the oldest position does not see the events it
has already handled (resourceVersions are compared as etcd revisions, the
numbers every API server sends; anything else is delivered). Objects are
projected at decode time (kube/projection.py): whole objects never exist.
Backpressure is shared: the Reflector reads nothing while any consumer is full.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field

from ..component_status import UNSET, ComponentStatus
from ..kube.client import KubeClient
from ..kube.projection import Projection
from ..kube.reflector import ObjectVersion, Reflector, ReflectorListener, ReflectorOptions, WatchEvent
from ..kube.resources import Discovery
from .store import Indexer, Lister, Store, revision
from .watcher import WatchTarget

__all__ = ["InformerFactory", "Joined", "SharedInformer", "revision", "running"]

log = logging.getLogger(__name__)


@dataclass
class Joined:
    """What a consumer brings when it starts: where it stopped and what it knew there."""

    position: str | None = None  # None: the consumer needs a list
    known: dict[str, ObjectVersion] = field(default_factory=dict)
    needs_list: bool = False  # e.g. it keeps a full cache that only a list can fill
    known_complete: bool = False  # ``known`` holds every object that existed at the position


class _Consumer:
    def __init__(self, name: str, listener: ReflectorListener, projection: Projection) -> None:
        self.name = name
        self.listener = listener
        self.projection = projection
        self.cut = False  # whether its events are cut down from the informer's wider projection
        self.joined: Joined | None = None
        self.skip_through: int | None = None  # events at or below this revision were handled before

    def wants(self, event: WatchEvent) -> bool:
        return event.relisted or self.ahead_of(event.object["metadata"].get("resourceVersion"))

    def ahead_of(self, resource_version: str | None) -> bool:
        """Whether ``resource_version`` is past what this consumer had handled (so it must see it)."""
        if self.skip_through is None:
            return True
        rv = revision(resource_version)
        return rv is None or rv > self.skip_through


class SharedInformer:
    """One Reflector's events, delivered to each consumer in order (the Reflector's listener)."""

    def __init__(self, target: WatchTarget) -> None:
        self.target = target
        self.projection = Projection(())
        self.consumers: dict[str, _Consumer] = {}
        self.reflector: Reflector | None = None
        self.store: Store | None = None  # when a consumer reads objects by key (store.py)
        self._all_joined = asyncio.Event()

    def declare(self, name: str, listener: ReflectorListener, fields: Iterable[str] | None) -> None:
        """A consumer says what it reads (``fields=None``: whole objects). Before the factory runs."""
        if name in self.consumers:
            raise ValueError(f"{self.target}: a consumer named {name!r} is already declared")
        projection = Projection(fields)
        self.consumers[name] = _Consumer(name, listener, projection)
        self.projection = self.projection.union(projection)
        for consumer in self.consumers.values():
            # Each consumer holds only its own fields (a translator's backlog of pods does not carry
            # the inventory's containers and conditions); the informer decodes their union once.
            consumer.cut = consumer.projection.narrower_than(self.projection)

    def keep_store(
        self, fields: Iterable[str], annotations: Iterable[str] = (), indexers: dict[str, Indexer] | None = None
    ) -> Store:
        """The informer's store, holding at least ``fields`` and the ``annotations`` keys. Before the factory runs."""
        if self.store is None:
            self.store = Store()
        self.store.declare(fields, annotations, indexers or {})
        self.projection = self.projection.union(self.store.projection)
        for consumer in self.consumers.values():
            consumer.cut = consumer.projection.narrower_than(self.projection)
        return self.store

    def join(self, name: str, joined: Joined) -> None:
        """A declared consumer starts; the Reflector starts once all have joined."""
        consumer = self.consumers[name]
        consumer.joined = joined
        if self.reflector is not None:
            # Joining again after the consumer crashed and was restarted: what it had been given and
            # not yet handled is lost with it, so every consumer is given every object once more
            # (a relist that repeats unchanged objects; consumers handle a repeat as a no-op).
            log.info("%s: %s joined again; relisting every object for it", self.target, name)
            consumer.skip_through = None
            self.reflector.resync()
            return
        if all(c.joined is not None for c in self.consumers.values()):
            self._all_joined.set()

    def start_position(self) -> tuple[str | None, dict[str, ObjectVersion], bool]:
        """(oldest stored position, what consumers know, whether that is all) — position None means list."""
        joined = [c.joined for c in self.consumers.values() if c.joined is not None]
        known: dict[str, ObjectVersion] = {}
        for j in joined:
            known.update(j.known)
        complete = any(j.known_complete for j in joined)
        revisions = [revision(j.position) for j in joined]
        if any(j.needs_list for j in joined) or any(r is None for r in revisions):
            return None, known, complete
        oldest = min(r for r in revisions if r is not None)
        for consumer in self.consumers.values():
            assert consumer.joined is not None
            position = revision(consumer.joined.position)
            consumer.skip_through = position if position != oldest else None
        return str(oldest), known, complete

    async def run(self, client: KubeClient, discovery: Discovery, options: ReflectorOptions) -> None:
        """Start the Reflector once all consumers joined (or run it again, after a crash, where it was)."""
        if self.reflector is None:
            self.reflector = await self._start(client, discovery, options)
        await self.reflector.run()

    async def _start(self, client: KubeClient, discovery: Discovery, options: ReflectorOptions) -> Reflector:
        await self._all_joined.wait()
        resource = await discovery.resolve(self.target.api_version, self.target.kind)
        position, known, complete = self.start_position()
        if self.store is not None:  # a first LIST with nothing known delivers every object: the store fills
            self.store.listing = position is None and not known
        log.info(
            "%s: %s with %d known, for %s",
            self.target,
            f"resuming at {position}" if position else "listing",
            len(known),
            ", ".join(self.consumers),
        )
        return Reflector(
            client,
            resource,
            self,
            namespace=self.target.namespace,
            label_selector=self.target.label_selector,
            field_selector=self.target.field_selector,
            resource_version=position,
            known=known,
            known_complete=complete,
            options=options,
            projection=self.projection,
        )

    # -- ReflectorListener ----------------------------------------------------

    def on_event(self, event: WatchEvent) -> None:
        if self.store is not None:  # first: a consumer handed the event reads the state it brought
            self.store.update(event)
        for consumer in self.consumers.values():
            if consumer.wants(event):
                if consumer.cut:
                    cut = consumer.projection.apply(event.object)
                    consumer.listener.on_event(dataclasses.replace(event, object=cut))
                else:
                    consumer.listener.on_event(event)

    def on_bookmark(self, resource_version: str) -> None:
        for consumer in self.consumers.values():
            if consumer.ahead_of(resource_version):  # never move a consumer's stored position backwards
                consumer.listener.on_bookmark(resource_version)

    def on_synced(self) -> None:
        if self.store is not None and self.store.listing:
            self.store.complete = True
        for consumer in self.consumers.values():
            consumer.listener.on_synced()

    async def wait_for_room(self) -> None:
        for consumer in self.consumers.values():
            await consumer.listener.wait_for_room()

    # -- what consumers and /readyz read -----------------------------------------

    def known_uid_keys(self) -> Iterator[int | str]:
        """The uids of every object that exists now, as far as the watch knows, as kube/uids.py's compact uids,
        one by one (garbage collection's set of every object of the cluster: no string made per object, no set
        per informer)."""
        return (version.uid_key for version in list(self.reflector.known.values())) if self.reflector else iter(())

    @property
    def knows_all(self) -> bool:
        """Whether known_uid_keys() is every object (after a list, or resumed with everything known)."""
        return bool(self.reflector and self.reflector.knows_all)

    @property
    def synced(self) -> bool:
        return bool(self.reflector and self.reflector.synced)

    def stale(self) -> bool:
        return self.reflector is None or not self.reflector.synced or self.reflector.stale()

    def status(self) -> ComponentStatus:
        reflector = self.reflector
        return ComponentStatus(
            target=str(self.target),
            consumers=tuple(sorted(self.consumers)),
            synced=self.synced,
            connected=bool(reflector and reflector.connected),
            idle_seconds=round(time.monotonic() - reflector.last_activity, 1) if reflector else None,
            listed=reflector.listed if reflector else UNSET,
            expected=reflector.expected if reflector else UNSET,
        )


class InformerFactory:
    """The shared informers of one cluster; a component of the daemon (run/stop/ready/status)."""

    def __init__(self, client: KubeClient, cluster: str = "kubernetes", options: ReflectorOptions | None = None):
        self.client = client
        self.cluster = cluster
        self.options = options or ReflectorOptions()
        self.discovery = Discovery(client)
        self.informers: dict[WatchTarget, SharedInformer] = {}
        self._stopping = asyncio.Event()

    def informer(self, target: WatchTarget) -> SharedInformer:
        found = self.informers.get(target)
        if found is None:
            found = self.informers[target] = SharedInformer(target)
        return found

    def lister(
        self,
        target: WatchTarget,
        fields: Iterable[str],
        *,
        annotations: Iterable[str] = (),
        indexers: dict[str, Indexer] | None = None,
    ) -> Lister:
        """Reads of ``target``'s objects by key, holding ``fields`` (and those annotation keys) of each."""
        store = self.informer(target).keep_store(fields, annotations, indexers)
        return Lister(store, target, self.client, self.discovery)

    async def run(self) -> None:
        tasks = [
            asyncio.create_task(i.run(self.client, self.discovery, self.options), name=f"informer {t}")
            for t, i in self.informers.items()
        ]
        stopping = asyncio.create_task(self._stopping.wait())
        try:
            done, _ = await asyncio.wait({*tasks, stopping}, return_when=asyncio.FIRST_COMPLETED)
            for task in done - {stopping}:
                task.result()  # a reflector never returns: one that raised ends the factory (restarted above)
        finally:
            for task in (*tasks, stopping):
                task.cancel()
            await asyncio.gather(*tasks, stopping, return_exceptions=True)

    def stop(self) -> None:
        self._stopping.set()

    def ready(self) -> bool:
        return not any(i.stale() for i in self.informers.values())

    def status(self) -> list[ComponentStatus]:
        return [
            dataclasses.replace(i.status(), component="informers", cluster=self.cluster)
            for i in self.informers.values()
        ]


@contextlib.asynccontextmanager
async def running(factory: InformerFactory, owned: bool) -> AsyncIterator[None]:
    """Run ``factory`` for the block when its consumer made it itself (standalone use); the daemon runs shared ones."""
    if not owned:
        yield
        return
    task = asyncio.create_task(factory.run(), name=f"informers {factory.cluster}")
    try:
        yield
    finally:
        factory.stop()
        await asyncio.gather(task, return_exceptions=True)
