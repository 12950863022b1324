"""Pods' ports (network/, a reconciler): a pod ──► its port on its namespace's network ──► its VIF annotation.

    Pod events ──► namespace/name ──► reconcile(key): the pod from the pods lister (watch/store.py)
        pod_port() (translate.py): due?   no (hostNetwork, finished, deleted) ──► port deleted, IP released
                                          (a pooled port: back to its pool once the pod is gone or finished)
        yes ──► its node's trunk (trunks.py, cached per node): a nested node's pod takes a subport of it
            ──► Batcher (many pods, one backend call + one transaction) ──► ensure_ports ──► state row
                (our CNI on Neutron: pools.py's assign(), a pooled port and both rows in one transaction;
                an empty pool: the pod waits here for its refill, woken as ports come; a refill refused on
                the quota or the subnet's addresses: a Warning Event and kuberaven.io/port-failed, with which
                the node agent fails the pod's ADD at once)
            ──► with our CNI, a scheduled pod without an IP yet: VIF annotation kuberaven.io/vif
                (vif.py), merge-patched under the pod's resourceVersion; kuberaven-cni reads it
            ──► port_made(key, namespace): the NetworkPolicies reconciler checks the new port's groups

Many keys are reconciled at once (PORT_BATCH workers): each mostly waits on
the batcher, so a cold start of thousands of pods is a few transactions.

With our CNI (``cni: kuberaven``) the port comes first: made the moment a pod
is scheduled, bound to its node, and its IP becomes the pod's. With another
CNI the port follows the IP that CNI gave (and pods get no annotation: nothing
would read it, and a patch per pod doubles a cold start's API writes).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Any, Protocol

from ... import metrics
from ...kube.errors import NotFound
from ...kube.event_recorder import NORMAL, REASON_FAILED, REASON_PORT_READY, WARNING, EventRecorder, InvolvedObject
from ...kube.uids import compact_uid, uid_text
from ...watch.batcher import Batcher
from ...watch.reconciler import Reconciler, Watch
from ...watch.store import Lister
from ...watch.watcher import WatchTarget
from ...watch.workqueue import Waiting
from ..annotations import annotate, object_path
from ..backend import AddressInUse, BackendError, PortRequest, tags
from ..pools import PoolAsk, PoolEmpty, PortPools, PortRefused
from ..rules.translate import PodPort, pod_port, pod_vif, port_ask, since_creation, translated_namespace
from ..state import Row
from ..trunks import NodeTrunks
from ..vif import PORT_FAILED_ANNOTATION, VIF_ANNOTATION, Binding
from .context import TranslationContext, TranslationReconciler

log = logging.getLogger(__name__)

PORT_BATCH = 256  # pods whose ports are made in one backend call (and one transaction of translation rows)
# How each backend's ports are attached on a bare node (the CNI plugin reads it from the VIF); on a nested node
# (a VM on a trunk's parent port) a pod's port is a subport of the trunk: binding vlan (translate.py's pod_vif).
BINDINGS = {"embedded": Binding.BRIDGE, "openstack": Binding.OVS}
PODS = WatchTarget("v1", "Pod")
POOL_WAIT = 60.0  # seconds a pod waits for its empty pool's refill before its reconcile fails (and is retried)
FINISHED = ("Succeeded", "Failed")  # a finished pod's sandbox is torn down: its pooled port may serve another


class PortGroups(Protocol):
    """The security groups of pods' ports, where NetworkPolicies are translated (network_policies.py)."""

    def creation_groups(self, pod: dict[str, Any]) -> tuple[str, ...]:
        """The groups a new port of ``pod`` starts with; (): its namespace's."""

    def port_made(self, key: str, namespace: str) -> None:
        """A pod's port was made or kept: its groups are checked."""


class PodPorts(TranslationReconciler):
    """The pods reconciler and its port batcher."""

    def __init__(
        self,
        context: TranslationContext,
        pods: Lister | None = None,
        pools: PortPools | None = None,
        groups: PortGroups | None = None,
        trunks: NodeTrunks | None = None,
    ) -> None:
        """``pods``: the pods lister (what reconcile reads); the batch path alone runs without one. ``pools``:
        where scheduled pods take their ports (openstack backend, our CNI); None: each port is made for its pod.
        ``groups``: the NetworkPolicies reconciler, where policies are translated; None: namespaces' groups.
        ``trunks``: each node's trunk (with pools on Neutron): a nested node's pods take subports of it."""
        super().__init__(context)
        self.pods = pods
        self.pools = pools
        self.groups = groups
        self.trunks = trunks
        self.batcher: Batcher[PodPort, dict[str, Any]] = Batcher(self._ensure_ports, self._blocking, size=PORT_BATCH)
        self.events = EventRecorder(self.client)
        # Which pod (namespace/name → uid, compact: see compact_uid) may have a port: our own translation rows,
        # loaded at start and added on translation (a superset). A pod without a port due that is not in it has
        # nothing to forget, and costs no query: on a cold start most pods are not yet scheduled.
        self.ported: dict[str, int | str] = {}

    def reconciler(self) -> Reconciler:
        # Reconciles mostly wait on the port batcher: many at once fill its batches.
        return Reconciler("network-pods", self.reconcile, [Watch(PODS)], concurrency=PORT_BATCH)

    async def load(self) -> None:
        rows = await self._blocking(self.store.keys_of, "Pod")
        self.ported = {key: compact_uid(uid) for key, uid in rows.items()}

    async def reconcile(self, key: str) -> None:
        assert self.pods is not None
        # Only the pods informer's events queue a key, after the store took them: absent means deleted.
        pod = self.pods.get(key)
        spec = pod_port(pod, self.options) if pod is not None else None
        uid = compact_uid(pod["metadata"]["uid"]) if pod is not None else None
        old = self.ported.get(key)
        if old is not None and (spec is None or old != uid):  # gone, no longer due, or made again under its name
            if not await self._blocking(self._forget, uid_text(old), pod if old == uid else None):
                return  # a pooled port stays with its terminating pod until the pod is gone
            if self.ported.get(key) == old:
                del self.ported[key]
        if pod is None or spec is None:
            return
        meta = pod["metadata"]
        if not translated_namespace(meta["namespace"], self.options):
            return
        # ``key`` is spec.name, and the very string the informer's store and reflector hold: ``ported`` keeps
        # that one rather than a copy per pod.
        groups = self.groups.creation_groups(pod) if self.groups is not None else ()
        involved = InvolvedObject("v1", "Pod", meta["namespace"], meta["name"], meta["uid"])
        try:
            trunk = await self.trunks.of(spec.node) if self.trunks is not None and spec.node is not None else None
            port = PodPort(key, spec.address, meta["uid"], meta["namespace"], meta["name"], spec.node, groups, trunk)
            state = await self._port(port)
        except BackendError as error:  # what `kubectl describe pod` shows; the queue retries
            self.events.record(involved, WARNING, REASON_FAILED, f"port on the {self.backend.name} backend: {error}")
            if isinstance(error, PortRefused) and spec.address is None:  # its ADD fails with it, not at a timeout
                await annotate(self.client, "Pod", pod, PORT_FAILED_ANNOTATION, str(error))
            raise
        if spec.address is None:  # scheduled, no IP yet: our CNI will wire it from the annotation
            await self._write_vif(pod, state, involved)
        if self.groups is not None:
            self.groups.port_made(key, meta["namespace"])

    async def _write_vif(self, pod: dict[str, Any], state: dict[str, Any], involved: InvolvedObject) -> None:
        """The VIF annotation that kuberaven-cni wires the pod from, the pod's wiring time, and a PortReady Event
        (only on our CNI's path, where the pod waits for it: a mirror port per pod of another CNI would be an
        Event per pod of a cold start)."""
        vif = pod_vif(state, BINDINGS.get(self.backend.name, Binding.BRIDGE))  # a subport's: vlan
        written = await annotate(self.client, "Pod", pod, VIF_ANNOTATION, vif.to_json())
        if PORT_FAILED_ANNOTATION in (pod["metadata"].get("annotations") or {}):
            await annotate(self.client, "Pod", written or pod, PORT_FAILED_ANNOTATION, None)
        if written is None:
            return
        waited = since_creation(written, dt.datetime.now(dt.UTC))  # the pods' store keeps no creationTimestamp
        if waited is not None:
            metrics.POD_WIRING_SECONDS.labels("vif").observe(waited)
        message = f"port {vif.port} {vif.ip} ({vif.mac}) on network {vif.network} ({self.backend.name})"
        self.events.record(involved, NORMAL, REASON_PORT_READY, f"{message}: kuberaven-cni wires it")

    def _forget(self, uid: str, pod: dict[str, Any] | None) -> bool:
        """What was made for a pod that no longer has a port due (worker thread); False: kept for now.

        A pooled port goes back to its pool, in one transaction with the pod's row, once the pod is gone or
        finished: a terminating pod may still be running on it, and no port serves two pods; meanwhile its
        pool counts it as returning (no port is made in its place). Any other port is deleted."""
        state = self.store.state("Pod", uid)
        if self.pools is None or state is None or not state.get("pooled"):
            self.store.forget("Pod", uid, ("port",))
            return True
        if pod is not None and pod.get("status", {}).get("phase") not in FINISHED:
            self.pools.returning(uid, pod["metadata"]["namespace"], state)
            return False
        self.pools.release(uid, state)
        return True

    async def _port(self, port: PodPort) -> dict[str, Any]:
        """The pod's port; a pod whose pool is empty waits here for its refill (at most POOL_WAIT s, then the
        queue retries it with a Warning): it is woken the moment ports come, not at a backoff's next try."""
        deadline = time.monotonic() + POOL_WAIT
        while True:
            try:
                return await self._submit(port)
            except PoolEmpty as empty:
                left = deadline - time.monotonic()
                if empty.cause is not None:  # a quota, a subnet out of addresses: no wait mends it
                    raise PortRefused(empty.cause) from None
                if self.pools is None or left <= 0:
                    raise BackendError(str(empty)) from None
                await self.pools.arrival(empty.key, left)

    async def _submit(self, port: PodPort) -> dict[str, Any]:
        try:
            return await self.batcher.submit(port)
        except AddressInUse as in_use:
            # Another CNI reuses addresses: the holder may be the port of a pod that is gone.
            if not await self._stale_holder(in_use):
                raise
            log.info("releasing %s, held by a pod that is gone", in_use.address)
            await self._blocking(self.backend.delete, "port", in_use.holder)
            return await self.batcher.submit(port)

    def _ensure_ports(self, ports: list[PodPort]) -> list[dict[str, Any] | BaseException]:
        """A batch of pods' ports, made unless they exist as due, and their translation rows (worker thread).

        Each pod's result is its translation state: the port and what its VIF says.
        """
        results: list[dict[str, Any] | BaseException | None] = [None] * len(ports)
        # A pod not in ported has no translation row: no query for it (most pods of a cold start).
        states = self.store.states("Pod", [p.uid for p in ports if self.ported.get(p.name) == compact_uid(p.uid)])
        namespaces: dict[str, dict[str, Any] | None] = {}
        asked: list[tuple[int, dict[str, Any], PortRequest]] = []
        pooled: list[tuple[int, PoolAsk]] = []
        for index, port in enumerate(ports):
            state = states.get(port.uid)
            ask = port_ask(state, port.pod_ip, self.options)
            if not ask.needed:
                assert state is not None  # port_ask asks for every pod without a state
                results[index] = state
                continue
            if port.namespace not in namespaces:
                namespaces[port.namespace] = self.store.namespace_state(port.namespace)
            namespace = namespaces[port.namespace]
            if namespace is None:
                results[index] = Waiting(f"namespace {port.namespace} has no network yet")
                continue
            if self.pools is not None and ask.address is None and port.node is not None:
                pooled.append(
                    (
                        index,
                        PoolAsk(
                            port.uid,
                            port.namespace,
                            port.pod,
                            port.node,
                            port.pod_ip,
                            port.security_groups or (namespace["security_group"],),
                            namespace,
                            port.trunk,
                        ),
                    )
                )
                continue
            asked.append(
                (
                    index,
                    namespace,
                    PortRequest(
                        namespace["network"],
                        namespace["subnet"],
                        port.name,
                        port.uid,
                        ask.address,
                        list(port.security_groups) or [namespace["security_group"]],
                        tags(self.cluster, port.uid),
                        port.node,
                    ),
                )
            )
        if pooled:
            assert self.pools is not None
            for (index, pool_ask), assigned in zip(pooled, self.pools.assign([a for _, a in pooled]), strict=True):
                results[index] = assigned
                if not isinstance(assigned, BaseException):
                    self.ported[ports[index].name] = compact_uid(pool_ask.uid)
        made = self.backend.ensure_ports([request for _, _, request in asked]) if asked else []
        rows: list[Row] = []
        for (index, namespace, request), outcome in zip(asked, made, strict=True):
            if isinstance(outcome, BaseException):
                results[index] = outcome
                continue
            pod = ports[index]
            self.ported[pod.name] = compact_uid(pod.uid)
            state = {
                "port": outcome.id,
                "address": outcome.address,
                "pod_ip": pod.pod_ip,
                "mac": outcome.mac,
                "mtu": outcome.mtu,
                "node": pod.node,
                "network": request.network,
                "subnet": request.subnet,
                "cidr": namespace["cidr"],
                "gateway": namespace.get("gateway"),
                "security_groups": request.security_groups,
            }
            rows.append(("Pod", pod.uid, pod.namespace, pod.pod, state))
            results[index] = state
        self.store.save_many(rows)
        assert all(result is not None for result in results), "every pod answered"
        return results  # type: ignore[return-value]  # no None left (asserted)

    async def _stale_holder(self, in_use: AddressInUse) -> bool:
        holder = await self._blocking(self.store.row, "Pod", in_use.device_id) if in_use.device_id else None
        if holder is None:
            return in_use.device_id is not None  # a pod port we no longer track
        try:
            pod = await self.client.request("GET", object_path("Pod", holder.namespace, holder.name))
        except NotFound:
            return True
        return pod["metadata"]["uid"] != in_use.device_id or pod_port(pod, self.options) is None
