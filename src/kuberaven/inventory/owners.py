"""Which slice a pod belongs to (inventory/): its top controller, found through ownerReferences.

    Pod ─controller→ ReplicaSet ─controller→ Deployment        slice "my-deployment"
    Pod ─controller→ Job ─controller→ CronJob                  slice "my-cronjob"
    Pod ─controller→ StatefulSet | DaemonSet | any custom kind slice named after it
    Pod with no controller                                      slice of its own, named after the pod

A label ``xos_slice_name`` on the top controller overrides the name (as in
the original). The top controller's desired replicas become the slice's
``controller_replica_count``: ``spec.replicas`` of a Deployment, ReplicaSet,
StatefulSet or ReplicationController, the scale subresource of a custom kind
that serves one, none for kinds without replicas (DaemonSet, Job, CronJob).
For the built-in kinds that count is only a new slice's first value: their
watches (implied.py's scaled()) are its writer from then on.
Owners are read with GET (any kind, through discovery) and cached by uid for
``ttl`` seconds, so 10,000 pods of one Deployment cost two requests. An owner
that is gone or unreadable ends the walk where it stands.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from ..kube.client import KubeClient
from ..kube.errors import ApiError
from ..kube.resources import Discovery, Resource, UnknownKind
from .records import BUILT_IN_GROUPS, REPLICATED_KINDS, SliceRef, replicas_watched

log = logging.getLogger(__name__)
SLICE_NAME_LABEL = "xos_slice_name"
MAX_DEPTH = 8


@dataclass(frozen=True, slots=True)
class _Owner:
    fetched: float
    parent: dict[str, Any] | None  # the owner's own controller reference
    labels: dict[str, str]
    replicas: int | None


class OwnerResolver:
    def __init__(self, client: KubeClient, discovery: Discovery, ttl: float = 300.0) -> None:
        self.client = client
        self.discovery = discovery
        self.ttl = ttl
        self._owners: dict[str, _Owner] = {}  # by uid

    async def slice_for(self, pod: dict[str, Any]) -> SliceRef:
        meta = pod["metadata"]
        reference = _controller(meta)
        if reference is None:
            return SliceRef.bare(meta["name"], meta.get("uid"))
        owner = None
        for _ in range(MAX_DEPTH):
            owner = await self._owner(reference, meta.get("namespace"))
            if owner.parent is None:
                break
            reference = owner.parent
        labels = owner.labels if owner else {}
        name = labels.get(SLICE_NAME_LABEL) or reference["name"]
        watched = replicas_watched(reference.get("apiVersion", ""), reference["kind"])
        return SliceRef(name, reference["kind"], reference.get("uid"), owner.replicas if owner else None, watched)

    async def _owner(self, reference: dict[str, Any], namespace: str | None) -> _Owner:
        uid = reference.get("uid", "")
        cached = self._owners.get(uid)
        if cached is not None and time.monotonic() - cached.fetched < self.ttl:
            return cached
        found = _Owner(time.monotonic(), None, {}, None)
        try:
            resource = await self.discovery.resolve(reference["apiVersion"], reference["kind"])
            path = resource.path(namespace, reference["name"])
            owner = await self.client.request("GET", path)
            if owner["metadata"].get("uid") == uid:  # not a namesake created since
                replicas = await self._replicas(resource, owner, path)
                found = _Owner(
                    found.fetched, _controller(owner["metadata"]), owner["metadata"].get("labels") or {}, replicas
                )
        except UnknownKind as error:
            log.debug("owner kind not served: %s", error)
        except ApiError as error:
            if error.code not in (403, 404):
                raise  # transient: the batch is retried
            log.debug("owner %s/%s not readable: %s", reference["kind"], reference["name"], error)
        self._owners[uid] = found
        return found

    async def _replicas(self, resource: Resource, owner: dict[str, Any], path: str) -> int | None:
        """The desired replicas of a controller that has some (None for a DaemonSet, a Job, ...)."""
        if resource.group in BUILT_IN_GROUPS and resource.kind in REPLICATED_KINDS:
            return (owner.get("spec") or {}).get("replicas")
        if not resource.scalable:
            return None
        try:
            scale = await self.client.request("GET", f"{path}/scale")
        except ApiError as error:
            if error.code not in (403, 404):
                raise
            return None
        return (scale.get("spec") or {}).get("replicas")


def _controller(meta: dict[str, Any]) -> dict[str, Any] | None:
    return next((ref for ref in meta.get("ownerReferences") or () if ref.get("controller")), None)
