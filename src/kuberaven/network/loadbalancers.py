"""Load balancers (network/): Services and Endpoints ──► load balancer, listeners, pools, members, floating IP.

    translator.py's Service and Endpoints informers ──► latest of each, by name (read once by name when
        an informer resumed from its stored position and has not given it: a restart lists neither)
        ──► a keyed queue of load balancers (a Service and its Endpoints never synced at once)
        ──► sync: service_load_balancer() (translate.py) ──► backend ──► state row,
            the Service's status (floating IP) and its kuberaven.io/network summary

A load balancer is synced as kuryr did it: remove unused members, then unused
listeners with their pools; ensure the load balancer; add listeners with
pools, then members; then the floating IP of a LoadBalancer Service, written
to its status. A sync whose inputs are unchanged (same digest) makes no
backend call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from ..kube.client import KubeClient
from ..kube.errors import NotFound
from ..kube.events import NORMAL, REASON_FLOATING_IP, REASON_LOAD_BALANCER_READY, EventRecorder, InvolvedObject
from ..kube.projection import Projection
from ..kube.reflector import WatchEvent
from ..raven.queue import KeyedQueue, Waiting
from .annotations import ANNOTATION, MERGE_PATCH, annotate, object_path, summary
from .backend import Infrastructure, NetworkBackend, tags
from .state import TranslationStore
from .translate import LoadBalancerSpec, service_load_balancer

Blocking = Callable[..., Awaitable[Any]]
# What the translation reads of each (the informers decode only these).
SERVICE_FIELDS = ("metadata.annotations", "spec", "status")
ENDPOINTS_FIELDS = ("subsets",)
_SERVICE, _ENDPOINTS = Projection(SERVICE_FIELDS), Projection(ENDPOINTS_FIELDS)


class LoadBalancers:
    def __init__(
        self, client: KubeClient, store: TranslationStore, backend: NetworkBackend, blocking: Blocking,
        *, concurrency: int, retry_initial: float, retry_max: float,
    ) -> None:  # fmt: skip
        self.client = client
        self.store = store
        self.backend = backend
        self._blocking = blocking
        self.infrastructure: Infrastructure | None = None  # set by the translator once made
        self.events = EventRecorder(client)
        # The latest of each by key; None: known not to exist. A key missing is read by name.
        self.services: dict[str, dict[str, Any] | None] = {}
        self.endpoints: dict[str, dict[str, Any] | None] = {}
        self.queue = KeyedQueue(
            "network-load-balancers", self._sync, lambda _seqs: None, concurrency=concurrency,
            retry_initial=retry_initial, retry_max=retry_max,
        )  # fmt: skip

    async def on_service(self, event: WatchEvent) -> None:
        self._remember(self.services, event)

    async def on_endpoints(self, event: WatchEvent) -> None:
        self._remember(self.endpoints, event)

    def _remember(self, latest: dict[str, dict[str, Any] | None], event: WatchEvent) -> None:
        latest[event.key] = None if event.type == "DELETED" else event.object
        meta = event.object["metadata"]
        marker = {"metadata": {"namespace": meta["namespace"], "name": meta["name"]}}
        self.queue.add(event.key, WatchEvent("MODIFIED", marker), 0)

    async def _sync(self, event: WatchEvent) -> None:
        meta = event.object["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        service = await self._latest(self.services, event.key, f"/api/v1/namespaces/{namespace}/services/{name}",
                                     _SERVICE)  # fmt: skip
        endpoints = await self._latest(
            self.endpoints, event.key, f"/api/v1/namespaces/{namespace}/endpoints/{name}", _ENDPOINTS
        )
        if service is None and endpoints is None:  # both gone: nothing to remember of them
            self.services.pop(event.key, None)
            self.endpoints.pop(event.key, None)
        spec = service_load_balancer(service, endpoints) if service else None
        uid = service["metadata"]["uid"] if service else None
        # A Service deleted (or recreated under the same name): its old load balancer goes.
        for row in await self._blocking(self.store.rows_named, "Service", meta["namespace"], meta["name"]):
            if spec is None or row.uid != uid:
                await self._blocking(self.store.forget, "Service", row.uid, ("floating_ip", "load_balancer"))
        if spec is None or service is None or uid is None:
            return
        state = await self._blocking(self.store.state, "Service", uid)
        if state is None or state["digest"] != spec.digest():
            subnet = await self._member_subnet(spec, meta["namespace"])
            previous, state = state, await self._blocking(self._translate, spec, service, subnet, state)
            self._record_events(service, previous, state)
        await self._write_status(service, state.get("floating_address"))
        fields = {k: state[k] for k in ("load_balancer", "vip_address", "listeners", "members", "floating_address")}
        await annotate(self.client, "Service", service, ANNOTATION, summary(self.backend.name, fields))

    def _record_events(self, service: dict[str, Any], previous: dict[str, Any] | None, state: dict[str, Any]) -> None:
        """What `kubectl describe service` shows of the translation."""
        involved = InvolvedObject("v1", "Service", service["metadata"]["namespace"], service["metadata"]["name"],
                                  service["metadata"]["uid"])  # fmt: skip
        self.events.record(involved, NORMAL, REASON_LOAD_BALANCER_READY,
                           f"load balancer {state['load_balancer']} on {state['vip_address']} ({self.backend.name}): "
                           f"{len(state['listeners'])} listeners, {state['members']} members")  # fmt: skip
        address = state.get("floating_address")
        if address and address != (previous or {}).get("floating_address"):
            self.events.record(involved, NORMAL, REASON_FLOATING_IP, f"floating IP {address}")

    async def _latest(
        self, latest: dict[str, dict[str, Any] | None], key: str, path: str, projection: Projection
    ) -> dict[str, Any] | None:
        """The object the informer gave for ``key``, else (resumed without a list) one GET by name."""
        if key not in latest:
            try:
                found: dict[str, Any] | None = projection.apply(await self.client.request("GET", path))
            except NotFound:
                found = None
            latest.setdefault(key, found)  # an event that came meanwhile is as new, and queued a sync again
        return latest[key]

    async def _member_subnet(self, spec: LoadBalancerSpec, namespace: str) -> str | None:
        if not any(listener.members for listener in spec.listeners):
            return None
        state = await self._blocking(self.store.namespace_state, namespace)
        if state is None:
            raise Waiting(f"namespace {namespace} has no network yet")
        return str(state["subnet"])

    def _translate(
        self, spec: LoadBalancerSpec, service: dict[str, Any], subnet: str | None, previous: dict[str, Any] | None
    ) -> dict[str, Any]:
        assert self.infrastructure is not None
        meta = service["metadata"]
        resource_tags = tags(self.store.cluster, meta["uid"])
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
            for due in listener_spec.members:
                if (due.address, due.port) not in members.get(key, set()):
                    assert subnet is not None
                    backend.create_member(lb.id, pool, due.name, due.address, due.port, subnet, resource_tags)
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
        self.store.save("Service", meta["uid"], meta["namespace"], meta["name"], state)
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
        path = object_path("Service", meta["namespace"], meta["name"]) + "/status"
        with contextlib.suppress(NotFound):
            await self.client.request("PATCH", path, body=body, content_type=MERGE_PATCH)
