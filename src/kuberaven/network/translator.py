"""The network translator (network/): Kubernetes objects → networks, ports and load balancers.

    Engine (raven/) on the cluster's shared informers of Namespace, Pod, Service, Endpoints, a keyed queue each
        Namespace ──► network + subnet + security group
        Pod       ──► port on its namespace's network          (Waiting until that network exists)
        Service, Endpoints ──► latest of each, by name ──► load-balancer keyed queue ──► sync
    every result ──► NetworkTranslation row (uid ↔ backend ids)
                 ──► annotation kuberaven.io/network on the object (versioned, patched with its
                     resourceVersion; on 409 re-read and patch again only if still needed)
    start-up: shared infrastructure; pods and namespaces resume from their stored watch positions
              (Services and Endpoints are listed: the load balancers join the two); once synced,
              garbage collection of tagged resources whose object the informers do not know
              (deleted while kuberaven was stopped); again every gc_period, without any LIST

A load balancer is synced as kuryr did it: remove unused members, then unused
listeners with their pools; ensure the load balancer; add listeners with
pools, then members; then the floating IP of a LoadBalancer Service, written
to its status. Ordering across objects is retry with backoff (the keyed
queue's), never a lock held across an await. Backend calls block, so they
run in worker threads; the translator does not know which backend it drives.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import sqlalchemy as sa

from ..kube.backoff import Backoff
from ..kube.client import KubeClient
from ..kube.errors import Conflict, NotFound
from ..kube.reflector import WatchEvent
from ..model.database import Database
from ..model.network import NetworkTranslation
from ..raven.batcher import Batcher
from ..raven.engine import Engine, EngineOptions
from ..raven.informers import InformerFactory
from ..raven.positions import DatabasePositionStore
from ..raven.queue import KeyedQueue, Waiting
from ..raven.watcher import Watcher, WatchTarget
from .backend import INFRASTRUCTURE, AddressInUse, Infrastructure, NetworkBackend, NetworkOptions, PortRequest, tags
from .translate import POD_PORT_FIELDS, LoadBalancerSpec, PodPort, pod_port, service_load_balancer, translated_namespace

log = logging.getLogger(__name__)

ANNOTATION = "kuberaven.io/network"
STATE_VERSION = 1
T = TypeVar("T")
POSITIONS_PREFIX = "network:"
PORT_BATCH = 256  # pods whose ports are made in one backend call (and one transaction of translation rows)
GC_CHUNK = 500
NAMESPACES, PODS = WatchTarget("v1", "Namespace"), WatchTarget("v1", "Pod")
SERVICES, ENDPOINTS = WatchTarget("v1", "Service"), WatchTarget("v1", "Endpoints")
# The backend resources made for each kind of object, for garbage collection.
MADE_FOR = {"Namespace": ("network", "security_group"), "Pod": ("port",), "Service": ("load_balancer", "floating_ip")}


def _object_path(kind: str, namespace: str | None, name: str) -> str:
    if kind == "Namespace":
        return f"/api/v1/namespaces/{name}"
    return f"/api/v1/namespaces/{namespace}/{kind.lower()}s/{name}"


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
    ) -> None:
        """``informers``: the cluster's shared informers (the daemon's); without, the translator has its own."""
        self.client = client
        self.database = database
        self.cluster = cluster
        self.backend = backend
        self.options = options or NetworkOptions()
        self.gc_period = gc_period
        self.infrastructure: Infrastructure | None = None
        self.services: dict[str, dict[str, Any]] = {}
        self.endpoints: dict[str, dict[str, Any]] = {}
        retry = {"retry_initial": 0.2, "retry_max": 30.0}
        self.engine = Engine(
            client, self._watchers(), options=EngineOptions(concurrency=concurrency, **retry),
            informers=informers, positions=DatabasePositionStore(database, cluster, POSITIONS_PREFIX), name="network",
        )  # fmt: skip
        self.load_balancers = KeyedQueue(
            "network-load-balancers", self._sync_load_balancer, lambda _seqs: None, concurrency=concurrency, **retry
        )
        # Backend calls block (for seconds, while Octavia works): their own threads, so that
        # they neither starve nor are starved by other users of the default executor.
        self._executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="network")
        self.ports: Batcher[PodPort, None] = Batcher(self._ensure_ports, self._blocking, size=PORT_BATCH)
        self.collected = asyncio.Event()  # set after each garbage collection (tests wait on it)
        # uids of pods that may have a port (a superset: loaded at start, added on translation).
        # A pod without an IP that is not in it has nothing to forget, and costs no query:
        # on a cold start most events are of pods not yet scheduled.
        self._ported: set[str] = set()
        self._stopping = asyncio.Event()

    def _watchers(self) -> list[Watcher]:
        annotations = "metadata.annotations"
        return [
            Watcher(NAMESPACES, self._on_namespace, name="network-namespaces", fields=(annotations,)),
            # Pod handlers mostly wait on the port batcher: many at once fill its batches.
            Watcher(PODS, self._on_pod, name="network-pods", fields=(annotations, *POD_PORT_FIELDS),
                    concurrency=PORT_BATCH),
            Watcher(SERVICES, self._on_service, name="network-services", fields=(annotations, "spec", "status"),
                    needs_list=True),
            Watcher(ENDPOINTS, self._on_endpoints, name="network-endpoints", fields=("subsets",), needs_list=True),
        ]  # fmt: skip

    # -- Component ---------------------------------------------------------

    async def run(self) -> None:
        self.infrastructure = await self._until_done(
            lambda: self._blocking(self.backend.ensure_infrastructure, self.cluster, self.options),
            "network infrastructure",
        )
        if self.infrastructure is None:
            return
        self._ported = await self._blocking(self._uids_of, "Pod")
        self.load_balancers.start()
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
            await self.load_balancers.stop(10.0)
            await self._blocking(self.backend.close)
            self._executor.shutdown(wait=False)

    def stop(self) -> None:
        self._stopping.set()

    def ready(self) -> bool:
        """Ready once every object listed at start is translated (not merely received), and while watching."""
        return self.infrastructure is not None and self.engine.ready() and self.engine.handled_initial_state()

    def status(self) -> list[dict[str, Any]]:
        return [{**s, "component": "network", "backend": self.backend.name} for s in self.engine.status()] + [
            {"component": "network", "target": "load balancers", "queued": len(self.load_balancers)}
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
        for kind, target in (("Namespace", NAMESPACES), ("Pod", PODS), ("Service", SERVICES)):
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
        await self._blocking(self._forget_all_but, live, kinds)
        return len(garbage)

    # -- namespaces ---------------------------------------------------------

    async def _on_namespace(self, event: WatchEvent) -> None:
        namespace = event.object
        meta = namespace["metadata"]
        if event.type == "DELETED":
            await self._blocking(self._forget, "Namespace", meta["uid"], ("network", "security_group"))
            return
        if not translated_namespace(meta["name"], self.options):
            return
        state = await self._blocking(self._state, "Namespace", meta["uid"])
        if state is None:
            state = await self._blocking(self._translate_namespace, meta["name"], meta["uid"])
        await self._annotate("Namespace", namespace, {"network": state["network"], "subnet": state["subnet"]})

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
        state = {"network": network, "subnet": subnet.id, "cidr": subnet.cidr, "security_group": group}
        self._save("Namespace", uid, None, name, state)
        return state

    # -- pods -----------------------------------------------------------------

    async def _on_pod(self, event: WatchEvent) -> None:
        pod = event.object
        meta = pod["metadata"]
        spec = None if event.type == "DELETED" else pod_port(pod)
        if spec is None:
            if meta["uid"] in self._ported:
                await self._blocking(self._forget, "Pod", meta["uid"], ("port",))
                self._ported.discard(meta["uid"])
            return
        if not translated_namespace(meta["namespace"], self.options):
            return
        port = PodPort(spec.name, spec.address, meta["uid"], meta["namespace"], meta["name"])
        try:
            await self.ports.submit(port)
        except AddressInUse as in_use:
            # The CNI reuses addresses: the holder may be the port of a pod that is gone.
            if not await self._stale_holder(in_use):
                raise
            log.info("releasing %s, held by a pod that is gone", in_use.address)
            await self._blocking(self.backend.delete, "port", in_use.holder)
            await self.ports.submit(port)
        # No annotation on a pod: its IP came from the cluster's CNI, which reads none, and a
        # patch per pod doubled a cold start's API writes and watch events (docs/network.md).

    def _ensure_ports(self, ports: list[PodPort]) -> list[BaseException | None]:
        """A batch of pods' ports, made unless they exist for their IPs, and their translation rows (worker thread)."""
        results: list[BaseException | None] = [None] * len(ports)
        # A pod not in _ported has no translation row: no query for it (most pods of a cold start).
        states = self._states("Pod", [p.uid for p in ports if p.uid in self._ported])
        namespaces: dict[str, dict[str, Any] | None] = {}
        asked: list[tuple[int, PortRequest]] = []
        for index, port in enumerate(ports):
            state = states.get(port.uid)
            if state is not None and state["pod_ip"] == port.pod_ip:
                continue
            if port.namespace not in namespaces:
                namespaces[port.namespace] = self._namespace_state(port.namespace)
            namespace = namespaces[port.namespace]
            if namespace is None:
                results[index] = Waiting(f"namespace {port.namespace} has no network yet")
                continue
            # In "cluster" mode the port keeps the IP the cluster's CNI gave the pod; in
            # "namespace" mode the namespace's subnet has its own addresses and its IPAM picks one.
            fixed = port.pod_ip if self.options.subnet_mode == "cluster" else None
            asked.append((index, PortRequest(
                namespace["network"], namespace["subnet"], port.name, port.uid, fixed,
                [namespace["security_group"]], tags(self.cluster, port.uid),
            )))  # fmt: skip
        made = self.backend.ensure_ports([request for _, request in asked])
        rows: list[tuple[str, str, str | None, str, dict[str, Any]]] = []
        for (index, request), outcome in zip(asked, made, strict=True):
            if isinstance(outcome, BaseException):
                results[index] = outcome
                continue
            pod = ports[index]
            self._ported.add(pod.uid)
            state = {"port": outcome.id, "address": outcome.address, "pod_ip": pod.pod_ip, "network": request.network}
            rows.append(("Pod", pod.uid, pod.namespace, pod.pod, state))
        self._save_many(rows)
        return results

    async def _stale_holder(self, in_use: AddressInUse) -> bool:
        holder = await self._blocking(self._state_row, "Pod", in_use.device_id) if in_use.device_id else None
        if holder is None:
            return in_use.device_id is not None  # a pod port we no longer track
        try:
            pod = await self.client.request("GET", _object_path("Pod", holder.namespace, holder.name))
        except NotFound:
            return True
        return pod["metadata"]["uid"] != in_use.device_id or pod_port(pod) is None

    # -- services and endpoints -----------------------------------------------

    async def _on_service(self, event: WatchEvent) -> None:
        self._remember(self.services, event)

    async def _on_endpoints(self, event: WatchEvent) -> None:
        self._remember(self.endpoints, event)

    def _remember(self, latest: dict[str, dict[str, Any]], event: WatchEvent) -> None:
        if event.type == "DELETED":
            latest.pop(event.key, None)
        else:
            latest[event.key] = event.object
        meta = event.object["metadata"]
        marker = {"metadata": {"namespace": meta["namespace"], "name": meta["name"]}}
        self.load_balancers.add(event.key, WatchEvent("MODIFIED", marker), 0)

    async def _sync_load_balancer(self, event: WatchEvent) -> None:
        meta = event.object["metadata"]
        service = self.services.get(event.key)
        spec = service_load_balancer(service, self.endpoints.get(event.key)) if service else None
        uid = service["metadata"]["uid"] if service else None
        # A Service deleted (or recreated under the same name): its old load balancer goes.
        for row in await self._blocking(self._rows_named, "Service", meta["namespace"], meta["name"]):
            if spec is None or row.uid != uid:
                await self._blocking(self._forget, "Service", row.uid, ("floating_ip", "load_balancer"))
        if spec is None or service is None or uid is None:
            return
        state = await self._blocking(self._state, "Service", uid)
        if state is None or state["digest"] != spec.digest():
            subnet = await self._member_subnet(spec, meta["namespace"])
            state = await self._blocking(self._translate_service, spec, service, subnet, state)
        await self._write_status(service, state.get("floating_address"))
        summary = {k: state[k] for k in ("load_balancer", "vip_address", "listeners", "members", "floating_address")}
        await self._annotate("Service", service, summary)

    async def _member_subnet(self, spec: LoadBalancerSpec, namespace: str) -> str | None:
        if not any(listener.members for listener in spec.listeners):
            return None
        state = await self._blocking(self._namespace_state, namespace)
        if state is None:
            raise Waiting(f"namespace {namespace} has no network yet")
        return str(state["subnet"])

    def _translate_service(
        self, spec: LoadBalancerSpec, service: dict[str, Any], subnet: str | None, previous: dict[str, Any] | None
    ) -> dict[str, Any]:
        assert self.infrastructure is not None
        meta = service["metadata"]
        resource_tags = tags(self.cluster, meta["uid"])
        backend = self.backend
        lb = backend.ensure_load_balancer(
            spec.name, self.infrastructure.service_subnet, spec.vip_address, resource_tags
        )
        existing = {(listener.protocol, listener.port): listener for listener in backend.listeners(lb.id)}
        wanted = {listener.key: listener for listener in spec.listeners}
        # 1. unused members of the listeners that stay, 2. unused listeners with their pools
        members: dict[tuple[str, int], set[tuple[str, int]]] = {}
        for key, listener in list(existing.items()):
            if key not in wanted:
                backend.delete_listener(lb.id, listener)
                del existing[key]
                continue
            assert listener.pool is not None
            keep = {(m.address, m.port) for m in wanted[key].members}
            members[key] = set()
            for member in backend.members(listener.pool):
                if (member.address, member.port) in keep:
                    members[key].add((member.address, member.port))
                else:
                    backend.delete_member(lb.id, listener.pool, member.id)
        # 3. (the load balancer is ensured above) 4. new listeners with pools, 5. new members
        for key, listener_spec in wanted.items():
            if key not in existing:
                existing[key] = backend.create_listener(
                    lb.id, listener_spec.name, listener_spec.protocol, listener_spec.port, resource_tags
                )
            pool = existing[key].pool
            assert pool is not None
            for member in listener_spec.members:
                if (member.address, member.port) not in members.get(key, set()):
                    assert subnet is not None
                    backend.create_member(lb.id, pool, member.name, member.address, member.port, subnet, resource_tags)
        floating = self._floating_ip(spec, lb.vip_port, resource_tags, previous)
        state = {
            "digest": spec.digest(),
            "load_balancer": lb.id,
            "vip_address": lb.vip_address,
            "listeners": sorted(listener.name for listener in spec.listeners),
            "members": sum(len(listener.members) for listener in spec.listeners),
            "floating_ip": floating[0] if floating else None,
            "floating_address": floating[1] if floating else None,
        }
        self._save("Service", meta["uid"], meta["namespace"], meta["name"], state)
        return state

    def _floating_ip(
        self, spec: LoadBalancerSpec, vip_port: str, resource_tags: list[str], previous: dict[str, Any] | None
    ) -> tuple[str, str] | None:
        assert self.infrastructure is not None
        if spec.floating_ip:
            fip = self.backend.ensure_floating_ip(
                self.infrastructure.external_network, vip_port, spec.floating_address, resource_tags
            )
            return fip.id, fip.address
        if previous and previous.get("floating_ip"):  # no longer type LoadBalancer
            self.backend.delete("floating_ip", previous["floating_ip"])
        return None

    async def _write_status(self, service: dict[str, Any], address: str | None) -> None:
        """status.loadBalancer.ingress[0].ip: what ``kubectl get svc`` shows as EXTERNAL-IP."""
        ingress = (service.get("status", {}).get("loadBalancer") or {}).get("ingress") or []
        current = ingress[0].get("ip") if ingress else None
        if current == address:
            return
        meta = service["metadata"]
        body = {"status": {"loadBalancer": {"ingress": [{"ip": address}] if address else None}}}
        path = _object_path("Service", meta["namespace"], meta["name"]) + "/status"
        with contextlib.suppress(NotFound):
            await self.client.request("PATCH", path, body=body, content_type="application/merge-patch+json")

    # -- annotations ----------------------------------------------------------

    async def _annotate(self, kind: str, obj: dict[str, Any], summary: dict[str, Any]) -> None:
        """Write the versioned summary, guarded by resourceVersion; on 409 re-read and retry if still needed."""
        value = json.dumps({"version": STATE_VERSION, "backend": self.backend.name, **summary}, sort_keys=True)
        meta = obj["metadata"]
        path = _object_path(kind, meta.get("namespace"), meta["name"])
        for _ in range(5):
            if (meta.get("annotations") or {}).get(ANNOTATION) == value:
                return
            body = {"metadata": {"resourceVersion": meta["resourceVersion"], "annotations": {ANNOTATION: value}}}
            try:
                await self.client.request("PATCH", path, body=body, content_type="application/merge-patch+json")
                return
            except NotFound:
                return  # deleted meanwhile: its DELETED event cleans up
            except Conflict:
                try:
                    current = await self.client.request("GET", path)
                except NotFound:
                    return
                if current["metadata"]["uid"] != meta["uid"]:
                    return
                meta = current["metadata"]
        raise Waiting(f"{kind} {meta['name']} keeps changing; annotation not written yet")

    # -- translation state (worker threads) ------------------------------------

    def _of(self, kind: str, uid: str) -> sa.ColumnElement[bool]:
        """The criterion of one object's translation row."""
        return sa.and_(
            NetworkTranslation.cluster == self.cluster, NetworkTranslation.kind == kind, NetworkTranslation.uid == uid
        )

    def _state_row(self, kind: str, uid: str) -> NetworkTranslation | None:
        with self.database.session() as session:
            return session.scalars(sa.select(NetworkTranslation).where(self._of(kind, uid))).first()

    def _uids_of(self, kind: str) -> set[str]:
        with self.database.session() as session:
            query = sa.select(NetworkTranslation.uid).where(
                NetworkTranslation.cluster == self.cluster, NetworkTranslation.kind == kind
            )
            return set(session.scalars(query))

    def _state(self, kind: str, uid: str) -> dict[str, Any] | None:
        row = self._state_row(kind, uid)
        return dict(row.state) if row is not None else None

    def _rows_named(self, kind: str, namespace: str | None, name: str) -> list[NetworkTranslation]:
        with self.database.session() as session:
            return list(
                session.scalars(
                    sa.select(NetworkTranslation)
                    .where(
                        NetworkTranslation.cluster == self.cluster,
                        NetworkTranslation.kind == kind,
                        NetworkTranslation.namespace.is_(None) if namespace is None
                        else NetworkTranslation.namespace == namespace,
                        NetworkTranslation.name == name,
                    )
                    .order_by(NetworkTranslation.updated.desc())
                )
            )  # fmt: skip

    def _namespace_state(self, name: str) -> dict[str, Any] | None:
        rows = self._rows_named("Namespace", None, name)
        return dict(rows[0].state) if rows else None

    def _states(self, kind: str, uids: list[str]) -> dict[str, dict[str, Any]]:
        """The translation states of many objects of ``kind``, by uid."""
        found: dict[str, dict[str, Any]] = {}
        with self.database.session() as session:
            for start in range(0, len(uids), GC_CHUNK):
                query = sa.select(NetworkTranslation.uid, NetworkTranslation.state).where(
                    NetworkTranslation.cluster == self.cluster, NetworkTranslation.kind == kind,
                    NetworkTranslation.uid.in_(uids[start : start + GC_CHUNK]),
                )  # fmt: skip
                found.update((uid, dict(state)) for uid, state in session.execute(query))
        return found

    def _save_many(self, rows: list[tuple[str, str, str | None, str, dict[str, Any]]]) -> None:
        """Translation rows (kind, uid, namespace, name, state) in one transaction."""
        if not rows:
            return
        with self.database.session() as session:
            uids = [uid for _, uid, *_ in rows]
            existing: dict[tuple[str, str], NetworkTranslation] = {}
            for start in range(0, len(uids), GC_CHUNK):
                chunk = uids[start : start + GC_CHUNK]
                query = sa.select(NetworkTranslation).where(
                    NetworkTranslation.cluster == self.cluster, NetworkTranslation.uid.in_(chunk)
                )
                existing.update(((row.kind, row.uid), row) for row in session.scalars(query))
            now = time.time()
            for kind, uid, namespace, name, state in rows:
                row = existing.get((kind, uid))
                if row is None:
                    row = NetworkTranslation(cluster=self.cluster, kind=kind, uid=uid, namespace=namespace, name=name)
                    session.add(row)
                row.backend, row.state, row.updated = self.backend.name, state, now

    def _save(self, kind: str, uid: str, namespace: str | None, name: str, state: dict[str, Any]) -> None:
        self._save_many([(kind, uid, namespace, name, state)])

    def _forget_all_but(self, live: set[str], kinds: list[str]) -> None:
        """Drop the translation rows of ``kinds`` whose object is not live (compared here: a NOT IN of
        every live uid would exceed SQLite's bound on parameters in a large cluster)."""
        with self.database.session() as session:
            query = sa.select(NetworkTranslation.id, NetworkTranslation.uid).where(
                NetworkTranslation.cluster == self.cluster, NetworkTranslation.kind.in_(kinds)
            )
            gone = [row_id for row_id, uid in session.execute(query) if uid not in live]
            for start in range(0, len(gone), GC_CHUNK):
                chunk = gone[start : start + GC_CHUNK]
                session.execute(sa.delete(NetworkTranslation).where(NetworkTranslation.id.in_(chunk)))

    def _forget(self, kind: str, uid: str, resource_kinds: tuple[str, ...]) -> None:
        """Delete what was made for a gone object (the state keeps each id under its kind), then its row."""
        state = self._state(kind, uid)
        if state is None:
            return
        for resource_kind in resource_kinds:
            if state.get(resource_kind):
                self.backend.delete(resource_kind, str(state[resource_kind]))
        with self.database.session() as session:
            session.execute(sa.delete(NetworkTranslation).where(self._of(kind, uid)))
