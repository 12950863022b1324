"""Ports' status (network/): what Neutron reports of pods' ports, for kuberaven-cni and for people.

    every PERIOD: backend.port_statuses(cluster, inactive)   (one listing: the ports made for one pod that are
                  not ACTIVE; then by id those that were and left that list, and the pooled ports that pods
                  hold and the database does not yet record ACTIVE; every port every RESYNC, and at start)
        a status that differs from the one recorded ──► the pod's translation row: state["status"]
                                                   ──► the pod's VIF annotation: "status" (ADD waits for ACTIVE)
                                                   ──► an Event on the pod: PortActive, or PortNotActive
                                                       (a Warning: ERROR, a failed binding, or ACTIVE lost)

Run by ``kuberaven run`` beside the translator of each cluster when pods
are wired by kuberaven-cni on the openstack backend. There a port is DOWN
until the node's OVN binds it, which happens once the node agent has
plugged it into br-int. The agent does not wait for this: it waits for
OVN's own ``ovn-installed`` on the node (or, without OVN, for the status
written here), so Neutron's view is for people: the pod's translation
status and its PortActive/PortNotActive Events. Neutron pushes nothing to
us, so the status is polled, in one call per period for every port that is
not ACTIVE. A pooled port's pod is the one its database row names
(pools.py). The translator writes the VIF (status DOWN at first); this
component alone writes the status afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeGuard

from .. import metrics
from ..component_status import ComponentStatus
from ..kube.client import KubeClient
from ..kube.errors import NotFound
from ..kube.event_recorder import (
    NORMAL,
    REASON_PORT_ACTIVE,
    REASON_PORT_NOT_ACTIVE,
    WARNING,
    EventRecorder,
    InvolvedObject,
)
from ..model.database import Database
from ..watch.engine import EngineOptions
from .annotations import annotate, object_path
from .backend import BINDING_FAILED, BackendError, NetworkBackend, PortStatus
from .pools import KIND as POOLED
from .rules.translate import since_creation
from .state import TranslationStore
from .vif import PORT_ACTIVE, VIF_ANNOTATION, Vif, VifError

log = logging.getLogger(__name__)

PERIOD = 1.0  # seconds between two looks at the ports not ACTIVE (for people: no pod waits on it)
RESYNC = 60.0  # seconds between two listings of every port (a change missed, a restart)
ERROR = "ERROR"


class ReportsPortStatus(NetworkBackend, Protocol):
    def port_statuses(
        self, cluster: str, ports: list[str] | None = None, inactive: bool = False
    ) -> dict[str, PortStatus]: ...


def reports_port_status(backend: NetworkBackend) -> TypeGuard[ReportsPortStatus]:
    return callable(getattr(backend, "port_statuses", None))


def event_of(previous: str | None, now: PortStatus) -> tuple[str, str] | None:
    """The Event a change of status is worth (type, reason), or None: DOWN before anything bound it is
    what every new port is."""
    if now.status == PORT_ACTIVE:
        return NORMAL, REASON_PORT_ACTIVE
    if now.status == ERROR or now.vif_type == BINDING_FAILED or previous == PORT_ACTIVE:
        return WARNING, REASON_PORT_NOT_ACTIVE
    return None


class PortActivation:
    """One cluster's ports' status (a Component of the daemon)."""

    def __init__(
        self,
        client: KubeClient,
        database: Database,
        cluster: str,
        backend: ReportsPortStatus,
        period: float = PERIOD,
        resync: float = RESYNC,
        concurrency: int = EngineOptions.concurrency,
    ) -> None:
        self.client = client
        self.cluster = cluster
        self.backend = backend
        self.store = TranslationStore(database, cluster, backend)
        self.period, self.resync = period, resync
        self.events = EventRecorder(client)
        self.waiting: dict[str, str] = {}  # ports not ACTIVE at the last listing: their status
        self.passes = 0
        self._stopping = asyncio.Event()
        self._executor = self._new_executor()
        self._limit = asyncio.Semaphore(concurrency)  # pods whose status is written at once

    @staticmethod
    def _new_executor() -> ThreadPoolExecutor:
        return ThreadPoolExecutor(max_workers=2, thread_name_prefix="port-status")

    async def run(self) -> None:
        # Each run its own threads: the supervisor runs this object again after a crash, and the last run's
        # executor was shut down on its way out (reusing it failed every restart until the supervisor gave up).
        self._executor = self._new_executor()
        last_full = -self.resync
        try:
            while not self._stopping.is_set():
                full = time.monotonic() - last_full >= self.resync
                try:
                    await self.poll(full)
                    last_full = time.monotonic() if full else last_full
                    self.passes += 1
                except BackendError as error:
                    log.warning("ports' status: %s", error)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self.period)
        finally:
            await self.events.flush()
            self._executor.shutdown(wait=False)

    def stop(self) -> None:
        self._stopping.set()

    def ready(self) -> bool:
        return self.passes > 0

    def status(self) -> list[ComponentStatus]:
        return [ComponentStatus(component="port-activation", cluster=self.cluster, ports_not_active=len(self.waiting))]

    async def _blocking(self, call: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, call, *args)

    async def poll(self, full: bool = False) -> None:
        """One listing, and every change it shows recorded."""
        if full:
            current = await self._blocking(self.backend.port_statuses, self.cluster)
        else:
            current = await self._blocking(self.backend.port_statuses, self.cluster, None, True)
            held = await self._blocking(self.store.pooled_ports_not_active)  # pods' pooled ports, by id
            left = [port for port in self.waiting if port not in current]  # ACTIVE now, or deleted
            asked = sorted(set(left) | set(held))
            if asked:
                current.update(await self._blocking(self.backend.port_statuses, self.cluster, asked))
        current = await self._blocking(self._with_pods, current)
        states = await self._blocking(self.store.states, "Pod", sorted({s.device_id for s in current.values()}))
        changed = [
            (status, states[status.device_id].get("status"))
            for status in current.values()
            if status.device_id in states
            and states[status.device_id].get("port") == status.id
            and states[status.device_id].get("status") != status.status
        ]
        await asyncio.gather(*(self._record(status, previous) for status, previous in changed))
        # A free pooled port (no pod: no device) is DOWN by nature and not waited on.
        self.waiting = {port: s.status for port, s in current.items() if s.status != PORT_ACTIVE and s.device_id}

    def _with_pods(self, current: dict[str, PortStatus]) -> dict[str, PortStatus]:
        """The statuses with each pooled port's pod as its device: Neutron knows none (pools.py keeps who holds
        a pooled port in the database), so a free one stays without."""
        pooled = [port for port, status in current.items() if not status.device_id]
        holders = {port: state.get("pod") for port, state in self.store.states(POOLED, pooled).items()}
        return {
            port: dataclasses.replace(status, device_id=holders.get(port) or "") if port in holders else status
            for port, status in current.items()
        }

    async def _record(self, status: PortStatus, previous: str | None) -> None:
        async with self._limit:
            expect, change = {"port": status.id}, {"status": status.status}
            uid = status.device_id
            row = await self._blocking(self.store.row, "Pod", uid)
            if row is None or not await self._blocking(self.store.update_state, "Pod", uid, expect, change):
                return  # the pod (or its port) went meanwhile
            log.info("port %s of pod %s/%s is %s", status.id, row.namespace, row.name, status.describe())
            pod = await self._vif_written(row.namespace, row.name, status)
            if pod is not None and status.status == PORT_ACTIVE and previous != PORT_ACTIVE:
                waited = since_creation(pod, dt.datetime.now(dt.UTC))
                if waited is not None:
                    metrics.POD_WIRING_SECONDS.labels("active").observe(waited)
            event = event_of(previous, status)
            if pod is not None and event is not None:
                involved = InvolvedObject("v1", "Pod", row.namespace, row.name, status.device_id)
                self.events.record(
                    involved,
                    *event,
                    f"port {status.id} is {status.describe()} on the "
                    f"{self.backend.name} backend (host {status.host or 'none'})",
                )

    async def _vif_written(self, namespace: str | None, name: str, status: PortStatus) -> dict[str, Any] | None:
        """The pod, with its VIF's status changed to ``status`` (None: no such pod, or no VIF of that port)."""
        try:
            pod = await self.client.request("GET", object_path("Pod", namespace, name))
        except NotFound:
            return None
        if pod["metadata"]["uid"] != status.device_id:
            return None
        text = (pod["metadata"].get("annotations") or {}).get(VIF_ANNOTATION)
        try:
            vif = Vif.from_json(text) if text else None
        except VifError:
            return None
        if vif is None or vif.port != status.id:
            return None
        written = dataclasses.replace(vif, status=status.status)
        await annotate(self.client, "Pod", pod, VIF_ANNOTATION, written.to_json())
        return pod
