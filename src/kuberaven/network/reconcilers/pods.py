"""Pods' ports (network/, a reconciler): a pod ──► its port on its namespace's network ──► its VIF annotation.

    Pod events, and the keys other parts queue (a policy's selection, a Service's source ranges, a status the
    cloud reported) ──► namespace/name ──► reconcile(key): the pod from the pods lister (watch/store.py)
        pod_port() (translate.py): due?   no (hostNetwork, finished, deleted) ──► port deleted, IP released
                                          (a pooled port: back to its pool once the pod is gone or finished)
        yes ──► the groups its port should carry: pod_groups() (pod_network.py) over what NetworkPolicies give
                (network_policies.py's policy_groups()) and Services with source ranges (lb_ranges.py)
            ──► its node's trunk (trunks.py, cached per node): a nested node's pod takes a subport of it
            ──► Batcher (many pods, one backend call + one transaction) ──► ensure_ports ──► its record
                (pod_network.py) as its "Pod" row
                (our CNI on Neutron: pools.py's take(), a pooled port, and both rows in one transaction;
                an empty pool: the pod waits here for its refill, woken as ports come; a refill refused on
                the quota or the subnet's addresses: a Warning Event and kuberaven.io/port-failed, with which
                the node agent fails the pod's ADD at once)
            ──► the record made to hold: the port's groups in the backend, the status the cloud reported
                (port_reports.py), both into the row
            ──► with our CNI: the VIF annotation kuberaven.io/vif (pod_vif.py), merge-patched under the pod's
                resourceVersion; kuberaven-cni reads it

This reconciler is the one writer of a pod's "Pod" row, its VIF annotation
and its port's groups in the backend: the rest of the translation computes
what they should be and queues the pod.

Many keys are reconciled at once (PORT_BATCH workers): each mostly waits on
the batcher, so a cold start of thousands of pods is a few transactions.

With our CNI (``cni: kuberaven``) the port comes first: made the moment a pod
is scheduled, bound to its node, and its IP becomes the pod's. With another
CNI the port follows the IP that CNI gave (and pods get no annotation: nothing
would read it, and a patch per pod doubles a cold start's API writes).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

from ...kube.errors import NotFound
from ...kube.event_recorder import REASON_FAILED, WARNING, InvolvedObject
from ...kube.uids import compact_uid, uid_text
from ...watch.batcher import Batcher
from ...watch.reconciler import Reconciler, Watch
from ...watch.store import Lister
from ...watch.watcher import WatchTarget
from ...watch.workqueue import Waiting
from ..annotations import object_path
from ..backend import CNI_KUBERAVEN, AddressInUse, BackendError, tags
from ..drivers.port_status import PortStatus
from ..drivers.ports import PortRequest
from ..pod_network import PodNetwork, pod_groups
from ..pool_recovery import KIND as POOLED
from ..pools import PoolAsk, PoolEmpty, PortPools, PortRefused, Taken
from ..port_reports import PortReports
from ..rules.translate import PodPort, pod_port, port_ask, translated_namespace
from ..state import Row
from ..trunks import NodeTrunks
from .context import TranslationContext, TranslationReconciler
from .pod_vif import PodVifs

log = logging.getLogger(__name__)

NAME = "network-pods"  # the reconciler's, and its queue's (others queue a pod through the context's pod_queue)
PORT_BATCH = 256  # pods whose ports are made in one backend call (and one transaction of translation rows)
PODS = WatchTarget("v1", "Pod")
POOL_WAIT = 60.0  # seconds a pod waits for its empty pool's refill before its reconcile fails (and is retried)
FINISHED = ("Succeeded", "Failed")  # a finished pod's sandbox is torn down: its pooled port may serve another


class PolicyGroups(Protocol):
    """The groups NetworkPolicies give pods' ports (network_policies.py)."""

    async def policy_groups(self, key: str) -> tuple[str, ...] | None:
        """The groups of the policies selecting the pod ``key`` ((): none does); None: not known yet."""


class RangeGroups(Protocol):
    """The groups Services with source ranges give their members' ports (lb_ranges.py)."""

    def member_groups(self, namespace: str, pod: str) -> tuple[str, ...] | None:
        """Those in place of the namespace's group on the pod's port; None: none."""


@dataclass(frozen=True)
class Ported:
    """A pod's record as the batch found or made it, and its namespace's group (None: its network is gone)."""

    network: PodNetwork
    namespace_group: str | None


@dataclass(frozen=True)
class StatusChange:
    """A status the cloud reported (``report``), recorded in place of ``status`` (None: none was)."""

    status: str | None
    report: PortStatus


class PodsReconciler(TranslationReconciler):
    """The pods reconciler and its port batcher."""

    def __init__(
        self,
        context: TranslationContext,
        pods: Lister | None = None,
        pools: PortPools | None = None,
        policies: PolicyGroups | None = None,
        trunks: NodeTrunks | None = None,
        ranges: RangeGroups | None = None,
        reports: PortReports | None = None,
    ) -> None:
        """``pods``: the pods lister (what reconcile reads); the batch path alone runs without one. ``pools``:
        where scheduled pods take their ports (openstack backend, our CNI); None: each port is made for its pod.
        ``policies``, ``ranges``: where the groups of NetworkPolicies and Services' source ranges are computed;
        None: none. ``trunks``: each node's trunk (with pools on Neutron): a nested node's pods take subports of
        it. ``reports``: the ports' status as the cloud reports it (activation.py's)."""
        super().__init__(context)
        self.pods = pods
        self.pools = pools
        self.policies = policies
        self.trunks = trunks
        self.ranges = ranges
        self.reports = reports
        self.batcher: Batcher[PodPort, Ported] = Batcher(self._ensure_ports, self._blocking, size=PORT_BATCH)
        self.vifs = PodVifs(self.client, self.events, self.backend.name)
        # Which pod (namespace/name → uid, compact: see compact_uid) may have a port: our own translation rows,
        # loaded at start and added on translation (a superset). A pod without a port due that is not in it has
        # nothing to forget, and costs no query: on a cold start most pods are not yet scheduled. Batches write it
        # in worker threads, reconciles read and drop entries on the loop: under the lock, each check-then-write.
        self.ported: dict[str, int | str] = {}
        self._ported_lock = threading.Lock()

    def reconciler(self) -> Reconciler:
        # Reconciles mostly wait on the port batcher: many at once fill its batches.
        return Reconciler(NAME, self.reconcile, [Watch(PODS)], concurrency=PORT_BATCH, enqueue=self.pod_queue)

    async def load(self) -> None:
        rows = await self._blocking(self.store.keys_of, "Pod")
        loaded = {key: compact_uid(uid) for key, uid in rows.items()}
        with self._ported_lock:
            self.ported = loaded

    def _ported_uid(self, key: str) -> int | str | None:
        with self._ported_lock:
            return self.ported.get(key)

    def _unported(self, key: str, uid: int | str) -> None:
        """``key`` no longer has the port of ``uid`` (a port taken for a newer pod of that name meanwhile stays)."""
        with self._ported_lock:
            if self.ported.get(key) == uid:
                del self.ported[key]

    def _took(self, key: str, uid: str) -> None:
        with self._ported_lock:
            self.ported[key] = compact_uid(uid)

    async def reconcile(self, key: str) -> None:
        assert self.pods is not None
        # Other parts queue pods too (a policy, source ranges, a status reported): a pod a resumed informer has not
        # given is read by name, once; absent then means deleted.
        pod = await self.pods.fetch(key)
        spec = pod_port(pod, self.options) if pod is not None else None
        uid = compact_uid(pod["metadata"]["uid"]) if pod is not None else None
        old = self._ported_uid(key)
        if old is not None and (spec is None or old != uid):  # gone, no longer due, or made again under its name
            if not await self._blocking(self._forget, uid_text(old), pod if old == uid else None):
                return  # a pooled port stays with its terminating pod until the pod is gone
            self._unported(key, old)
        if pod is None or spec is None:
            return
        meta = pod["metadata"]
        if not translated_namespace(meta["namespace"], self.options):
            return
        policy = await self.policies.policy_groups(key) if self.policies is not None else ()
        ranged = self.ranges.member_groups(meta["namespace"], meta["name"]) if self.ranges is not None else None
        involved = InvolvedObject("v1", "Pod", meta["namespace"], meta["name"], meta["uid"])
        try:
            trunk = await self.trunks.of(spec.node) if self.trunks is not None and spec.node is not None else None
            # ``key`` is spec.name, and the very string the informer's store and reflector hold: ``ported`` keeps
            # that one rather than a copy per pod. A new port starts with the groups it should carry (): its
            # namespace's), so a new pod of a default-deny namespace is not open while its port is made.
            groups = tuple(policy or ranged or ())
            port = PodPort(key, spec.address, meta["uid"], meta["namespace"], meta["name"], spec.node, groups, trunk)
            ported = await self._port(port)
            network, change = await self._held(key, meta["uid"], ported, policy, ranged)
        except BackendError as error:  # what `kubectl describe pod` shows; the queue retries
            self.events.record(involved, WARNING, REASON_FAILED, f"port on the {self.backend.name} backend: {error}")
            if isinstance(error, PortRefused) and spec.address is None:  # its ADD fails with it, not at a timeout
                await self.vifs.port_failed(pod, str(error))
            raise
        written = None
        if spec.address is None:  # scheduled, no IP yet: our CNI will wire it from the annotation
            written = await self.vifs.write(pod, network, True, involved)
        elif self.options.cni == CNI_KUBERAVEN:  # wired: its VIF's status follows the record's
            written = await self.vifs.write(pod, network, False, involved)
        if change is not None:
            self.vifs.status_changed(involved, change.status, change.report, written)
        if policy is None:
            raise Waiting(f"pod {key}: its NetworkPolicies are not all known, or one's group is not made yet")

    async def _held(
        self, key: str, uid: str, ported: Ported, policy: tuple[str, ...] | None, ranged: tuple[str, ...] | None
    ) -> tuple[PodNetwork, StatusChange | None]:
        """The pod's record made to hold: its port with the groups pod_groups() gives (as they are while a
        policy's group is not made, ``policy`` None, or its namespace's network is gone), and the status the
        cloud last reported of it. The record, and the status change recorded (None: none)."""
        network = ported.network
        report = self.reports.reported(network.port) if self.reports is not None else None
        status = report.status if report is not None else network.status
        own = ported.namespace_group
        groups = network.security_groups
        if policy is not None and own is not None and set(wanted := pod_groups(own, policy, ranged)) != set(groups):
            groups = wanted  # the same groups in another order (a pool's are sorted) need no call
        held = dataclasses.replace(network, security_groups=groups, status=status)
        if held != network:
            await self._blocking(self._record, uid, network, held)
        if report is None or self.reports is None:
            return held, None
        self.reports.applied(network.port, report.status)
        if report.status == network.status:
            return held, None
        log.info("port %s of pod %s is %s", network.port, key, report.describe())
        return held, StatusChange(network.status, report)

    def _record(self, uid: str, before: PodNetwork, after: PodNetwork) -> None:
        """A changed record into the backend and the pod's row (worker thread): its groups first, on the port."""
        if after.security_groups != before.security_groups:
            self.backend.set_port_security_groups(after.port, list(after.security_groups))
        if not self.store.update_state("Pod", uid, {"port": before.port}, after.to_state()):
            raise Waiting(f"pod {uid} no longer holds port {before.port}")

    def _forget(self, uid: str, pod: dict[str, Any] | None) -> bool:
        """What was made for a pod that no longer has a port due (worker thread); False: kept for now.

        A pooled port goes back to its pool, in one transaction with the pod's row, once the pod is gone or
        finished: a terminating pod may still be running on it, and no port serves two pods; meanwhile its
        pool counts it as returning (no port is made in its place). Any other port is deleted."""
        state = self.store.state("Pod", uid)
        if state is None:
            return True
        if self.pools is not None and state.get("pooled"):
            if pod is not None and pod.get("status", {}).get("phase") not in FINISHED:
                self.pools.returning(uid, pod["metadata"]["namespace"], state)
                return False
            groups = state.get("security_groups") or []
            self.pools.released(uid, self.store.release_port(POOLED, str(state.get("port")), uid, groups))
        else:
            self.store.forget("Pod", uid, ("port",))
        if self.reports is not None:
            self.reports.forget(str(state.get("port")))
        return True

    async def _port(self, port: PodPort) -> Ported:
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

    async def _submit(self, port: PodPort) -> Ported:
        try:
            return await self.batcher.submit(port)
        except AddressInUse as in_use:
            # Another CNI reuses addresses: the holder may be the port of a pod that is gone.
            if not await self._stale_holder(in_use):
                raise
            log.info("releasing %s, held by a pod that is gone", in_use.address)
            await self._blocking(self.backend.delete, "port", in_use.holder)
            return await self.batcher.submit(port)

    def _ensure_ports(self, ports: list[PodPort]) -> list[Ported | BaseException]:
        """A batch of pods' ports, made unless they exist as due, and their translation rows (worker thread):
        each pod's record, or why it has none."""
        results: list[Ported | BaseException | None] = [None] * len(ports)
        with self._ported_lock:  # a pod not in ported has no translation row: no query for it (most of a cold start)
            rowed = [p.uid for p in ports if self.ported.get(p.name) == compact_uid(p.uid)]
        states = self.store.states("Pod", rowed)
        namespaces: dict[str, dict[str, Any] | None] = {}
        asked: list[tuple[int, dict[str, Any], PortRequest]] = []
        pooled: list[tuple[int, PoolAsk]] = []
        for index, port in enumerate(ports):
            if port.namespace not in namespaces:
                namespaces[port.namespace] = self.store.namespace_state(port.namespace)
            namespace = namespaces[port.namespace]
            state = states.get(port.uid)
            ask = port_ask(state, port.pod_ip, self.options)
            if not ask.needed:
                assert state is not None  # port_ask asks for every pod without a state
                own = str(namespace["security_group"]) if namespace is not None else None
                results[index] = Ported(PodNetwork.from_state(state), own)
            elif namespace is None:
                results[index] = Waiting(f"namespace {port.namespace} has no network yet")
            elif self.pools is not None and ask.address is None and port.node is not None:
                groups = port.security_groups or (namespace["security_group"],)
                pool_ask = PoolAsk(
                    port.uid, port.namespace, port.pod, port.node, port.pod_ip, groups, namespace, port.trunk
                )
                pooled.append((index, pool_ask))
            else:
                asked.append((index, namespace, self._request(port, namespace, ask.address)))
        if pooled:
            self._take_pooled(ports, pooled, namespaces, results)
        if asked:
            self._make(ports, asked, results)
        assert all(result is not None for result in results), "every pod answered"
        return results  # type: ignore[return-value]  # no None left (asserted)

    def _request(self, port: PodPort, namespace: dict[str, Any], address: str | None) -> PortRequest:
        groups = list(port.security_groups) or [namespace["security_group"]]
        network, subnet, made = namespace["network"], namespace["subnet"], tags(self.cluster, port.uid)
        return PortRequest(network, subnet, port.name, port.uid, address, groups, made, port.node)

    def _make(
        self, ports: list[PodPort], asked: list[tuple[int, dict[str, Any], PortRequest]], results: list[Any]
    ) -> None:
        """Ports made for their pods in one backend call, and the pods' rows in one transaction."""
        made = self.backend.ensure_ports([request for _, _, request in asked])
        rows: list[Row] = []
        for (index, namespace, request), outcome in zip(asked, made, strict=True):
            if isinstance(outcome, BaseException):
                results[index] = outcome
                continue
            pod = ports[index]
            self._took(pod.name, pod.uid)
            network = PodNetwork(
                port=outcome.id,
                address=outcome.address,
                mac=outcome.mac,
                mtu=outcome.mtu,
                network=request.network,
                subnet=request.subnet,
                cidr=namespace["cidr"],
                gateway=namespace.get("gateway"),
                security_groups=tuple(request.security_groups),
                pod_ip=pod.pod_ip,
                node=pod.node,
            )
            rows.append(("Pod", pod.uid, pod.namespace, pod.pod, network.to_state()))
            results[index] = Ported(network, str(namespace["security_group"]))
        self.store.save_many(rows)

    def _take_pooled(
        self,
        ports: list[PodPort],
        pooled: list[tuple[int, PoolAsk]],
        namespaces: dict[str, dict[str, Any] | None],
        results: list[Any],
    ) -> None:
        """Pooled ports taken for their pods, and ONE transaction: each port's row names its pod, and each pod's
        row is its record (no port serves two pods); the transaction failed, the ports go back to their pools."""
        assert self.pools is not None
        taken: list[tuple[int, Taken]] = []
        for (index, _), took in zip(pooled, self.pools.take([ask for _, ask in pooled]), strict=True):
            if isinstance(took, Taken):
                taken.append((index, took))
            else:
                results[index] = took
        records = [took.network() for _, took in taken]
        rows: list[Row] = []
        for (_, took), network in zip(taken, records, strict=True):
            ask = took.ask
            rows += [took.row(), ("Pod", ask.uid, ask.namespace, ask.pod, network.to_state())]
        try:
            self.store.save_many(rows)
        except Exception as error:
            self.pools.not_recorded([took for _, took in taken])
            for index, took in taken:
                results[index] = BackendError(f"recording the pool port of pod {took.ask.pod}: {error}")
            return
        for (index, took), network in zip(taken, records, strict=True):
            self._took(ports[index].name, took.ask.uid)
            namespace = namespaces[took.ask.namespace] or {}
            results[index] = Ported(network, namespace.get("security_group"))

    async def _stale_holder(self, in_use: AddressInUse) -> bool:
        holder = await self._blocking(self.store.row, "Pod", in_use.device_id) if in_use.device_id else None
        if holder is None:
            return in_use.device_id is not None  # a pod port we no longer track
        try:
            pod = await self.client.request("GET", object_path("Pod", holder.namespace, holder.name))
        except NotFound:
            return True
        return pod["metadata"]["uid"] != in_use.device_id or pod_port(pod, self.options) is None
