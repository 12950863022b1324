"""The inventory (inventory/): Kubernetes → data model + outbox, by watching, in batches.

    shared informer per resource ──► ordered queue ──► batch (≤ batch_size events or batch_window s)
      pods, namespaces,                            │  resolve slices (owners.py, async)
      serviceaccounts,                             ▼
      configmaps, secrets,                   InventoryWriter.apply() in a worker thread:
      services                               rows + outbox events + watch positions, one transaction

Why not the keyed queue of watch/: the inventory has one writer (the
database), and handling events strictly in watch order is what lets the
position stored with a batch be exact. Batching is what makes it fast: one
commit per few hundred events, not per event.

Start-up reads each resource's stored position and the objects the rows say
are known at it, and joins the cluster's shared informers (watch/informers.py)
with them: they resume from there (no replay), and after a 410 or a long
outage the relist diff reports what vanished as DELETED. The inventory
declares the fields it reads (FIELDS); nothing else of an object is decoded.
Secrets are a target only with ``InventoryOptions.inventory_secrets``: their list and
watch carry the values (RBAC cannot grant metadata alone), so an operator
can run without that permission (docs/operations.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import metrics
from ..component_status import UNSET, ComponentStatus
from ..kube.backoff import Backoff
from ..kube.client import KubeClient
from ..kube.reflector import ReflectorOptions, WatchEvent
from ..kube.resources import Discovery
from ..model.database import Database
from ..watch.informers import InformerFactory, Joined, SharedInformer, running
from ..watch.watcher import WatchTarget
from .implied import CONTROLLERS
from .owners import OwnerResolver
from .records import POD_FIELDS, Item
from .writer import InventoryWriter

log = logging.getLogger(__name__)

SECRETS = "secrets"
TARGETS: dict[str, tuple[str, str]] = {
    "namespaces": ("v1", "Namespace"),
    "serviceaccounts": ("v1", "ServiceAccount"),
    "configmaps": ("v1", "ConfigMap"),
    SECRETS: ("v1", "Secret"),
    "services": ("v1", "Service"),
    "pods": ("v1", "Pod"),
    # Controllers, for their desired replicas (a slice's controller_replica_count).
    "deployments": ("apps/v1", "Deployment"),
    "replicasets": ("apps/v1", "ReplicaSet"),
    "statefulsets": ("apps/v1", "StatefulSet"),
    "replicationcontrollers": ("v1", "ReplicationController"),
}
CONSUMER = "inventory"
# What the inventory reads of each resource (kube/projection.py paths); see records.py.
_OWNED = ("metadata.labels", "metadata.ownerReferences")
FIELDS: dict[str, tuple[str, ...]] = {
    "namespaces": _OWNED,
    "serviceaccounts": _OWNED,
    "configmaps": (*_OWNED, "data", "binaryData"),
    SECRETS: (*_OWNED, "data", "stringData"),
    "services": (*_OWNED, "spec.ports"),
    "pods": POD_FIELDS,
    **dict.fromkeys(CONTROLLERS, ("spec.replicas",)),
}


@dataclass
class InventoryOptions:
    batch_size: int = 500
    batch_window: float = 0.005
    # Events queued before the reflectors stop reading: bounds memory on a cold
    # start, where the API server lists far faster than the database commits.
    max_queued: int = 1000
    retry_initial: float = 0.1
    retry_max: float = 30.0
    # For the informers the inventory makes itself when it is not given the daemon's.
    reflector: ReflectorOptions = field(default_factory=ReflectorOptions)
    # Mirror Secrets (their keys, never the values); off, kuberaven needs no list/watch of secrets.
    inventory_secrets: bool = True


def inventory_targets(secrets: bool) -> dict[str, tuple[str, str]]:
    """The resources the inventory watches: TARGETS, without Secrets unless ``secrets``."""
    return {target: kind for target, kind in TARGETS.items() if secrets or target != SECRETS}


class _Listener:
    """Reflector → the inventory's queue, in the reflector's order."""

    def __init__(self, inventory: Inventory, target: str) -> None:
        self.inventory = inventory
        self.target = target

    def on_event(self, event: WatchEvent) -> None:
        rv = None if event.relisted else event.object["metadata"]["resourceVersion"]
        self.inventory.queue.put_nowait(Item.of(self.target, event, rv))

    def on_bookmark(self, resource_version: str) -> None:
        self.inventory.queue.put_nowait(Item(self.target, None, resource_version))

    def on_synced(self) -> None:
        # Synced once everything queued before this marker is committed.
        self.inventory.queue.put_nowait(Item(self.target, synced=True))

    async def wait_for_room(self) -> None:
        await self.inventory.wait_for_room()


class Inventory:
    """Mirrors one cluster (a KubernetesService row) into the database."""

    def __init__(
        self,
        client: KubeClient,
        database: Database,
        cluster: str = "kubernetes",
        options: InventoryOptions | None = None,
        on_commit: Callable[[int], None] | None = None,
        informers: InformerFactory | None = None,
    ) -> None:
        """``informers``: the cluster's shared informers (the daemon's); without, the inventory runs its own."""
        self.client = client
        self.database = database
        self.cluster = cluster
        self.options = options or InventoryOptions()
        self.on_commit = on_commit
        self.writer = InventoryWriter(database, cluster)
        self.discovery = Discovery(client)
        self.owners = OwnerResolver(client, self.discovery)
        self.queue: asyncio.Queue[Item] = asyncio.Queue()
        self._depth = metrics.QUEUE_DEPTH.labels(f"{CONSUMER}-{cluster}")
        self.owns_informers = informers is None
        self.factory = informers or InformerFactory(client, cluster, self.options.reflector)
        self.targets = inventory_targets(self.options.inventory_secrets)
        self.informers: dict[str, SharedInformer] = {}
        for target, (api_version, kind) in self.targets.items():
            informer = self.informers[target] = self.factory.informer(WatchTarget(api_version, kind))
            informer.declare(CONSUMER, _Listener(self, target), FIELDS[target])
        self.synced_targets: set[str] = set()
        # Events committed per target since start (during the initial sync: objects stored).
        self.written: Counter[str] = Counter()
        self._synced = asyncio.Event()
        self._room = asyncio.Event()
        self._stopping = False

    async def run(self) -> None:
        """Watch and write until cancelled or stop()ped."""
        self._stopping = False
        stored = await asyncio.to_thread(self.writer.load)
        for target, informer in self.informers.items():
            resource_version, known = stored[target]
            # The rows are every object the inventory has seen: all of them, at its position
            # (controllers are watched for a count, not mirrored).
            complete = resource_version is not None and target not in CONTROLLERS
            informer.join(CONSUMER, Joined(resource_version, known, known_complete=complete))
        async with running(self.factory, self.owns_informers):
            await self._write_loop()

    def stop(self) -> None:
        """Finish the batch in hand and return from run()."""
        self._stopping = True
        self.queue.put_nowait(Item("", None, None))

    async def wait_synced(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self._synced.wait(), timeout)

    async def wait_for_room(self) -> None:
        while self.queue.qsize() >= self.options.max_queued:
            self._room.clear()
            await self._room.wait()

    def ready(self) -> bool:
        return self._synced.is_set() and not any(i.stale() for i in self.informers.values())

    def status(self) -> list[ComponentStatus]:
        """Per resource: synced once everything listed is committed; ``queued`` is the backlog."""
        return [
            ComponentStatus(
                target=f"{self.cluster}/{t}",
                synced=t in self.synced_targets,
                listed=i.reflector.listed if i.reflector else UNSET,
                expected=i.reflector.expected if i.reflector else UNSET,
                written=self.written[t],
                queued=self.queue.qsize(),
            )
            for t, i in self.informers.items()
        ]

    async def _write_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            batch = [await self.queue.get()]
            deadline = loop.time() + self.options.batch_window
            while len(batch) < self.options.batch_size:
                try:
                    batch.append(self.queue.get_nowait())
                except asyncio.QueueEmpty:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    try:
                        batch.append(await asyncio.wait_for(self.queue.get(), remaining))
                    except TimeoutError:
                        break
            self._room.set()
            self._depth.set(self.queue.qsize())  # the backlog /metrics shows (the same as /readyz's "queued")
            await self._commit(batch)

    async def _commit(self, batch: list[Item]) -> None:
        backoff = Backoff(self.options.retry_initial, self.options.retry_max)
        while True:
            started = time.monotonic()
            try:
                for item in batch:
                    event = item.event
                    if item.target == "pods" and event is not None and event.type != "DELETED":
                        item.slice = await self.owners.slice_for(event.object)
                result = await asyncio.to_thread(self.writer.apply, batch)
                break
            except Exception as error:  # any failure: nothing was stored, so retrying is safe
                delay = backoff.next()
                metrics.INVENTORY_FAILURES.inc()
                log.warning(
                    "inventory batch of %d failed (%s: %s); retrying in %.1fs",
                    len(batch),
                    type(error).__name__,
                    error,
                    delay,
                )
                await asyncio.sleep(delay)
        metrics.INVENTORY_BATCH.observe(time.monotonic() - started)
        metrics.INVENTORY_ITEMS.inc(len(batch))
        for item in batch:
            if item.synced:
                self.synced_targets.add(item.target)
            elif item.event is not None:
                self.written[item.target] += 1
        if not self._synced.is_set() and self.synced_targets >= set(self.targets):
            log.info("%s: inventory synced", self.cluster)
            self._synced.set()
        if result.events and self.on_commit is not None:
            self.on_commit(result.events)
