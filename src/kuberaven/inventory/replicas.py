"""Who writes a slice's ``controller_replica_count`` (inventory/): pure rules, tested with plain data.

    a controller's watch event ──counted()──► whether its desired replicas are its slices' (implied.scaled())
    a pod's SliceRef (owners.py) ──first_count()──► the count a new slice starts with
                                 ──pod_sets_count()──► whether the pod's path writes a found slice's count

One writer per kind of controller. A built-in controller's count
(``SliceRef.watched``: Deployment, ReplicaSet, StatefulSet,
ReplicationController) is written from its watch events only; the pods'
owner walk reads the same spec.replicas through a cache (owners.py, minutes
old), so letting it write too made a scaled Deployment's count flip back to
the cached one. A custom controller's count comes from its scale
subresource, which no watch reports: the owner walk is its only writer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .records import SliceRef


def counted(event_type: str, controller: dict[str, Any]) -> bool:
    """Whether a watched controller's event sets its slices' count: not when deleted (its slices go with their
    pods), nor for a controller another controls (a Deployment's ReplicaSet), which no slice is named after."""
    if event_type == "DELETED":
        return False
    owners = controller["metadata"].get("ownerReferences") or ()
    return not any(reference.get("controller") for reference in owners)


def desired_replicas(controller: dict[str, Any]) -> int | None:
    return (controller.get("spec") or {}).get("replicas")


def first_count(ref: SliceRef, watched: Mapping[str, int | None]) -> int | None:
    """A new slice's count: what its built-in controller's watch last said, else what the owner walk read (a
    custom kind's scale, or a built-in one whose watch event has not come yet: it will correct it)."""
    uid = ref.controller_uid
    if ref.watched and uid is not None and uid in watched:
        return watched[uid]
    return ref.replicas


def pod_sets_count(ref: SliceRef, stored: int | None) -> bool:
    """Whether a pod's path writes its found slice's count: only a custom controller's, when it differs."""
    return not ref.watched and stored != ref.replicas
