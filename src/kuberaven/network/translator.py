"""The network translator (network/): the component that turns Kubernetes objects into networks.

    the cluster's shared informers of Namespace, Pod, Service, EndpointSlice (the version API discovery found at
    start) or Endpoints, and NetworkPolicy, each with a slim store read through listers (watch/store.py)
        ──► Engine (watch/engine.py): events ──► keys ──► a controller per reconciler (watch/controller.py)
        Namespace ──► namespaces.py: network + subnet + security group
        Pod       ──► pods.py: port on its namespace's network (Waiting until that network exists), with the
                      groups policies and Services' source ranges give it, VIF annotation when our CNI wires
                      the pod; with our CNI on Neutron, a port taken from the pod's pool (pools.py: made ahead
                      in bulk, refilled in the background), its status as activation.py reports it
                      (port_reports.py); the one writer of a pod's row, VIF and port groups
        Node      ──► nodes.py: the pools follow the nodes (only with pools); a nested node's (a VM whose port is a
                      trunk's parent: trunks.py) pods take subports of its trunk
        Service, EndpointSlices/Endpoints ──► loadbalancers.py: load balancer, listeners, pools, members,
                                              floating IP
        NetworkPolicy (+ pods' and namespaces' labels) ──► network_policies.py: a security group per policy;
                      the pods whose selection changed queued to pods.py
    every result ──► NetworkTranslation row (state.py: uid ↔ backend ids)
                 ──► annotation on the object (annotations.py: versioned, patched with its resourceVersion)
    start-up: shared infrastructure; every informer resumes from its stored watch position (a restart
              lists nothing); once synced,
              garbage collection of tagged resources whose object the informers do not know
              (deleted while kuberaven was stopped); again every gc_period, without any LIST

Each reconciler is level-triggered: it reads the newest state by key, so a
burst of changes is one reconcile and a retry reads what is current.
Ordering across objects is retry with backoff (the work queue's), never a
lock held across an await. A reconciler queues another's keys through a
typed handle (watch/reconciler.py's Enqueue), never by the other's name.
Backend calls block, so they run in the threads of the cluster's translation
runtime (translation_runtime.py: one store, one set of threads, one Event
recorder per cluster, shared with activation.py); the translator does not
know which backend it drives. Its own loops (the start-up's retries, the
pools' refills, the garbage collection) stand on kube/loops.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
from collections.abc import Iterator

from ..component_status import ComponentStatus
from ..kube.backoff import Backoff
from ..kube.client import KubeClient
from ..kube.loops import Loops
from ..kube.uids import compact_uid
from ..model.database import Database
from ..watch.engine import Engine, EngineOptions
from ..watch.informers import InformerFactory, running
from ..watch.positions import DatabasePositionStore
from ..watch.reconciler import Reconciler
from ..watch.watcher import WatchTarget
from .annotations import ANNOTATION
from .backend import (
    CNI_KUBERAVEN,
    INFRASTRUCTURE,
    OWNED_PAGE,
    SOURCE_FILTERS_KIND,
    BackendError,
    NetworkOptions,
    Owned,
)
from .drivers import NetworkBackend, pools_ports, trunks_subports
from .drivers.networks import Infrastructure
from .endpointslices import ENDPOINTS
from .pools import PortPools
from .reconcilers.loadbalancers import SERVICES, LoadBalancers
from .reconcilers.namespaces import NAMESPACES, NamespaceNetworks
from .reconcilers.network_policies import POLICIES, NetworkPolicies
from .reconcilers.nodes import NODES, NodesReconciler
from .reconcilers.pods import PODS, PodsReconciler
from .rules.translate import POD_PORT_FIELDS
from .rules.trunks import NODE_TRUNK_ANNOTATION, NODE_TRUNK_FIELDS
from .translation_runtime import TranslationRuntime
from .trunks import NodeTrunks
from .vif import VIF_ANNOTATION

__all__ = ["ANNOTATION", "NetworkTranslator"]

log = logging.getLogger(__name__)

POSITIONS_PREFIX = "network:"
RETRY_INITIAL, RETRY_MAX = 0.2, 30.0  # seconds: a failed key's backoff
# Seconds: the backoff of a failed start-up step (the shared infrastructure, the pools' load) or collection.
AGAIN_INITIAL, AGAIN_MAX = 1.0, 60.0
# The start-up's and the collection's failures are logged in one line each, whatever they are: a cloud that
# does not answer yet says so on every try.
EXPECTED = (Exception,)
# The backend resources made for each kind of object, for garbage collection.
MADE_FOR = {
    "Namespace": ("network", "security_group"),
    "Pod": ("port",),
    "Service": ("load_balancer", "floating_ip", SOURCE_FILTERS_KIND),
    "NetworkPolicy": ("security_group",),
}


class NetworkTranslator:
    """One cluster's translation, run by ``kuberaven run`` (a Component of the daemon)."""

    def __init__(
        self,
        client: KubeClient,
        database: Database,
        cluster: str,
        backend: NetworkBackend,
        options: NetworkOptions | None = None,
        *,
        concurrency: int = EngineOptions.concurrency,
        shutdown_timeout: float = EngineOptions.shutdown_timeout,
        gc_period: float = 600.0,
        informers: InformerFactory | None = None,
        members: WatchTarget = ENDPOINTS,
    ) -> None:
        """``informers``: the cluster's shared informers (the daemon's); without, the translator has its own.
        ``members``: what load balancers' members come from — the EndpointSlice version the cluster serves,
        as endpointslices.members_target() found it before the informers are declared, or Endpoints.
        ``concurrency`` and ``shutdown_timeout``: the watch engine's settings, for the translation's own engine;
        ``concurrency`` is also how many backend calls run at once (the runtime's threads)."""
        self.client = client
        self.cluster = cluster
        self.backend = backend
        self.options = options or NetworkOptions()
        self.gc_period = gc_period
        self.infrastructure: Infrastructure | None = None
        # The cluster's one store, threads, Event recorder and reports: activation.py runs on them too.
        self.runtime = TranslationRuntime(client, database, cluster, backend, workers=concurrency, informers=informers)
        self.store = self.runtime.store
        self.factory = self.runtime.informers
        self._blocking = self.runtime.blocking
        self._loops = Loops()
        context = self.runtime.context(self.options, self._infrastructure)
        self.trunks: NodeTrunks | None = None
        self.pools, node_pools = self._pools(backend)
        self.namespaces = NamespaceNetworks(
            context, self.factory.lister(NAMESPACES, (), annotations=(ANNOTATION,)), self.pools
        )
        self.policies = NetworkPolicies(context, self.factory, self.pools) if self.options.policies else None
        self.load_balancers = LoadBalancers(context, self.factory, members)
        self.pods = PodsReconciler(
            context,
            self.factory.lister(PODS, POD_PORT_FIELDS, annotations=(VIF_ANNOTATION,)),
            self.pools,
            self.policies,
            self.trunks,
            self.load_balancers.ranges,
            self.runtime.reports,  # ports' status, as the cluster's activation.py reports it
        )
        reconcilers: list[Reconciler] = [
            self.namespaces.reconciler(),
            self.pods.reconciler(),
            self.load_balancers.reconciler(concurrency),
            *([node_pools.reconciler()] if node_pools is not None else []),
            *([self.policies.reconciler(concurrency)] if self.policies is not None else []),
        ]
        engine = EngineOptions(
            concurrency=concurrency, shutdown_timeout=shutdown_timeout, retry_initial=RETRY_INITIAL, retry_max=RETRY_MAX
        )
        positions = DatabasePositionStore(database, cluster, POSITIONS_PREFIX)
        self.engine = Engine(
            client, reconcilers=reconcilers, informers=self.factory, name="network", options=engine, positions=positions
        )
        self.collected = asyncio.Event()  # set after each garbage collection (tests wait on it)

    def _infrastructure(self) -> Infrastructure:
        """The reconcilers' view of the shared infrastructure: the engine starts only once it is made."""
        assert self.infrastructure is not None, "reconciled before the shared infrastructure was made"
        return self.infrastructure

    def _pools(self, backend: NetworkBackend) -> tuple[PortPools | None, NodesReconciler | None]:
        """Port pools, and the nodes reconciler they follow, where pods take pooled ports: our CNI wires them
        and the backend makes ports in bulk (openstack)."""
        if self.options.cni != CNI_KUBERAVEN or not pools_ports(backend):
            return None, None
        nodes = self.factory.lister(NODES, NODE_TRUNK_FIELDS, annotations=(NODE_TRUNK_ANNOTATION,))
        trunks = NodeTrunks(backend, nodes, self.client, self._blocking) if trunks_subports(backend) else None
        self.trunks = trunks

        async def node_trunks() -> dict[str, str | None]:
            """Each node's trunk id (None: bare); a node whose trunk cannot be told gets no pools yet."""
            await nodes.ensure_complete()  # a store resumed without a list knows only the nodes that changed
            found: dict[str, str | None] = {}
            for name in [node["metadata"]["name"] for node in nodes.all()]:
                try:
                    trunk = await trunks.of(name) if trunks is not None else None
                except BackendError:  # the nodes reconciler and the node's pods report it
                    continue
                found[name] = trunk.id if trunk is not None else None
            return found

        pools = PortPools(self.store, backend, self.options, self.cluster, node_trunks)
        return pools, NodesReconciler(pools, nodes, self._blocking, trunks)

    # -- Component ---------------------------------------------------------

    async def run(self) -> None:
        async with self.runtime.running():
            try:
                await self._run()
            finally:
                await self._loops.join()

    async def _run(self) -> None:
        """The shared infrastructure and what was translated before, then the engine, the pools' refills and
        every gc_period a garbage collection, until stopped; each start-up step retried until it succeeds."""
        self.infrastructure = await self._loops.retry(
            lambda: self._blocking(self.backend.ensure_infrastructure, self.cluster, self.options),
            "network infrastructure",
            Backoff(AGAIN_INITIAL, AGAIN_MAX),
            quiet=EXPECTED,
        )
        if self.infrastructure is None:
            return  # stopped first
        await self.pods.load()
        await self._blocking(self.load_balancers.ranges.load)
        pools = self.pools
        if pools is not None:
            loaded = await self._loops.retry(
                lambda: self._blocking(pools.load), "port pools", Backoff(AGAIN_INITIAL, AGAIN_MAX), quiet=EXPECTED
            )
            if loaded is None:
                return  # stopped before the pools were loaded
        if self.policies is not None:
            await self.policies.load()
        async with running(self.factory, self.runtime.owns_informers):
            engine = asyncio.create_task(self.engine.run(), name="network-engine")
            if pools is not None:
                self._loops.start(pools.run(self._blocking, self._loops), "network-pools")
            try:
                await self._until_synced(engine)
                if self.policies is not None:
                    self.policies.resync()
                await self._loops.every(
                    self.gc_period,
                    self._collect,
                    "network garbage collection",
                    retry=Backoff(AGAIN_INITIAL, AGAIN_MAX),
                    quiet=EXPECTED,
                )
            finally:
                self.engine.stop()
                await engine
                await self._loops.join()  # the refills in flight awaited

    def stop(self) -> None:
        self._loops.stop()

    def ready(self) -> bool:
        """Ready once every object listed at start is translated (not merely received), and while watching."""
        return self.infrastructure is not None and self.engine.ready() and self.engine.handled_initial_state()

    def status(self) -> list[ComponentStatus]:
        return [dataclasses.replace(s, component="network", backend=self.backend.name) for s in self.engine.status()]

    async def _until_synced(self, engine: asyncio.Task[None]) -> None:
        """Garbage collection compares with what the informers know: only once they have synced."""
        synced = asyncio.create_task(self.engine.wait_synced())
        stopping = asyncio.create_task(self._loops.wait())
        await asyncio.wait({synced, stopping, engine}, return_when=asyncio.FIRST_COMPLETED)
        for task in (synced, stopping):
            task.cancel()
        if engine.done():
            engine.result()  # it crashed: say why

    async def _collect(self) -> None:
        await self.collect_garbage()
        self.collected.set()

    # -- garbage collection -------------------------------------------------

    async def collect_garbage(self) -> int:
        """Delete tagged resources and translation rows of objects the informers do not know; returns how many.

        The backend's resources are read a page at a time (a cluster has a port per pod, and a list of all of
        them at the end of the cold start, when the stores are fullest, would be the start's peak of memory). A
        resource whose object the informers did not know when the collection began is a suspect; it is
        deleted only if its object is still unknown *after* its page was read, so a resource made meanwhile
        for a new object is kept (the resource is read before the knowledge it is compared with). A
        kind whose informer resumed from a position without a list knows only what changed since, so its
        resources are left alone (its DELETED events, replayed from the position, remove them); a kind of
        resource made for several kinds of object (security groups: for Namespaces and NetworkPolicies) is
        collected only when all of them know every object.
        """
        informed = [("Namespace", NAMESPACES), ("Pod", PODS), ("Service", SERVICES)]
        informed += [("NetworkPolicy", POLICIES)] if self.policies else []
        partial: set[str] = set()  # resource kinds some informer that resumed without a list may still own
        for kind, target in informed:
            if not self.factory.informer(target).knows_all:
                partial.update(MADE_FOR[kind])
        collected = {made for kind, _ in informed for made in MADE_FOR[kind]} - partial
        targets = [target for _, target in informed]
        live = self._known_uids(targets)
        resources = iter(await self._blocking(self.backend.owned, self.cluster))
        removed = 0
        while page := await self._blocking(_next_page, resources):
            suspects = {
                r.uid for r in page if r.kind in collected and r.uid is not None and is_collectable(r.uid, live)
            }
            if suspects:
                known = self._known_uids(targets)  # known now, after the page was read: kept
                suspects = {uid for uid in suspects if compact_uid(uid) not in known}
                del known
            for resource in page:
                if resource.kind in collected and resource.uid in suspects:
                    log.info("removing %s %s (%s): its object is gone", resource.kind, resource.name, resource.id)
                    await self._blocking(self.backend.delete, resource.kind, resource.id)
                    removed += 1
        del live  # one set of every uid at a time: the rows are compared with what is known now
        kinds = [kind for kind, made in MADE_FOR.items() if set(made) <= collected]
        await self._blocking(self.store.forget_all_but, self._known_uids(targets), kinds)
        return removed

    def _known_uids(self, targets: list[WatchTarget]) -> set[int | str]:
        """The compact uids (kube/uids.py) of every object the informers know: made at the end of the cold start,
        when the stores are fullest, so ints rather than a string per object, and one set, not one per informer."""
        known: set[int | str] = set()
        for target in targets:
            known.update(self.factory.informer(target).known_uid_keys())
        return known


def _next_page(resources: Iterator[Owned]) -> list[Owned]:
    """The next page of owned(): read in a worker thread, since the backend reads as it is iterated."""
    return list(itertools.islice(resources, OWNED_PAGE))


def is_collectable(uid: str | None, live: set[int | str]) -> bool:
    """A resource tagged with an object's uid (not the cluster's shared infrastructure) that is not live (``live``:
    compact uids, kube/uids.py)."""
    return uid is not None and uid != INFRASTRUCTURE and compact_uid(uid) not in live
