"""The network translator (network/): the component that turns Kubernetes objects into networks.

    Engine (raven/) on the cluster's shared informers of Namespace, Pod, Service, and EndpointSlice (the version
    API discovery found at start) or Endpoints, a keyed queue each
        Namespace ──► network + subnet + security group (here)
        Pod       ──► pods.py: port on its namespace's network (Waiting until that network exists),
                      VIF annotation when our CNI wires the pod
        Service, EndpointSlices/Endpoints ──► loadbalancers.py: load balancer, listeners, pools, members,
                                              floating IP
        NetworkPolicy (+ pods' and namespaces' labels) ──► policies.py: a security group per policy,
                      pods' ports moved to the groups of the policies that select them
    every result ──► NetworkTranslation row (state.py: uid ↔ backend ids)
                 ──► annotation on the object (annotations.py: versioned, patched with its resourceVersion)
    start-up: shared infrastructure; every informer resumes from its stored watch position (a restart
              lists nothing); once synced,
              garbage collection of tagged resources whose object the informers do not know
              (deleted while kuberaven was stopped); again every gc_period, without any LIST

Ordering across objects is retry with backoff (the keyed queue's), never a
lock held across an await. Backend calls block, so they run in worker
threads; the translator does not know which backend it drives.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ..kube.backoff import Backoff
from ..kube.client import KubeClient
from ..kube.reflector import WatchEvent
from ..model.database import Database
from ..raven.engine import Engine, EngineOptions
from ..raven.informers import InformerFactory
from ..raven.positions import DatabasePositionStore
from ..raven.watcher import Watcher, WatchTarget
from .annotations import ANNOTATION, annotate, summary
from .backend import ANY_IPV4, CNI_KUBERAVEN, INFRASTRUCTURE, Infrastructure, NetworkBackend, NetworkOptions, tags
from .endpointslices import ENDPOINTS, ENDPOINTS_FIELDS, SLICE_FIELDS, is_slices
from .loadbalancers import SERVICE_FIELDS, LoadBalancers
from .pods import PORT_BATCH, PodPorts
from .policies import NetworkPolicies
from .policy import POD_POLICY_FIELDS
from .state import TranslationStore
from .translate import POD_PORT_FIELDS, translated_namespace

__all__ = ["ANNOTATION", "NetworkTranslator"]

log = logging.getLogger(__name__)

T = TypeVar("T")
POSITIONS_PREFIX = "network:"
RETRY_INITIAL, RETRY_MAX = 0.2, 30.0  # seconds: a failed object's backoff
NAMESPACES, PODS = WatchTarget("v1", "Namespace"), WatchTarget("v1", "Pod")
SERVICES = WatchTarget("v1", "Service")
POLICIES = WatchTarget("networking.k8s.io/v1", "NetworkPolicy")
# The backend resources made for each kind of object, for garbage collection.
MADE_FOR = {
    "Namespace": ("network", "security_group"), "Pod": ("port",), "Service": ("load_balancer", "floating_ip"),
    "NetworkPolicy": ("security_group",),
}  # fmt: skip


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
        concurrency: int = 16,
        gc_period: float = 600.0,
        informers: InformerFactory | None = None,
        members: WatchTarget = ENDPOINTS,
    ) -> None:
        """``informers``: the cluster's shared informers (the daemon's); without, the translator has its own.
        ``members``: what load balancers' members come from — the EndpointSlice version the cluster serves,
        as endpointslices.members_target() found it before the informers are declared, or Endpoints."""
        self.client = client
        self.database = database
        self.cluster = cluster
        self.backend = backend
        self.options = options or NetworkOptions()
        self.gc_period = gc_period
        self.infrastructure: Infrastructure | None = None
        self.store = TranslationStore(database, cluster, backend)
        if self.options.cni == CNI_KUBERAVEN and self.options.subnet_mode == "cluster":
            log.warning("network_cni=kuberaven with subnet mode cluster: pods of two namespaces can get one address")
        # Backend calls block (for seconds, while Octavia works): their own threads, so that
        # they neither starve nor are starved by other users of the default executor.
        self._executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="network")
        self.pods = PodPorts(client, self.store, backend, self.options, cluster, self._blocking)
        self.load_balancers = LoadBalancers(
            client, self.store, backend, self._blocking, concurrency=concurrency, retry_initial=RETRY_INITIAL,
            retry_max=RETRY_MAX, members=members,
        )  # fmt: skip
        self.policies = NetworkPolicies(
            client, self.store, backend, self.options, cluster, self._blocking, concurrency=concurrency,
            retry_initial=RETRY_INITIAL, retry_max=RETRY_MAX,
        ) if self.options.policies else None  # fmt: skip
        if self.policies is not None:
            self.pods.groups_for = self.policies.creation_groups
        self.engine = Engine(
            client, self._watchers(),
            options=EngineOptions(concurrency=concurrency, retry_initial=RETRY_INITIAL, retry_max=RETRY_MAX),
            informers=informers, positions=DatabasePositionStore(database, cluster, POSITIONS_PREFIX), name="network",
        )  # fmt: skip
        self.collected = asyncio.Event()  # set after each garbage collection (tests wait on it)
        self._stopping = asyncio.Event()

    def _watchers(self) -> list[Watcher]:
        annotations = "metadata.annotations"
        # Labels and named container ports are decoded only when policies are translated.
        pod_fields = (annotations, *POD_PORT_FIELDS, *(POD_POLICY_FIELDS if self.policies else ()))
        watchers = [
            Watcher(NAMESPACES, self._on_namespace, name="network-namespaces", fields=(annotations,)),
            # Pod handlers mostly wait on the port batcher: many at once fill its batches.
            Watcher(PODS, self._on_pod, name="network-pods", fields=pod_fields, concurrency=PORT_BATCH),
            Watcher(SERVICES, self.load_balancers.on_service, name="network-services", fields=SERVICE_FIELDS),
            self._members_watcher(),
        ]
        if self.policies is not None:
            # Listed at every start (both are few): the policies need every one of them, and every label.
            watchers += [
                Watcher(POLICIES, self.policies.on_policy, name="network-policies", fields=("spec",), needs_list=True,
                        on_synced=self.policies.on_policies_synced),
                Watcher(NAMESPACES, self.policies.on_namespace, name="network-policy-namespaces",
                        fields=("metadata.labels",), needs_list=True),
            ]  # fmt: skip
        return watchers

    async def _on_pod(self, event: WatchEvent) -> None:
        if self.policies is not None:
            self.policies.on_pod(event)
        await self.pods.on_pod(event)
        if self.policies is not None:
            self.policies.after_port(event)

    def _members_watcher(self) -> Watcher:
        target = self.load_balancers.members
        if is_slices(target):
            return Watcher(target, self.load_balancers.on_slice, name="network-endpointslices", fields=SLICE_FIELDS)
        return Watcher(target, self.load_balancers.on_endpoints, name="network-endpoints", fields=ENDPOINTS_FIELDS)

    # -- Component ---------------------------------------------------------

    async def run(self) -> None:
        self.infrastructure = await self._until_done(
            lambda: self._blocking(self.backend.ensure_infrastructure, self.cluster, self.options),
            "network infrastructure",
        )
        if self.infrastructure is None:
            return
        self.load_balancers.infrastructure = self.infrastructure
        await self.pods.load()
        if self.policies is not None:
            await self.policies.load()
            self.policies.queue.start()
        self.load_balancers.queue.start()
        engine = asyncio.create_task(self.engine.run(), name="network-engine")
        try:
            await self._until_synced(engine)
            while not self._stopping.is_set():
                await self._until_done(self.collect_garbage, "network garbage collection")
                self.collected.set()
                await self._sleep(self.gc_period)
        finally:
            self.engine.stop()
            await engine
            await self.load_balancers.queue.stop(10.0)
            if self.policies is not None:
                await self.policies.queue.stop(10.0)
            await self._blocking(self.backend.close)
            self._executor.shutdown(wait=False)

    def stop(self) -> None:
        self._stopping.set()

    def ready(self) -> bool:
        """Ready once every object listed at start is translated (not merely received), and while watching."""
        return self.infrastructure is not None and self.engine.ready() and self.engine.handled_initial_state()

    def status(self) -> list[dict[str, Any]]:
        queues = [("load balancers", self.load_balancers.queue)]
        queues += [("network policies", self.policies.queue)] if self.policies else []
        return [{**s, "component": "network", "backend": self.backend.name} for s in self.engine.status()] + [
            {"component": "network", "target": target, "queued": len(queue)} for target, queue in queues
        ]

    async def _until_synced(self, engine: asyncio.Task[None]) -> None:
        """Garbage collection compares with what the informers know: only once they have synced."""
        synced = asyncio.create_task(self.engine.wait_synced())
        stopping = asyncio.create_task(self._stopping.wait())
        await asyncio.wait({synced, stopping, engine}, return_when=asyncio.FIRST_COMPLETED)
        for task in (synced, stopping):
            task.cancel()
        if engine.done():
            engine.result()  # it crashed: say why

    def _blocking(self, call: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        return asyncio.get_running_loop().run_in_executor(self._executor, call, *args)

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _until_done(self, call: Callable[[], Awaitable[T]], what: str) -> T | None:
        """Await ``call()`` until it succeeds (backoff 1 s → 60 s) or we stop."""
        backoff = Backoff(1.0, 60.0)
        while not self._stopping.is_set():
            try:
                return await call()
            except Exception as error:
                delay = backoff.next()
                log.warning("%s failed (%s); retrying in %.0f s", what, error, delay)
                await self._sleep(delay)
        return None

    # -- garbage collection -------------------------------------------------

    async def collect_garbage(self) -> int:
        """Delete tagged resources and translation rows of objects the informers do not know; returns how many.

        What the backend holds is read *before* the informers' known objects:
        anything made for an object that existed then is kept if it still
        exists now. A kind whose informer resumed from a position without a
        list knows only what changed since, so its resources are left alone
        (its DELETED events, replayed from the position, remove them).
        """
        owned = await self._blocking(self.backend.owned, self.cluster)
        live: set[str] = set()
        collected: set[str] = set()
        informed = [("Namespace", NAMESPACES), ("Pod", PODS), ("Service", SERVICES)]
        informed += [("NetworkPolicy", POLICIES)] if self.policies else []
        for kind, target in informed:
            informer = self.engine.factory.informer(target)
            live |= informer.known_uids()
            if informer.knows_all:
                collected.update(MADE_FOR[kind])
        garbage = [
            r for r in owned if r.kind in collected and r.uid not in (None, INFRASTRUCTURE) and r.uid not in live
        ]
        for resource in garbage:
            log.info("removing %s %s (%s): its object is gone", resource.kind, resource.name, resource.id)
            await self._blocking(self.backend.delete, resource.kind, resource.id)
        kinds = [kind for kind, made in MADE_FOR.items() if set(made) <= collected]
        await self._blocking(self.store.forget_all_but, live, kinds)
        return len(garbage)

    # -- namespaces ---------------------------------------------------------

    async def _on_namespace(self, event: WatchEvent) -> None:
        namespace = event.object
        meta = namespace["metadata"]
        if event.type == "DELETED":
            await self._blocking(self.store.forget, "Namespace", meta["uid"], ("network", "security_group"))
            return
        if not translated_namespace(meta["name"], self.options):
            return
        state = await self._blocking(self.store.state, "Namespace", meta["uid"])
        if state is None:
            state = await self._blocking(self._translate_namespace, meta["name"], meta["uid"])
        await self._blocking(self._connect_namespace, state)
        value = summary(self.backend.name, {k: state.get(k) for k in ("network", "subnet", "cidr")})
        await annotate(self.client, "Namespace", namespace, ANNOTATION, value)

    def _connect_namespace(self, state: dict[str, Any]) -> None:
        """What lets a namespace's pods be reached and reach out; idempotent, so namespaces translated
        by an older kuberaven get it too."""
        assert self.infrastructure is not None
        # Load balancers reach their members from the Services' subnet (Octavia's amphorae, the VIPs),
        # and pods no NetworkPolicy selects (they keep this group) are open to all, as Kubernetes has it.
        self.backend.ensure_ingress_rule(state["security_group"], self.options.service_cidr)
        self.backend.ensure_ingress_rule(state["security_group"], ANY_IPV4)
        if self.options.subnet_mode == "namespace":
            # The namespace's own subnet joins the cluster router: its pods reach the Services' subnet
            # and the outside. (In cluster mode every namespace has the same CIDR: one router cannot
            # hold them all.)
            self.backend.ensure_router_interface(self.infrastructure.router, state["subnet"])

    def _translate_namespace(self, name: str, uid: str) -> dict[str, Any]:
        assert self.infrastructure is not None
        resource_tags = tags(self.cluster, uid)
        network = self.backend.ensure_network(name, resource_tags)
        if self.options.subnet_mode == "namespace":
            subnet = self.backend.ensure_subnet(
                network, name, resource_tags, pool=self.infrastructure.subnet_pool, prefix=self.options.namespace_prefix
            )
        else:
            subnet = self.backend.ensure_subnet(network, name, resource_tags, cidr=self.options.pod_cidr)
        group = self.backend.ensure_security_group(f"namespace-{name}", resource_tags)
        state = {
            "network": network, "subnet": subnet.id, "cidr": subnet.cidr, "gateway": subnet.gateway,
            "security_group": group,
        }  # fmt: skip
        self.store.save("Namespace", uid, None, name, state)
        return state
