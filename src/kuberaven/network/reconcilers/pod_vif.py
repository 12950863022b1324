"""A pod's VIF annotation and its port's Events (network/reconcilers/, the pods reconciler's API edge).

    pods.py, a pod and its record (pod_network.py) ──► PodVifs.write():
        scheduled, no IP yet ──► the whole VIF (vif.py), which kuberaven-cni wires the pod from; a PortReady
                                 Event; kuberaven.io/port-failed taken away
        wired (it has an IP) ──► only the VIF's status follows the record's (what the cloud reported)
        each value a function of the pod as it stands, so a conflict (409) computes it again (annotations.py)
    pods.py, a status the cloud reported recorded ──► PodVifs.status_changed(): PortActive, or PortNotActive
                                                      (a Warning: ERROR, a failed binding, or ACTIVE lost)

Only on our CNI's path, where the pod waits for it: a mirror port per pod of
another CNI would be an annotation and an Event per pod of a cold start.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from ... import metrics
from ...kube.client import KubeClient
from ...kube.event_recorder import (
    NORMAL,
    REASON_PORT_ACTIVE,
    REASON_PORT_NOT_ACTIVE,
    REASON_PORT_READY,
    WARNING,
    EventRecorder,
    InvolvedObject,
)
from ..annotations import KEEP, Keep, annotate
from ..drivers.port_status import BINDING_FAILED, PortStatus
from ..pod_network import PodNetwork
from ..rules.translate import since_creation
from ..vif import PORT_ACTIVE, PORT_FAILED_ANNOTATION, VIF_ANNOTATION, Binding, Vif, VifError

# How each backend's ports are attached on a bare node (the CNI plugin reads it from the VIF); on a nested node
# (a VM on a trunk's parent port) a pod's port is a subport of the trunk: binding vlan (translate.py's pod_vif).
BINDINGS = {"embedded": Binding.BRIDGE, "openstack": Binding.OVS}
ERROR = "ERROR"  # Neutron's status of a port it failed to set up


def event_of(previous: str | None, now: PortStatus) -> tuple[str, str] | None:
    """The Event a change of status is worth (type, reason), or None: DOWN before anything bound it is
    what every new port is."""
    if now.status == PORT_ACTIVE:
        return NORMAL, REASON_PORT_ACTIVE
    if now.status == ERROR or now.vif_type == BINDING_FAILED or previous == PORT_ACTIVE:
        return WARNING, REASON_PORT_NOT_ACTIVE
    return None


class PodVifs:
    """The pods reconciler's writes to pods: their VIF annotation, and Events on them."""

    def __init__(self, client: KubeClient, events: EventRecorder, backend: str) -> None:
        self.client = client
        self.events = events
        self.backend = backend
        self.binding = BINDINGS.get(backend, Binding.BRIDGE)  # a subport's: vlan

    async def write(
        self, pod: dict[str, Any], network: PodNetwork, whole: bool, involved: InvolvedObject
    ) -> dict[str, Any] | None:
        """The pod's VIF as ``network`` says it: ``whole`` (scheduled, no IP yet), or its status alone. The pod as
        written, or None when nothing was."""
        if not whole:
            return await annotate(self.client, "Pod", pod, VIF_ANNOTATION, lambda now: self._status(now, network))
        vif = network.vif(self.binding)
        text = vif.to_json()
        written = await annotate(self.client, "Pod", pod, VIF_ANNOTATION, lambda _: text)
        if PORT_FAILED_ANNOTATION in (pod["metadata"].get("annotations") or {}):
            await annotate(self.client, "Pod", written or pod, PORT_FAILED_ANNOTATION, None)
        if written is None:
            return None
        waited = since_creation(written, dt.datetime.now(dt.UTC))  # the pods' store keeps no creationTimestamp
        if waited is not None:
            metrics.POD_WIRING_SECONDS.labels("vif").observe(waited)
        message = f"port {vif.port} {vif.ip} ({vif.mac}) on network {vif.network} ({self.backend})"
        self.events.record(involved, NORMAL, REASON_PORT_READY, f"{message}: kuberaven-cni wires it")
        return written

    def _status(self, pod: dict[str, Any], network: PodNetwork) -> str | Keep:
        """The pod's VIF with the status ``network`` records, from the VIF it carries now (KEEP: it has none of
        that port, the status is unchanged, or none was reported yet)."""
        text = (pod["metadata"].get("annotations") or {}).get(VIF_ANNOTATION)
        if not text or network.status is None:
            return KEEP
        try:
            vif = Vif.from_json(text)
        except VifError:
            return KEEP
        if vif.port != network.port or vif.status == network.status:
            return KEEP
        return dataclasses.replace(vif, status=network.status).to_json()

    async def port_failed(self, pod: dict[str, Any], error: str) -> None:
        """Why the pod gets no port, when a user must act: the node agent fails its ADD with it at once."""
        await annotate(self.client, "Pod", pod, PORT_FAILED_ANNOTATION, error)

    def status_changed(
        self, involved: InvolvedObject, previous: str | None, now: PortStatus, written: dict[str, Any] | None
    ) -> None:
        """A status the cloud reported, recorded (``previous``: the one recorded before): its Event, and the
        pod's wiring time once ACTIVE (``written``: the pod as its VIF was written, with its creation time)."""
        if written is not None and now.status == PORT_ACTIVE and previous != PORT_ACTIVE:
            waited = since_creation(written, dt.datetime.now(dt.UTC))
            if waited is not None:
                metrics.POD_WIRING_SECONDS.labels("active").observe(waited)
        event = event_of(previous, now)
        if event is not None:
            self.events.record(
                involved,
                *event,
                f"port {now.id} is {now.describe()} on the {self.backend} backend (host {now.host or 'none'})",
            )
