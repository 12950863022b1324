"""Load balancers (network/): Services and their members ──► load balancer, listeners, pools, members, floating IP.

    translator.py's Service and Endpoints (or EndpointSlices: endpointslices.py) informers ──► latest of each,
        by Service (read once when an informer resumed from its stored position and has not given it: a
        restart lists neither; an Endpoints is read by name, a Service's slices with one labelled LIST)
        ──► a keyed queue of load balancers (a Service and its Endpoints never synced at once)
        ──► sync: one pod's readiness probe (GET by name, kept while that pod serves the Service)
            ──► service_load_balancer() (services.py) ──► backend ──► state row,
                the Service's status (service_status.py) and its kuberaven.io/network summary

A load balancer is synced as kuryr did it: remove unused members, then unused
listeners with their pools; ensure the load balancer; add listeners with
pools, set their options in place (allowed CIDRs, session persistence,
health monitor), then members; then the floating IP of a LoadBalancer
Service, written to its status. A sync whose inputs are unchanged (same
digest, which covers the probe) makes no backend call. A floating IP that
cannot be had (in use, outside the external subnet, refused) is said on the
Service — a status condition, a Warning Event, the annotation — and asked
for again with the queue's backoff, never in a hot loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..kube.client import KubeClient
from ..kube.errors import NotFound
from ..kube.events import (
    NORMAL,
    REASON_FAILED,
    REASON_FLOATING_IP,
    REASON_LOAD_BALANCER_READY,
    REASON_OPTION_REFUSED,
    WARNING,
    EventRecorder,
    InvolvedObject,
)  # fmt: skip
from ..kube.projection import Projection
from ..kube.reflector import WatchEvent
from ..raven.queue import KeyedQueue, Waiting
from ..raven.watcher import WatchTarget
from .annotations import ANNOTATION, annotate, summary
from .backend import BackendError, FloatingIP, Infrastructure, NetworkBackend, tags
from .endpointslices import (
    ENDPOINTS,
    ENDPOINTS_FIELDS,
    SliceCache,
    as_endpoints,
    is_slices,
    list_slices,
    service_key,
)  # fmt: skip
from .service_status import write_status
from .services import (
    LoadBalancerSpec,
    ReadinessCheck,
    endpoint_pods,
    endpoint_ports,
    readiness_check,
    service_load_balancer,
    translated,
)  # fmt: skip
from .state import TranslationStore

Blocking = Callable[..., Awaitable[Any]]
# What the translation reads of each (the informers decode only these).
SERVICE_FIELDS = ("metadata.annotations", "spec", "status")
_SERVICE, _ENDPOINTS = Projection(SERVICE_FIELDS), Projection(ENDPOINTS_FIELDS)
# What the kuberaven.io/network annotation of a Service says.
SUMMARY_FIELDS = ("load_balancer", "vip_address", "listeners", "members", "floating_address", "floating_error")


class LoadBalancers:
    def __init__(
        self, client: KubeClient, store: TranslationStore, backend: NetworkBackend, blocking: Blocking,
        *, concurrency: int, retry_initial: float, retry_max: float, members: WatchTarget = ENDPOINTS,
    ) -> None:  # fmt: skip
        """``members``: where members come from, EndpointSlices (a version of them) or Endpoints."""
        self.client = client
        self.members = members
        self.store = store
        self.backend = backend
        self._blocking = blocking
        self.infrastructure: Infrastructure | None = None  # set by the translator once made
        self.events = EventRecorder(client)
        # The latest of each by key; None: known not to exist. A key missing is read by name.
        self.services: dict[str, dict[str, Any] | None] = {}
        self.endpoints: dict[str, dict[str, Any] | None] = {}
        self.slices = SliceCache()  # by Service key, when members come from EndpointSlices
        # Per Service: the pod whose readiness probe was read, and what it became (a pod's probe cannot change).
        self.checks: dict[str, tuple[tuple[str, str | None], ReadinessCheck | None]] = {}
        self.queue = KeyedQueue(
            "network-load-balancers", self._sync, lambda _seqs: None, concurrency=concurrency,
            retry_initial=retry_initial, retry_max=retry_max,
        )  # fmt: skip

    async def on_service(self, event: WatchEvent) -> None:
        self._remember(self.services, event)

    async def on_endpoints(self, event: WatchEvent) -> None:
        self._remember(self.endpoints, event)

    async def on_slice(self, event: WatchEvent) -> None:
        key = service_key(event.object)
        if key is None:
            return
        self.slices.on_event(key, event.object, event.type == "DELETED", event.relisted)
        self._queue(key, event.object["metadata"]["namespace"], key.partition("/")[2])

    def _remember(self, latest: dict[str, dict[str, Any] | None], event: WatchEvent) -> None:
        latest[event.key] = None if event.type == "DELETED" else event.object
        meta = event.object["metadata"]
        self._queue(event.key, meta["namespace"], meta["name"])

    def _queue(self, key: str, namespace: str, name: str) -> None:
        marker = {"metadata": {"namespace": namespace, "name": name}}
        self.queue.add(key, WatchEvent("MODIFIED", marker), 0)

    async def _sync(self, event: WatchEvent) -> None:
        meta = event.object["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        service = await self._latest(self.services, event.key, f"/api/v1/namespaces/{namespace}/services/{name}",
                                     _SERVICE)  # fmt: skip
        wanted = service is not None and translated(service)  # else its members are not read either
        endpoints = await self._members(event.key, namespace, name, read=wanted)
        if service is None and endpoints is None:  # both gone: nothing to remember of them
            self.services.pop(event.key, None)
            self.endpoints.pop(event.key, None)
            self.slices.forget(event.key)
        check = await self._readiness(event.key, namespace, endpoints) if wanted else None
        spec = service_load_balancer(service, endpoints, check) if service else None
        uid = service["metadata"]["uid"] if service else None
        # A Service deleted (or recreated under the same name): its old load balancer goes.
        for row in await self._blocking(self.store.rows_named, "Service", namespace, name):
            if spec is None or row.uid != uid:
                await self._blocking(self._forget, row.uid)
        if spec is None or service is None or uid is None:
            self.checks.pop(event.key, None)
            return
        state = await self._blocking(self.store.state, "Service", uid)
        if state is None or state["digest"] != spec.digest() or state.get("floating_error"):
            subnet = await self._member_subnet(spec, namespace)
            previous, state = state, await self._blocking(self._translate, spec, service, subnet, state)
            self._record_events(service, previous, state)
        await write_status(self.client, service, state, spec.floating_ip)
        fields = {k: state.get(k) for k in SUMMARY_FIELDS}
        await annotate(self.client, "Service", service, ANNOTATION, summary(self.backend.name, fields))
        if state.get("floating_error"):  # tried again with the queue's backoff (up to its retry_max)
            raise Waiting(f"Service {namespace}/{name}: {state['floating_error']}")

    def _forget(self, uid: str) -> None:
        """A gone Service's load balancer; its floating IP too, unless keep-floatingip asked to keep it."""
        state = self.store.state("Service", uid) or {}
        if state.get("keep_floating_ip") and state.get("floating_ip"):
            self.backend.release_floating_ip(str(state["floating_ip"]))
            self.store.forget("Service", uid, ("load_balancer",))
        else:
            self.store.forget("Service", uid, ("floating_ip", "load_balancer"))

    async def _members(self, key: str, namespace: str, name: str, read: bool) -> dict[str, Any] | None:
        """The Service's Endpoints, or its EndpointSlices merged into that shape; ``read``: what the informer
        has not given (resumed without a list) is read — the Endpoints by name, the slices by label."""
        if not is_slices(self.members):
            path = f"/api/v1/namespaces/{namespace}/endpoints/{name}"
            return await self._latest(self.endpoints, key, path, _ENDPOINTS) if read else self.endpoints.get(key)
        if read and key not in self.slices.complete:
            self.slices.on_list(key, await list_slices(self.client, self.members, namespace, name))
        return as_endpoints(namespace, name, self.slices.of(key))

    async def _readiness(self, key: str, namespace: str, endpoints: dict[str, Any] | None) -> ReadinessCheck | None:
        """The readiness probe of one of the Service's pods (GET by name), kept while that pod serves it."""
        pods = endpoint_pods(endpoints)
        cached = self.checks.get(key)
        if cached is not None and cached[0] in pods:
            return cached[1]
        if not pods:
            return None
        name = pods[0][0]
        try:
            pod = await self.client.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        except NotFound:
            return None  # going: the Endpoints change again without it
        check = readiness_check(pod, endpoint_ports(endpoints))
        self.checks[key] = (pods[0], check)
        return check

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
        if state.get("floating_error"):
            self.events.record(involved, WARNING, REASON_FAILED, f"no floating IP: {state['floating_error']}")
        for problem in state.get("option_errors") or []:
            if problem not in (previous or {}).get("option_errors", []):
                self.events.record(involved, WARNING, REASON_OPTION_REFUSED, f"option left out: {problem}")

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
        if spec.member_subnet:
            return spec.member_subnet
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
        lb = self.backend.ensure_load_balancer(spec.name, self.infrastructure.service_subnet, spec.vip_address,
                                               resource_tags, flavor=spec.flavor_id, zone=spec.availability_zone)
        refused = self._sync_listeners(lb.id, spec, subnet, resource_tags)
        floating, error = self._floating_ip(spec, lb.vip_port, resource_tags, previous)
        state = {
            "digest": spec.digest(),
            "load_balancer": lb.id,
            "vip_address": lb.vip_address,
            "listeners": sorted(listener.name for listener in spec.listeners),
            "members": sum(len(listener.members) for listener in spec.listeners),
            "floating_ip": floating.id if floating else None,
            "floating_address": floating.address if floating else None,
            "floating_error": str(error) if error else None,
            "floating_reason": type(error).__name__ if error else None,
            "keep_floating_ip": spec.keep_floating_ip,
            # annotations that could not be read, options the provider does not offer: said on the Service
            "option_errors": [f"{key}: {why}" for key, why in spec.option_errors] + refused,
        }
        self.store.save("Service", meta["uid"], meta["namespace"], meta["name"], state)
        return state

    def _sync_listeners(
        self, lb: str, spec: LoadBalancerSpec, subnet: str | None, resource_tags: list[str]
    ) -> list[str]:
        """Unused listeners go with their pools (and one whose pool protocol changed); new listeners come with
        pools; their options are set in place; each pool's members are replaced in one call. The options the
        provider refused, named."""
        backend = self.backend
        wanted = {listener.key: listener for listener in spec.listeners}
        existing = {}
        for listener in backend.listeners(lb):
            due = wanted.get((listener.protocol, listener.port))
            if due is None or listener.pool_protocol != (due.pool_protocol or due.protocol):
                backend.delete_listener(lb, listener)
            else:
                existing[due.key] = listener
        refused: list[str] = []
        for key, due in wanted.items():
            if key not in existing:
                existing[key] = backend.create_listener(lb, due.name, due.protocol, due.port, resource_tags,
                                                        due.pool_protocol)  # fmt: skip
            pool = existing[key].pool
            assert pool is not None
            refused += backend.ensure_listener_options(lb, existing[key], due.options, resource_tags)
            backend.set_members(lb, pool, due.members, subnet, resource_tags)
        return refused

    def _floating_ip(
        self, spec: LoadBalancerSpec, vip_port: str, resource_tags: list[str], previous: dict[str, Any] | None
    ) -> tuple[FloatingIP | None, BackendError | None]:
        """The floating IP of a LoadBalancer Service, or the error that kept it from being had."""
        assert self.infrastructure is not None
        error = None
        if spec.floating_ip:
            try:
                return self.backend.ensure_floating_ip(
                    spec.floating_network or self.infrastructure.external_network, vip_port, spec.floating_address,
                    resource_tags, spec.floating_subnet,
                ), None
            except BackendError as failed:  # in use, outside the external subnet, refused: said on the Service
                error = failed
        if previous and previous.get("floating_ip"):  # no longer type LoadBalancer, or another address asked for
            if spec.keep_floating_ip:
                self.backend.release_floating_ip(previous["floating_ip"])
            else:
                self.backend.delete("floating_ip", previous["floating_ip"])
        return None, error
