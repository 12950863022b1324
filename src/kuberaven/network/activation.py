"""Ports' status (network/): what Neutron reports of pods' ports, an input of the pods reconciler.

    every PERIOD: backend.port_status.port_statuses(cluster, inactive)   (one listing: the ports made for one
                  pod that are not ACTIVE; then by id those that were and left that list, and the pooled ports
                  that pods hold and the database does not yet record ACTIVE; every port every RESYNC, and at
                  start)
        a status that differs from the one the pod's translation row records
            ──► port_reports.py: reported, and the pod queued to the pods reconciler (reconcilers/pods.py),
                which records it: the row's state["status"], the VIF's "status" (ADD waits for ACTIVE on a node
                without OVN), an Event on the pod: PortActive, or PortNotActive (a Warning: ERROR, a failed
                binding, or ACTIVE lost)

Run by ``kuberaven run`` beside the translator of each cluster when pods
are wired by kuberaven-cni on the openstack backend, on the cluster's
translation runtime (translation_runtime.py): its store, its threads and
its reports. There a port is DOWN until the node's OVN binds it, which
happens once the node agent has plugged it into br-int. The agent does not
wait for this: it waits for OVN's own ``ovn-installed`` on the node (or,
without OVN, for the status recorded here), so Neutron's view is for people:
the pod's translation status and its PortActive/PortNotActive Events.
Neutron pushes nothing to us, so the status is polled (kube/loops.py's
every(): a failed look is logged and the next comes a period later), in one
call per period for every port that is not ACTIVE. A pooled port's pod is
the one its database row names (pools.py). This component reads the rows
and writes nothing: the pods reconciler is the one writer of a pod's row and
VIF.
"""

from __future__ import annotations

import dataclasses
import math
import time

from ..component_status import ComponentStatus
from ..kube.loops import Loops
from .backend import BackendError
from .drivers.port_status import PortStatus, PortStatusDriver
from .pools import KIND as POOLED
from .translation_runtime import TranslationRuntime
from .vif import PORT_ACTIVE

PERIOD = 1.0  # seconds between two looks at the ports not ACTIVE (for people: no pod waits on it)
RESYNC = 60.0  # seconds between two listings of every port (a change missed, a restart)


class PortActivation:
    """One cluster's ports' status (a Component of the daemon)."""

    def __init__(
        self,
        runtime: TranslationRuntime,
        port_status: PortStatusDriver,
        period: float = PERIOD,
        resync: float = RESYNC,
    ) -> None:
        """``port_status``: the runtime's backend's driver of it (reports_port_status() found it has one)."""
        self.runtime = runtime
        self.cluster = runtime.cluster
        self.port_status = port_status
        self.store = runtime.store
        self.reports = runtime.reports
        self._blocking = runtime.blocking
        self.period, self.resync = period, resync
        self.waiting: dict[str, str] = {}  # ports not ACTIVE at the last listing: their status
        self.passes = 0
        self._loops = Loops()

    async def run(self) -> None:
        """A look every period until stopped; each run starts with a listing of every port."""
        last_full = -math.inf

        async def look() -> None:
            nonlocal last_full
            full = time.monotonic() - last_full >= self.resync
            await self.poll(full)
            last_full = time.monotonic() if full else last_full
            self.passes += 1

        async with self.runtime.running():
            try:
                await self._loops.every(self.period, look, f"ports' status of {self.cluster}", quiet=(BackendError,))
            finally:
                await self._loops.join()

    def stop(self) -> None:
        self._loops.stop()

    def ready(self) -> bool:
        return self.passes > 0

    def status(self) -> list[ComponentStatus]:
        return [ComponentStatus(component="port-activation", cluster=self.cluster, ports_not_active=len(self.waiting))]

    async def poll(self, full: bool = False) -> None:
        """One listing, and every change it shows reported."""
        if full:
            current = await self._blocking(self.port_status.port_statuses, self.cluster)
        else:
            current = await self._blocking(self.port_status.port_statuses, self.cluster, None, True)
            held = await self._blocking(self.store.pooled_ports_not_active)  # pods' pooled ports, by id
            left = [port for port in self.waiting if port not in current]  # ACTIVE now, or deleted
            asked = sorted(set(left) | set(held))
            if asked:
                current.update(await self._blocking(self.port_status.port_statuses, self.cluster, asked))
        current = await self._blocking(self._with_pods, current)
        states = await self._blocking(self.store.states, "Pod", sorted({s.device_id for s in current.values()}))
        changed = [
            status
            for status in current.values()
            if status.device_id in states
            and states[status.device_id].get("port") == status.id
            and states[status.device_id].get("status") != status.status
        ]
        if changed:
            await self._report(changed)
        if full:  # every port listed: reports of ports that went are dropped
            self.reports.keep_only(current)
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

    async def _report(self, changed: list[PortStatus]) -> None:
        """Each change reported, under its pod's key: the pods reconciler records it."""
        keys = await self._blocking(self.store.keys_named, "Pod", sorted({s.device_id for s in changed}))
        for status in changed:
            key = keys.get(status.device_id)
            if key is not None:  # else the pod went meanwhile
                self.reports.report(key, status)
