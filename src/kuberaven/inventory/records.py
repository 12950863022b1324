"""What the inventory reads from an object (inventory/): plain data from the watch event, pure functions.

    watch event (dict) ──pod_record()──► PodRecord ──lifecycle.pod_transition()──► columns + events
                       ──slim()──► only what the writer and the owner walk read, queued instead of the object
    Item.of() = both, the unit the inventory queues for the writer (with the pod's SliceRef from owners.py)

Kept free of I/O so recorded pods can be fed to it in unit tests.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace
from typing import Any

from ..kube.reflector import WatchEvent
from ..model.images import ImageReference, parse_image

# Every field of a pod that pod_record() and the owner walk read: the pods informer decodes
# nothing else (kube/projection.py), so a 4 KB pod costs a few hundred bytes while in flight.
POD_FIELDS = (
    "metadata.labels",
    "metadata.ownerReferences",
    "metadata.deletionTimestamp",
    "spec.nodeName",
    "spec.serviceAccountName",
    "spec.serviceAccount",
    "spec.containers[].name",
    "spec.containers[].image",
    "status.phase",
    "status.podIP",
    "status.podIPs[].ip",
    "status.conditions[].type",
    "status.conditions[].status",
    "status.containerStatuses[].name",
    "status.containerStatuses[].ready",
    "status.containerStatuses[].restartCount",
)


@dataclass(slots=True)
class PodRecord:
    namespace: str
    name: str
    uid: str
    resource_version: str
    phase: str | None = None
    node: str | None = None
    pod_ips: list[str] = field(default_factory=list)
    ready: bool = False
    restart_count: int = 0
    containers: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    service_account: str = "default"
    images: list[ImageReference] = field(default_factory=list)
    controller: dict[str, Any] | None = None  # the ownerReference with controller=true
    terminating: bool = False  # metadata.deletionTimestamp is set

    @property
    def pod_ip(self) -> str | None:
        return self.pod_ips[0] if self.pod_ips else None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def pod_record(pod: dict[str, Any]) -> PodRecord:
    meta = pod["metadata"]
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    statuses = {c["name"]: c for c in status.get("containerStatuses") or ()}
    containers = []
    images = []
    for container in spec.get("containers") or ():
        observed = statuses.get(container["name"], {})
        image = container.get("image") or ""
        containers.append(
            {
                "name": container["name"],
                "image": image,
                "ready": bool(observed.get("ready", False)),
                "restart_count": int(observed.get("restartCount", 0)),
            }
        )
        # The API server accepts odd strings: such a container is recorded, but without an Image row.
        with contextlib.suppress(ValueError):
            images.append(parse_image(image))
    ips = [entry["ip"] for entry in status.get("podIPs") or () if entry.get("ip")]
    if not ips and status.get("podIP"):
        ips = [status["podIP"]]
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
    controller = next((ref for ref in meta.get("ownerReferences") or () if ref.get("controller")), None)
    return PodRecord(
        namespace=meta["namespace"],
        name=meta["name"],
        uid=meta["uid"],
        resource_version=meta["resourceVersion"],
        phase=status.get("phase"),
        node=spec.get("nodeName"),
        pod_ips=ips,
        ready=conditions.get("Ready") == "True",
        restart_count=sum(c["restart_count"] for c in containers),
        containers=containers,
        terminating=meta.get("deletionTimestamp") is not None,
        labels=dict(meta.get("labels") or {}),
        service_account=spec.get("serviceAccountName") or spec.get("serviceAccount") or "default",
        images=images,
        controller=controller,
    )


# Controllers the inventory watches for their desired replicas (spec.replicas), and their API groups.
REPLICATED_KINDS = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "ReplicationController"})
BUILT_IN_GROUPS = ("", "apps")


def replicas_watched(api_version: str, kind: str) -> bool:
    """Whether the controllers' watches report this kind's desired replicas (a built-in controller's spec.replicas).

    Then those watches are the one writer of its slices' ``controller_replica_count``;
    other kinds' counts come from the owner walk (owners.py: the scale subresource).
    """
    group = api_version.rpartition("/")[0]
    return bool(api_version) and group in BUILT_IN_GROUPS and kind in REPLICATED_KINDS


# What the writer and the owner walk read from any object's metadata.
_KEPT_METADATA = ("name", "namespace", "uid", "resourceVersion", "labels", "ownerReferences")


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """The part of an object the inventory stores, the rest dropped as soon as it is read.

    A decoded pod takes ≈25 KB of Python objects (managed fields, env,
    volumes the inventory never reads), so queueing whole objects made memory
    grow with the backlog; and secret values never sit in the queue.
    """
    meta = obj["metadata"]
    kept: dict[str, Any] = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {name: meta[name] for name in _KEPT_METADATA if name in meta},
    }
    if obj.get("kind") in ("ConfigMap", "Secret"):
        kept["data"] = dict.fromkeys(data_keys(obj))
    elif obj.get("kind") == "Service":
        kept["spec"] = {"ports": (obj.get("spec") or {}).get("ports") or []}
    elif obj.get("kind") in REPLICATED_KINDS:
        kept["spec"] = {"replicas": (obj.get("spec") or {}).get("replicas")}
    return kept


def data_keys(obj: dict[str, Any]) -> list[str]:
    """Keys of a ConfigMap or Secret; never the values."""
    return sorted({*(obj.get("data") or {}), *(obj.get("binaryData") or {}), *(obj.get("stringData") or {})})


def service_ports(service: dict[str, Any]) -> list[dict[str, Any]]:
    ports = []
    for port in (service.get("spec") or {}).get("ports") or ():
        target = port.get("targetPort")
        ports.append(
            {
                "name": port.get("name") or "",
                "internal_port": target if isinstance(target, int) else port.get("port"),
                "external_port": port.get("nodePort"),
                "protocol": port.get("protocol") or "TCP",
            }
        )
    return ports


# The controller kind of a bare pod's own slice (named after the pod).
BARE_POD = "Pod"


@dataclass(frozen=True, slots=True)
class SliceRef:
    """The slice a pod belongs to: its top controller (or the pod itself when bare)."""

    name: str
    controller_kind: str
    controller_uid: str | None
    replicas: int | None = None  # the controller's desired replicas, for kinds that have them
    # Built-in controllers (replicas_watched()): their watch events, not this ref, keep the count current.
    watched: bool = False

    @classmethod
    def bare(cls, name: str, uid: str | None) -> SliceRef:
        """A bare pod's own slice."""
        return cls(name, BARE_POD, uid)

    @property
    def is_bare(self) -> bool:
        return self.controller_kind == BARE_POD


@dataclass(slots=True)
class Item:
    """One entry of the inventory's queue (component.py → writer.py): an event, a bookmark or a synced marker."""

    target: str
    event: WatchEvent | None = None  # None: a bookmark (position only); the object slim()med
    resource_version: str | None = None  # a usable position, when the event gives one
    synced: bool = False  # the target's initial list is complete up to here
    slice: SliceRef | None = None
    record: PodRecord | None = None  # a pod's, read before the object was slimmed

    @classmethod
    def of(cls, target: str, event: WatchEvent, resource_version: str | None) -> Item:
        """An event as it is queued: the object slimmed, a pod's record read first."""
        # A relisted DELETED is a stub with no status; a watched one carries the pod's last state.
        stub = event.type == "DELETED" and event.relisted
        record = pod_record(event.object) if target == "pods" and not stub else None
        slimmed = replace(event, object=slim(event.object))
        return cls(target, slimmed, resource_version, record=record)
