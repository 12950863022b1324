"""Indexed slim stores and their listers (watch/, inside a shared informer; what reconcilers read by key).

    Reflector ──► SharedInformer.on_event ──► Store.update (before any consumer hears of the event)
                                                │  the fields listers declared, nothing else; indices
                                                ▼
    reconcile(key) ──► Lister.get / by_index ──► the newest state known
                       Lister.fetch / fetch_index / ensure_complete ──► read what the store cannot know yet

client-go's Indexer and Lister. A store exists only for a resource some
consumer reads by key, and holds only the fields the listers declared
(kube/projection.py paths) and, of the annotations, only the keys they name:
its memory is one slim object per existing object (docs/watch-engine.md
counts it).

Each slim object is kept msgpack-encoded (one ``bytes`` of a few hundred bytes
instead of eight dicts and two lists) in a fixed shape (shape.py: arrays in
the declared fields' order, without the field names) and decoded on every
read, so a reader gets a fresh dict it may keep or change without touching
the store. A decode costs a few microseconds; a NetworkPolicy's sync, which
reads every pod, pays it once per pod (docs/benchmarks.md).

The store is *complete* when the informer started with a LIST that
delivered every object (nothing known before); an informer that resumed from
a stored position (a restart lists nothing) gives only what changed since,
so its store knows only those. A lister then reads the rest when asked:
``fetch`` GETs one object by name, ``fetch_index`` LISTs one index value (a
label selector), ``ensure_complete`` LISTs the resource once. Read objects
go into the store only when the watch has given nothing newer meanwhile (by
resourceVersion, and an object deleted during the read stays deleted), so
the watch stays the one writer of what is current.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ..kube.client import KubeClient
from ..kube.errors import NotFound
from ..kube.projection import Projection
from ..kube.reflector import WatchEvent, object_key
from ..kube.resources import Discovery
from .shape import Shape
from .watcher import WatchTarget

Indexer = Callable[[dict[str, Any]], Iterable[str]]
ANNOTATIONS = "metadata.annotations"
PAGE = 500


def revision(resource_version: str | None) -> int | None:
    """A resourceVersion as an etcd revision, when it is one (it is on every API server we know)."""
    return int(resource_version) if resource_version is not None and resource_version.isdigit() else None


def _revision_of(obj: dict[str, Any]) -> int | None:
    return revision(obj["metadata"].get("resourceVersion"))


class Store:
    """The newest slim object of each key of one informer, with named indices."""

    def __init__(self) -> None:
        self.fields: set[str] = set()
        self.annotations: set[str] = set()
        self.projection = Projection(())
        self.shape = Shape(self.projection.tree)
        self.indexers: dict[str, Indexer] = {}
        self._objects: dict[str, bytes] = {}  # key → the slim object, msgpack-encoded
        self._indices: dict[str, dict[str, set[str]]] = {}
        self.complete = False
        self.listing = False  # the informer's first LIST delivers every object: complete once it synced
        self.filled: dict[str, set[str]] = {}  # index → values whose objects were LISTed
        self._previous: bytes | None = None  # what the event being delivered replaced (encoded)
        self._reads: list[set[str]] = []  # per read in flight: keys deleted since it began

    def declare(self, fields: Iterable[str], annotations: Iterable[str], indexers: Mapping[str, Indexer]) -> None:
        """A lister's fields, annotation keys and indices (before the informer runs)."""
        self.fields |= set(fields)
        self.annotations |= set(annotations)
        for name, indexer in indexers.items():
            if self.indexers.get(name, indexer) is not indexer:
                raise ValueError(f"an index named {name!r} is already declared with another function")
            self.indexers[name] = indexer
            self._indices.setdefault(name, {})
            self.filled.setdefault(name, set())
        self.projection = Projection(self.decoded)
        old, self.shape = self.shape, Shape(self.projection.tree)
        # Declared after objects were kept (listers are declared before the informer runs, so hardly ever):
        # what is kept is re-encoded in the new shape, and what the event being delivered replaced too.
        for key, blob in self._objects.items():
            self._objects[key] = self.shape.encode(old.decode(blob))
        if self._previous is not None:
            self._previous = self.shape.encode(old.decode(self._previous))

    @property
    def decoded(self) -> tuple[str, ...]:
        """What the informer must decode for this store."""
        return tuple(sorted(self.fields | ({ANNOTATIONS} if self.annotations else set())))

    def slim(self, obj: dict[str, Any]) -> dict[str, Any]:
        kept = self.projection.apply(obj)
        if self.annotations:
            meta = kept["metadata"] = dict(kept["metadata"])
            given = meta.get("annotations") or {}
            meta["annotations"] = {k: v for k, v in given.items() if k in self.annotations}
        return kept

    # -- written by the informer -------------------------------------------------

    def update(self, event: WatchEvent) -> None:
        """Keep the event's object (or forget it); ``previous`` is what it replaced, for the event's consumers."""
        key = event.key
        if event.type == "DELETED":
            self._previous = self._remove(key)
            for deleted in self._reads:
                deleted.add(key)
        else:
            self._previous = self._put(key, self.slim(event.object))

    @property
    def previous(self) -> dict[str, Any] | None:
        """The object the event being delivered replaced (None: new, or not known), decoded anew on each read."""
        return self._decoded(self._previous)

    def _decoded(self, blob: bytes | None) -> dict[str, Any] | None:
        return None if blob is None else self.shape.decode(blob)

    def _put(self, key: str, obj: dict[str, Any]) -> bytes | None:
        old = self._objects.get(key)
        if old is not None:
            self._unindex(key, old)
        self._objects[key] = self.shape.encode(obj)
        for name, indexer in self.indexers.items():
            for value in indexer(obj):
                self._indices[name].setdefault(value, set()).add(key)
        return old

    def _remove(self, key: str) -> bytes | None:
        old = self._objects.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def _unindex(self, key: str, blob: bytes) -> None:
        if not self.indexers:
            return  # nothing to decode it for
        obj = self.shape.decode(blob)
        for name, indexer in self.indexers.items():
            index = self._indices[name]
            for value in indexer(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]

    # -- reads that fill it ------------------------------------------------------

    def begin_read(self) -> set[str]:
        deleted: set[str] = set()
        self._reads.append(deleted)
        return deleted

    def end_read(self, deleted: set[str], objects: Iterable[dict[str, Any]]) -> None:
        """Keep what a read found (slimmed), unless the watch deleted it meanwhile or gave a newer one."""
        self._reads.remove(deleted)
        for obj in objects:
            key = object_key(obj)
            held = self._objects.get(key)
            if key in deleted:
                continue
            if held is not None:
                old, new = _revision_of(self.shape.decode(held)), _revision_of(obj)
                if old is None or new is None or old >= new:
                    continue
            self._put(key, obj)

    # -- what listers read -------------------------------------------------------

    def get(self, key: str) -> dict[str, Any] | None:
        return self._decoded(self._objects.get(key))

    def by_index(self, name: str, value: str) -> list[dict[str, Any]]:
        return [self.shape.decode(self._objects[key]) for key in sorted(self._indices[name].get(value, ()))]

    def all(self) -> Iterator[dict[str, Any]]:
        """Every object, each decoded as the iteration reaches it: a reader that keeps only what it derives from
        each (a policy's sync reads every pod) never holds them all decoded at once. The objects are those of
        the call (changes during the iteration are not seen)."""
        return map(self.shape.decode, list(self._objects.values()))

    def __contains__(self, key: str) -> bool:
        return key in self._objects

    def __len__(self) -> int:
        return len(self._objects)


class Lister:
    """One consumer's reads of a store: by key, by index, or the whole; reading what a resumed watch lacks."""

    def __init__(self, store: Store, target: WatchTarget, client: KubeClient, discovery: Discovery) -> None:
        self.store = store
        self.target = target
        self._client = client
        self._discovery = discovery
        self._completing = asyncio.Lock()
        # A target with selectors is not every object of its kind: what the watch lacks is not read by name.
        self._reads = not (target.label_selector or target.field_selector)

    @property
    def complete(self) -> bool:
        return self.store.complete

    def get(self, key: str) -> dict[str, Any] | None:
        """The newest known state of ``key`` (None: deleted, or not known to a store that is not complete)."""
        return self.store.get(key)

    def __len__(self) -> int:
        return len(self.store)

    def all(self) -> Iterator[dict[str, Any]]:
        """Every object known, decoded one by one as iterated (iterate once)."""
        return self.store.all()

    def by_index(self, name: str, value: str) -> list[dict[str, Any]]:
        return self.store.by_index(name, value)

    async def fetch(self, key: str) -> dict[str, Any] | None:
        """``get``, but an object the store cannot know (resumed without a list) is read by name, once."""
        found = self.store.get(key)
        if found is not None or self.store.complete or not self._reads:
            return found
        namespace, _, name = key.rpartition("/")
        resource = await self._discovery.resolve(self.target.api_version, self.target.kind)
        deleted = self.store.begin_read()
        read: list[dict[str, Any]] = []
        try:
            read = [self.store.slim(await self._client.request("GET", resource.path(namespace or None, name)))]
        except NotFound:
            pass
        finally:
            self.store.end_read(deleted, read)
        return self.store.get(key)

    async def fetch_index(
        self, name: str, value: str, namespace: str | None, label_selector: str
    ) -> list[dict[str, Any]]:
        """``by_index``, after one LIST (by ``label_selector``) of what the store cannot know of that value."""
        if not (self.store.complete or value in self.store.filled[name] or not self._reads):
            await self._list(namespace, {"labelSelector": label_selector})
            self.store.filled[name].add(value)
        return self.store.by_index(name, value)

    async def ensure_complete(self) -> None:
        """One LIST of every object, unless the store has them all already (concurrent callers share it)."""
        async with self._completing:
            if self.store.complete or not self._reads:
                return
            await self._list(self.target.namespace, {})
            self.store.complete = True

    async def _list(self, namespace: str | None, params: dict[str, Any]) -> None:
        resource = await self._discovery.resolve(self.target.api_version, self.target.kind)
        deleted = self.store.begin_read()
        read: list[dict[str, Any]] = []
        try:
            async for obj in self._client.list_objects(resource.path(namespace), params, page_size=PAGE):
                obj.setdefault("kind", self.target.kind)
                read.append(self.store.slim(obj))
        finally:
            self.store.end_read(deleted, read)
