"""Load balancers (network/, a reconciler): a Service and its members ──► load balancer, listeners, pools,
members, floating IP.

    Service events ──► its key ─┐
    EndpointSlice events ──► the key of the Service they belong to (endpointslices.py), or Endpoints ──► its key
                                └──► reconcile(namespace/name), reading through listers (watch/store.py):
        the Service (read by name once when its informer resumed from a stored position and has not given it:
        a restart lists nothing), its Endpoints (likewise) or its slices (one labelled LIST of them)
        ──► one pod's readiness probe (GET by name, kept while that pod serves the Service)
        ──► service_load_balancer() (services.py) ──► backend ──► state row,
            the Service's status (service_status.py) and its kuberaven.io/network summary
        with loadBalancerSourceRanges (source_ranges.py): the nodes' addresses (one LIST) make the cluster's
        own CIDRs ──► the listeners' allowed_cidrs, or (ovn) the members' groups (lb_ranges.py)

A load balancer is synced as kuryr did it: remove unused members, then unused
listeners with their pools; ensure the load balancer; add listeners with
pools, set their options in place (allowed CIDRs, session persistence,
health monitor), then members; then the floating IP of a LoadBalancer
Service, written to its status. A reconcile whose inputs are unchanged (same
digest, which covers the probe) makes no backend call. A floating IP that
cannot be had (in use, outside the external subnet, refused) is said on the
Service — a status condition, a Warning Event, the annotation — and asked
for again with the key's backoff, never in a hot loop.

A LoadBalancer Service of kuberaven's class carries Kubernetes'
service.kubernetes.io/load-balancer-cleanup finalizer from before its load
balancer is made: deleted, even while kuberaven is stopped, it stays (with a
deletionTimestamp) until its load balancer and floating IP are gone; the
finalizer then goes, as it does when the Service stops being one. A Service
no longer translated (ExternalName, headless, left to another proxy by its
labels, being deleted) loses its load balancer, then what kuberaven wrote on
it: the summary annotation, its ingress address and its conditions.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from ...kube.errors import NotFound
from ...kube.event_recorder import InvolvedObject
from ...watch.informers import InformerFactory
from ...watch.reconciler import Change, Reconciler, Watch
from ...watch.watcher import WatchTarget
from ...watch.workqueue import Waiting
from ..annotations import ANNOTATION, annotate, finalize, summary
from ..backend import BackendError, tags
from ..drivers.floating_ips import FloatingIP
from ..endpointslices import (
    ENDPOINTS,
    ENDPOINTS_FIELDS,
    SERVICE_INDEX,
    SERVICE_NAME_LABEL,
    SLICE_FIELDS,
    as_endpoints,
    is_slices,
    service_key,
)
from ..rules.lb_annotations import ANNOTATIONS as LB_ANNOTATIONS
from ..rules.listing import POOLS, recorded_pools
from ..rules.reach_service import SOURCE_RANGES_OPTION
from ..rules.services import (
    LOAD_BALANCER_CLEANUP,
    LoadBalancerSpec,
    ReadinessCheck,
    endpoint_pods,
    endpoint_ports,
    readiness_check,
    service_load_balancer,
    translated,
    wants_cleanup_finalizer,
)
from ..rules.source_filters import service_filters
from ..rules.source_ranges import (
    EXPOSED_PODS,
    PODS_FILTERED,
    RANGES_GROUP,
    SOURCE_FILTERS,
    by_allowed_cidrs,
    cluster_cidrs,
    listener_cidrs,
    node_addresses,
    uses_member_groups,
    with_pods,
)
from ..service_status import clear_status, service_events, write_status
from .context import TranslationContext, TranslationReconciler
from .lb_ranges import MemberRanges

SERVICES = WatchTarget("v1", "Service")
# What the translation reads of a Service (its store keeps only these, and of its annotations only ours): the
# labels that leave it to another proxy, and what its deletion and cleanup finalizer need.
SERVICE_FIELDS = ("spec", "status", "metadata.labels", "metadata.finalizers", "metadata.deletionTimestamp")
# What the kuberaven.io/network annotation of a Service says.
SUMMARY_FIELDS = ("load_balancer", "vip_address", "listeners", "members", "floating_address", "floating_error")


def slice_services(change: Change) -> set[str]:
    """The Services a slice event concerns: the one it belongs to, before and after (a relisted deletion carries
    no labels: the stored slice says)."""
    found = {service_key(change.object)}
    if change.previous is not None:
        found.add(service_key(change.previous))
    return {key for key in found if key is not None}


class LoadBalancers(TranslationReconciler):
    def __init__(
        self, context: TranslationContext, informers: InformerFactory, members: WatchTarget = ENDPOINTS
    ) -> None:
        """``members``: where members come from, EndpointSlices (a version of them) or Endpoints."""
        super().__init__(context)
        self.load_balancer_class = self.options.load_balancer_class  # implemented besides none
        self.members = members
        self.services = informers.lister(SERVICES, SERVICE_FIELDS, annotations=(ANNOTATION, *LB_ANNOTATIONS))
        if is_slices(members):
            self.endpoints = informers.lister(members, SLICE_FIELDS, indexers={SERVICE_INDEX: _service_of})
        else:
            self.endpoints = informers.lister(members, ENDPOINTS_FIELDS)
        # Per Service: the pod whose readiness probe was read, and the health monitor it became (a memo of
        # one GET: a pod's probe cannot change, and the pods' store does not keep probes).
        self.checks: dict[str, tuple[tuple[str, str | None], ReadinessCheck | None]] = {}
        self.ranges = MemberRanges(context)
        # The Services synced since this start: one whose options were left out is synced once more after a
        # restart, when the backend's settings (network_ovn_nb_connection, the provider) may offer them now.
        self.tried: set[str] = set()

    def reconciler(self, concurrency: int) -> Reconciler:
        members = (
            Watch(self.members, keys=slice_services, fields=("metadata.labels",))
            if is_slices(self.members)
            else Watch(self.members)
        )
        return Reconciler("network-load-balancers", self.reconcile, [Watch(SERVICES), members], concurrency)

    async def reconcile(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        service = await self.services.fetch(key)
        proxy = self.options.service_proxy_name
        wanted = service is not None and translated(service, proxy)  # else its members are not read either
        endpoints = await self._members(key, namespace, name) if wanted else None
        check = await self._readiness(key, namespace, endpoints) if wanted else None
        spec = service_load_balancer(service, endpoints, check, self.load_balancer_class, proxy) if service else None
        uid = service["metadata"]["uid"] if service else None
        finalized = service is not None and wants_cleanup_finalizer(service, proxy, self.load_balancer_class)
        if service is not None and finalized:  # before anything is made that it would have to clean up
            service = await finalize(self.client, "Service", service, LOAD_BALANCER_CLEANUP, held=True)
        # A Service deleted (or recreated under the same name, or no longer translated): its old load balancer goes.
        for row in await self._blocking(self.store.rows_named, "Service", namespace, name):
            if spec is None or row.uid != uid:
                await self._blocking(self._forget, row.uid, namespace)
                self.tried.discard(row.uid)
        if spec is None or service is None or uid is None:
            self.checks.pop(key, None)
            if service is not None:
                await self._untranslated(service)
            return
        state = await self._blocking(self.store.state, "Service", uid)
        cluster = await self._cluster_cidrs(spec)
        if (
            state is None
            or state["digest"] != spec.digest()
            or state.get("floating_error")
            or state.get("cluster_cidrs", []) != list(cluster)
            or (state.get("option_errors") and uid not in self.tried)
        ):
            subnet = await self._member_subnet(spec, namespace)
            previous, state = state, await self._blocking(self._translate, spec, service, subnet, state, cluster)
            self.tried.add(uid)
            self._record_events(service, previous, state)
        await write_status(self.client, service, state, spec.floating_ip)
        fields = {k: state.get(k) for k in SUMMARY_FIELDS}
        written = await annotate(self.client, "Service", service, ANNOTATION, summary(self.backend.name, fields))
        if not finalized:  # no longer LoadBalancer (or not of our class): its floating IP went in _translate
            await finalize(self.client, "Service", written or service, LOAD_BALANCER_CLEANUP, held=False)
        if state.get("floating_error"):  # tried again with the key's backoff (up to its retry_max)
            raise Waiting(f"Service {namespace}/{name}: {state['floating_error']}")

    async def _untranslated(self, service: dict[str, Any]) -> None:
        """A Service that gets no load balancer (any more), once what it had is gone: what kuberaven wrote on it
        is taken back (the summary, the status' address and conditions), and the cleanup finalizer last."""
        if service["metadata"].get("deletionTimestamp") is None:
            said = (service["metadata"].get("annotations") or {}).get(ANNOTATION)
            if said is not None:
                await clear_status(self.client, service, json.loads(said).get("floating_address"))
                service = await annotate(self.client, "Service", service, ANNOTATION, None) or service
        await finalize(self.client, "Service", service, LOAD_BALANCER_CLEANUP, held=False)

    def _forget(self, uid: str, namespace: str) -> None:
        """A gone Service's load balancer; its floating IP too, unless keep-floatingip asked to keep it. The
        pods it exposed leave its ranges group first (Neutron refuses to delete a group in use)."""
        state = self.store.state("Service", uid) or {}
        if state.get(EXPOSED_PODS):
            self.ranges.sync(namespace, uid, {}, state[EXPOSED_PODS], ())
        if state.get(RANGES_GROUP):
            self.backend.delete("security_group", str(state[RANGES_GROUP]))
        self.ranges.at_source(uid, (), bool(state.get(SOURCE_FILTERS)))
        if state.get("keep_floating_ip") and state.get("floating_ip"):
            self.backend.release_floating_ip(str(state["floating_ip"]))
            self.store.forget("Service", uid, ("load_balancer",))
        else:
            self.store.forget("Service", uid, ("floating_ip", "load_balancer"))

    async def _members(self, key: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The Service's Endpoints, or its EndpointSlices merged into that shape; what the informer has not
        given (resumed without a list) is read — the Endpoints by name, the slices by label."""
        if not is_slices(self.members):
            return await self.endpoints.fetch(key)
        slices = await self.endpoints.fetch_index(SERVICE_INDEX, key, namespace, f"{SERVICE_NAME_LABEL}={name}")
        return as_endpoints(namespace, name, slices)

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
        meta = service["metadata"]
        involved = InvolvedObject("v1", "Service", meta["namespace"], meta["name"], meta["uid"])
        for kind, reason, message in service_events(self.backend.name, previous, state):
            self.events.record(involved, kind, reason, message)

    async def _cluster_cidrs(self, spec: LoadBalancerSpec) -> tuple[str, ...]:
        """The cluster's own CIDRs, which a Service's source ranges never keep out (none needed without ranges)."""
        if not spec.source_ranges:
            return ()
        nodes = [node async for node in self.client.list_objects("/api/v1/nodes")]
        options = self.options
        pods = options.namespace_pool if options.subnet_mode == "namespace" else options.pod_cidr
        return cluster_cidrs([pods], options.service_cidr, node_addresses(nodes))

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
        self,
        spec: LoadBalancerSpec,
        service: dict[str, Any],
        subnet: str | None,
        previous: dict[str, Any] | None,
        cluster: tuple[str, ...],
    ) -> dict[str, Any]:
        meta = service["metadata"]
        resource_tags = tags(self.store.cluster, meta["uid"])
        lb = self.backend.ensure_load_balancer(
            spec.name,
            self.infrastructure.service_subnet,
            spec.vip_address,
            resource_tags,
            flavor=spec.flavor_id,
            zone=spec.availability_zone,
        )
        on_members = spec.floating_ip and uses_member_groups(lb.provider)
        ranged, enforcement = self.ranges.on_members(spec, meta, on_members, previous, cluster)
        allowed = () if on_members else listener_cidrs(spec.source_ranges, cluster)
        refused = self._sync_listeners(lb.id, spec, subnet, resource_tags, allowed)
        if spec.source_ranges and not on_members:
            left_out = [r for r in refused if r.startswith(SOURCE_RANGES_OPTION)]
            enforcement = by_allowed_cidrs(spec.source_ranges, cluster, left_out)
        floating, error = self._floating_ip(spec, lb.vip_port, resource_tags, previous)
        address = floating.address if floating else None
        at_ingress, unserved = service_filters(spec, address)
        filters = at_ingress + unserved
        why = self.ranges.at_source(meta["uid"], filters, bool((previous or {}).get(SOURCE_FILTERS)))
        enforcement = with_pods(enforcement, address, bool(at_ingress) and why is None, why if at_ingress else None)
        state = {
            "digest": spec.digest(),
            "load_balancer": lb.id,
            "vip_address": lb.vip_address,
            "listeners": sorted(listener.name for listener in spec.listeners),
            "members": sum(len(listener.members) for listener in spec.listeners),
            POOLS: recorded_pools(spec.listeners),  # each listener's members: the listings draw them
            "floating_ip": floating.id if floating else None,
            "floating_address": address,
            "floating_error": str(error) if error else None,
            "floating_reason": type(error).__name__ if error else None,
            "keep_floating_ip": spec.keep_floating_ip,
            # annotations that could not be read, options the provider does not offer: said on the Service
            "option_errors": [f"{key}: {why}" for key, why in spec.option_errors] + refused,
            "cluster_cidrs": list(cluster),
            "source_ranges": list(spec.source_ranges),
            **ranged,
            PODS_FILTERED: bool(at_ingress) and why is None,
            SOURCE_FILTERS: len(filters) if why is None else 0,
            "ranges_how": enforcement.how if enforcement else None,
            "ranges_message": enforcement.message if enforcement else None,
        }
        self.store.save("Service", meta["uid"], meta["namespace"], meta["name"], state)
        return state

    def _sync_listeners(
        self, lb: str, spec: LoadBalancerSpec, subnet: str | None, resource_tags: list[str], allowed: tuple[str, ...]
    ) -> list[str]:
        """Unused listeners go with their pools (and one whose pool protocol changed); new listeners come with
        pools; their options are set in place (``allowed``: the allowed_cidrs of every listener); each pool's
        members are replaced in one call. The options the provider refused, named."""
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
                existing[key] = backend.create_listener(
                    lb, due.name, due.protocol, due.port, resource_tags, due.pool_protocol
                )
            pool = existing[key].pool
            assert pool is not None
            options = replace(due.options, allowed_cidrs=allowed)
            refused += backend.ensure_listener_options(lb, existing[key], options, resource_tags)
            backend.set_members(lb, pool, due.members, subnet, resource_tags)
        return refused

    def _floating_ip(
        self, spec: LoadBalancerSpec, vip_port: str, resource_tags: list[str], previous: dict[str, Any] | None
    ) -> tuple[FloatingIP | None, BackendError | None]:
        """The floating IP of a LoadBalancer Service, or the error that kept it from being had."""
        error = None
        if spec.floating_ip:
            try:
                return self.backend.ensure_floating_ip(
                    spec.floating_network or self.infrastructure.external_network,
                    vip_port,
                    spec.floating_address,
                    resource_tags,
                    spec.floating_subnet,
                ), None
            except BackendError as failed:  # in use, outside the external subnet, refused: said on the Service
                error = failed
        if previous and previous.get("floating_ip"):  # no longer type LoadBalancer, or another address asked for
            if spec.keep_floating_ip:
                self.backend.release_floating_ip(previous["floating_ip"])
            else:
                self.backend.delete("floating_ip", previous["floating_ip"])
        return None, error


def _service_of(slice_: dict[str, Any]) -> list[str]:
    key = service_key(slice_)
    return [key] if key else []
